package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMistypedSettingsStopStartUp: a setting that would silently put the
// server on a fresh, empty store (every ID handed out again from 1) stops
// start-up instead, with a message naming the mistake; nothing is created.
func TestMistypedSettingsStopStartUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"a mistyped variable", []string{"LEAF_STORE_DRIVR=mysql"},
			[]string{"environment variable LEAF_STORE_DRIVR: no such setting (did you mean LEAF_STORE_DRIVER?)"}},
		{"a mistyped SQLite path", []string{"LEAF_STORE_DSN=/nonexistent/dir/x.db"},
			[]string{"store.dsn=/nonexistent/dir/x.db: no database: the file does not exist", "store.create_database"}},
		{"a bad value names its variable", []string{"LEAF_SEGMENT_LOAD_TIMEOUT=5"},
			[]string{`LEAF_SEGMENT_LOAD_TIMEOUT (segment.load_timeout): invalid duration "5"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			code, stderr := runLeafToExit(t, dir, tt.env...)
			if code == 0 {
				t.Fatalf("leaf started; stderr:\n%s", stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused start created ./data: %v", err)
			}
		})
	}
}

// TestNewStoreIsLoud: the default SQLite file in ./data/ is created at
// first start, and the log says so at warn with its path.
func TestNewStoreIsLoud(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startLeaf(t, dir)
	p.Stop(syscall.SIGTERM)
	path := filepath.Join(dir, "data", "leaf.db")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no database at %s: %v", path, err)
	}
	log := p.Log()
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "created a new, empty SQLite database") || !strings.Contains(log, path) {
		t.Errorf("the first start did not warn of the new database at %s:\n%s", path, log)
	}
}
