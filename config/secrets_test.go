package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestPasswordFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("pw", "hunter2\nsecond line ignored\n")
	crlf := write("crlf", "adm\r\n")
	empty := write("empty", "\n")
	for _, tc := range []struct {
		name      string
		env       []string
		pass, adm string
		err       string
	}{
		{"first line", []string{"LEAF_SERVER_PASSWORD_FILE=" + good}, "hunter2", "", ""},
		{"CRLF", []string{"LEAF_SERVER_ADMIN_PASSWORD_FILE=" + crlf}, "", "adm", ""},
		{"both set", []string{"LEAF_SERVER_PASSWORD=x", "LEAF_SERVER_PASSWORD_FILE=" + good}, "", "",
			"(server.password_file): set together with server.password (set one)"},
		{"empty file", []string{"LEAF_SERVER_PASSWORD_FILE=" + empty}, "", "", "the first line is empty"},
		{"missing file", []string{"LEAF_SERVER_PASSWORD_FILE=" + filepath.Join(dir, "nosuch")}, "", "", "(server.password_file): open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(nil, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Server.Password != tc.pass || cfg.Server.AdminPassword != tc.adm {
				t.Fatalf("passwords %q, %q; want %q, %q", cfg.Server.Password, cfg.Server.AdminPassword, tc.pass, tc.adm)
			}
		})
	}
}

func TestRedactArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"--server.password=pw1", "--server.addr=:1"}, []string{"--server.password=REDACTED", "--server.addr=:1"}},
		{[]string{"--server.admin_password", "pw2", "-h"}, []string{"--server.admin_password", "REDACTED", "-h"}},
		{[]string{"-server.password=pw3"}, []string{"-server.password=REDACTED"}},
		{[]string{"--store.driver=mysql", "--store.dsn=u:pw4@tcp(h:3306)/db"}, []string{"--store.driver=mysql", "--store.dsn=u:REDACTED@tcp(h:3306)/db"}},
		{[]string{"--store.dsn", "u:pw5@tcp(h:3306)/db"}, []string{"--store.dsn", "REDACTED"}},
		{[]string{"--server.password_file=/run/pw"}, []string{"--server.password_file=/run/pw"}},
	} {
		if got := RedactArgs(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("RedactArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := SecretFlags([]string{"--server.password=a", "--server.addr=:1", "--server.password", "b", "--server.admin_password=c"}); !reflect.DeepEqual(got, []string{"server.password", "server.admin_password"}) {
		t.Errorf("SecretFlags = %q", got)
	}
}

func TestAutoCreateValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ env, want string }{
		{"true", AutoCreateOn}, {"false", AutoCreateOff}, {"on", AutoCreateOn}, {"OFF", AutoCreateOff},
	} {
		cfg, err := Load(nil, []string{"LEAF_SEGMENT_AUTO_CREATE=" + tc.env})
		if err != nil || cfg.Segment.AutoCreate != tc.want {
			t.Errorf("LEAF_SEGMENT_AUTO_CREATE=%s: %q, %v; want %q", tc.env, cfg.Segment.AutoCreate, err, tc.want)
		}
	}
	if _, err := Load(nil, []string{"LEAF_SEGMENT_AUTO_CREATE=admin"}); err == nil || !strings.Contains(err.Error(), "admin needs server.admin_password") {
		t.Errorf("admin without an admin password: %v", err)
	}
	path := writeFile(t, "segment:\n  auto_create: false\n")
	if cfg, err := Load([]string{"--config=" + path}, nil); err != nil || cfg.Segment.AutoCreate != AutoCreateOff {
		t.Errorf("YAML false: %q, %v", cfg.Segment.AutoCreate, err)
	}
}

func TestHTTPProtectedMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		err  string // "" when valid
	}{
		{"loopback", []string{"LEAF_HTTP_ADDR=127.0.0.1:0"}, ""},
		{"beyond loopback", []string{"LEAF_HTTP_ADDR=0.0.0.0:0"}, `http.addr): "0.0.0.0:0" listens beyond loopback and server.password is empty`},
		{"with a password", []string{"LEAF_HTTP_ADDR=:0", "LEAF_SERVER_PASSWORD=p"}, ""},
		{"protected mode off", []string{"LEAF_HTTP_ADDR=:0", "LEAF_SERVER_PROTECTED_MODE=false"}, ""},
		{"pprof beyond loopback", []string{"LEAF_HTTP_ADDR=:0", "LEAF_SERVER_PROTECTED_MODE=false", "LEAF_HTTP_PPROF=true"}, "(http.pprof): on while http.addr"},
		{"pprof behind a password", []string{"LEAF_HTTP_ADDR=:0", "LEAF_SERVER_PASSWORD=p", "LEAF_HTTP_PPROF=true"}, ""},
		{"https without a certificate", []string{"LEAF_HTTP_ADDR=127.0.0.1:0", "LEAF_HTTP_TLS=true"}, "(http.tls): on without server.tls_cert"},
		{"client CA without TLS", []string{"LEAF_SERVER_TLS_CLIENT_CA=ca.pem"}, "(server.tls_client_ca): set without server.tls_cert"},
		{"bad host", []string{"LEAF_HTTP_ALLOWED_HOSTS=a.example, http://b"}, `(http.allowed_hosts): "http://b" is not a host`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(nil, tc.env)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestUsageSaysWhereSecretsGo(t *testing.T) {
	t.Parallel()
	u := Usage("leaf")
	for _, want := range []string{"server.password_file", "LEAF_SERVER_PASSWORD", "visible to every user"} {
		if !strings.Contains(u, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
