package config

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "write Default's values into ../leaf.yaml")

// withDefaults returns leaf.yaml (data) with the value of every key line
// written from Default: the file's comments are its documentation, its
// values the code's. go test ./config -run TestLeafYAMLValues -update
// writes the result back.
func withDefaults(t *testing.T, data []byte) []byte {
	t.Helper()
	def := Default()
	values := make(map[string]string)
	for _, k := range keys() {
		switch v := k.field(&def).Interface().(type) {
		case string:
			values[k.name] = strconv.Quote(v)
		case float64:
			values[k.name] = strconv.FormatFloat(v, 'g', -1, 64)
		case time.Duration:
			values[k.name] = formatDuration(v)
		default:
			values[k.name] = fmt.Sprint(v)
		}
	}
	var out bytes.Buffer
	yamlLines(data, func(_ int, line, key, _ string) {
		if key != "" {
			v, ok := values[key]
			if !ok {
				t.Fatalf("leaf.yaml sets %s, which is no key", key)
			}
			_, name, _ := strings.Cut(key, ".")
			line = line[:strings.Index(line, name)] + name + ": " + v
		}
		out.WriteString(line + "\n")
	})
	return out.Bytes()
}

// yamlLines calls f with each line of a file shaped as leaf.yaml (sections
// of keys, one level deep), its number from 1, the key it sets
// ("section.name"; "" on a comment, a blank or a section's line) and the
// line before it.
func yamlLines(data []byte, f func(n int, line, key, prev string)) {
	section, prev := "", ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		key := ""
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		case !strings.HasPrefix(line, " "):
			section, _, _ = strings.Cut(trimmed, ":")
		default:
			name, _, _ := strings.Cut(trimmed, ":")
			key = section + "." + name
		}
		f(n, line, key, prev)
		prev = line
	}
}

// TestLeafYAMLValues: every value in the documented leaf.yaml is Default's,
// as withDefaults writes it, and reads back as Default.
func TestLeafYAMLValues(t *testing.T) {
	const path = "../leaf.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := withDefaults(t, data)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		data = want
	}
	got, wantLines := strings.Split(string(data), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(got), len(wantLines)) {
		if got[i] != wantLines[i] {
			t.Errorf("%s:%d: %q, Default gives %q (go test ./config -run TestLeafYAMLValues -update writes it)", path, i+1, got[i], wantLines[i])
		}
	}
	cfg := mustLoad(t, []string{"--config=" + path}, nil)
	def := Default()
	def.File = path
	if !reflect.DeepEqual(cfg, def) {
		t.Errorf("%s reads as\n %+v\nnot Default\n %+v", path, cfg, def)
	}
}
