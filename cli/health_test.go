package cli_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/leaftest"
)

// TestHealth: leaf health exits 0 (no error) only when the configured
// server answers PING with the configured password and, when http.addr
// is set, /healthz answers 200.
func TestHealth(t *testing.T) {
	srv := leaftest.Start(t, leaftest.WithPassword("pw"))
	_, port, _ := net.SplitHostPort(srv.Addr())
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer healthy.Close()
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer sick.Close()
	// A port nothing listens on: one just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	tests := []struct {
		name    string
		environ []string
		stdout  string // "" when it must fail
		errHas  string
	}{
		{"redis", []string{"LEAF_SERVER_ADDR=" + srv.Addr(), "LEAF_SERVER_PASSWORD=pw"}, "redis " + srv.Addr() + ": PONG\n", ""},
		{"every interface", []string{"LEAF_SERVER_ADDR=:" + port, "LEAF_SERVER_PASSWORD=pw"}, "redis 127.0.0.1:" + port + ": PONG\n", ""},
		{"redis and http", []string{"LEAF_SERVER_ADDR=" + srv.Addr(), "LEAF_SERVER_PASSWORD=pw", "LEAF_HTTP_ADDR=" + strings.TrimPrefix(healthy.URL, "http://")},
			"redis " + srv.Addr() + ": PONG\nhttp " + healthy.URL + "/healthz: 200 OK\n", ""},
		{"wrong password", []string{"LEAF_SERVER_ADDR=" + srv.Addr(), "LEAF_SERVER_PASSWORD=nope"}, "", "WRONGPASS"},
		{"no password", []string{"LEAF_SERVER_ADDR=" + srv.Addr()}, "", "NOAUTH"},
		{"nothing listening", []string{"LEAF_SERVER_ADDR=" + closed}, "", "connection refused"},
		{"port 0", []string{"LEAF_SERVER_ADDR=127.0.0.1:0"}, "", "port 0"},
		{"http not healthy", []string{"LEAF_SERVER_ADDR=" + srv.Addr(), "LEAF_SERVER_PASSWORD=pw", "LEAF_HTTP_ADDR=" + strings.TrimPrefix(sick.URL, "http://")},
			"", "503 Service Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.environ, "health", "--timeout=30s")
			if tt.stdout != "" {
				if r.err != nil || r.stdout != tt.stdout {
					t.Fatalf("leaf health: %v, stdout %q; want %q", r.err, r.stdout, tt.stdout)
				}
				return
			}
			if r.err == nil || !strings.Contains(r.err.Error(), tt.errHas) || !strings.HasPrefix(r.err.Error(), "health: ") {
				t.Fatalf("leaf health: %v; want an error with %q", r.err, tt.errHas)
			}
			if strings.Contains(r.err.Error(), "nope") {
				t.Errorf("the error shows the password: %v", r.err)
			}
		})
	}
	if r := run(t, nil, "health", "extra"); r.err == nil {
		t.Error("leaf health extra: no error")
	}
}
