package config

import (
	"bytes"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"
)

// TestKeysCoverEveryField guards the key table: every field of every
// section has exactly one key, so a new field cannot be left unloadable.
func TestKeysCoverEveryField(t *testing.T) {
	t.Parallel()
	var c Config
	fields := make(map[uintptr]string)
	cv := reflect.ValueOf(&c).Elem()
	for i := range cv.NumField() {
		sec := cv.Field(i)
		if sec.Kind() != reflect.Struct {
			continue // File
		}
		for j := range sec.NumField() {
			fields[sec.Field(j).Addr().Pointer()] = cv.Type().Field(i).Name + "." + sec.Type().Field(j).Name
		}
	}
	seen := make(map[string]bool)
	for _, k := range keys() {
		if seen[k.name] {
			t.Errorf("key %s listed twice", k.name)
		}
		seen[k.name] = true
		p := k.field(&c).Addr().Pointer()
		if _, ok := fields[p]; !ok {
			t.Errorf("key %s points to no field, or to one already taken", k.name)
		}
		delete(fields, p)
		if sec, _, _ := strings.Cut(k.name, "."); !strings.Contains(strings.Join(sections(), " "), sec) {
			t.Errorf("key %s is in no section", k.name)
		}
	}
	for _, f := range fields {
		t.Errorf("field %s has no key", f)
	}
}

// TestLeafYAMLDocumentsEveryKey checks that leaf.yaml sets every key
// (not just inherits its default) and comments each one, and that
// testdata/all.yaml sets every key too.
func TestLeafYAMLDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../leaf.yaml", "testdata/all.yaml"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			v := viper.New()
			v.SetConfigType("yaml")
			if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			inFile := make(map[string]bool)
			for _, k := range v.AllKeys() {
				inFile[k] = true
			}
			for _, k := range keys() {
				if !inFile[k.name] {
					t.Errorf("%s does not set %s", path, k.name)
				}
			}
			if path == "../leaf.yaml" {
				checkComments(t, path, data)
			}
		})
	}
}

// checkComments wants a comment line right above each key of a section,
// and each key in the order of keys(), which is also --help's order.
func checkComments(t *testing.T, path string, data []byte) {
	t.Helper()
	var order []string
	yamlLines(data, func(n int, _, key, prev string) {
		if key == "" {
			return
		}
		order = append(order, key)
		if !strings.HasPrefix(strings.TrimSpace(prev), "#") {
			t.Errorf("%s:%d: key %s has no comment line above it", path, n, key)
		}
	})
	var want []string
	for _, k := range keys() {
		want = append(want, k.name)
	}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("%s keys in order\n %q\nwant\n %q", path, order, want)
	}
}

func TestLogValueRedacts(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.Server.Password = "srv-hunter2"
	cfg.Server.AdminPassword = "adm-hunter2"
	cfg.Store.Driver = "mysql"
	cfg.Store.DSN = "leaf:db-hunter2@tcp(db.internal:3306)/leafdb?parseTime=true"
	cfg.File = "/etc/leaf.yaml"

	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("config", "config", cfg)
	log.Info("parts", "server", cfg.Server, "store", cfg.Store)
	log.Info("pointer", "config", &cfg)
	out := buf.String()
	if strings.Contains(out, "hunter2") {
		t.Fatalf("a password reached the log:\n%s", out)
	}
	for _, w := range []string{
		`"password":"REDACTED"`, `"admin_password":"REDACTED"`,
		`"dsn":"leaf:REDACTED@tcp(db.internal:3306)/leafdb?parseTime=true"`,
		`"addr":"127.0.0.1:6380"`, `"load_timeout":2000000000`, `"prefetch_at":0.1`,
		`"file":"/etc/leaf.yaml"`, `"segment":{`, `"auto_create":"on"`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %s:\n%s", w, out)
		}
	}

	// Empty passwords stay visibly empty: "not set" is useful to see.
	buf.Reset()
	log.Info("config", "config", Default())
	if out := buf.String(); !strings.Contains(out, `"password":""`) || strings.Contains(out, "REDACTED") {
		t.Errorf("default config log:\n%s", out)
	}
}

func TestSlogLevel(t *testing.T) {
	t.Parallel()
	for level, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		if got := (LogConfig{Level: level}).SlogLevel(); got != want {
			t.Errorf("SlogLevel(%q) = %v, want %v", level, got, want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0", 2 * time.Second: "2s", 15 * time.Minute: "15m", time.Hour: "1h",
		90 * time.Second: "1m30s", 750 * time.Millisecond: "750ms", time.Hour + time.Second: "1h0m1s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(formatDuration(d)); err != nil || back != d {
			t.Errorf("ParseDuration(formatDuration(%v)) = %v, %v", d, back, err)
		}
	}
}
