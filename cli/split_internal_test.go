package cli

import (
	"reflect"
	"testing"
)

// TestSplitArgs: configuration flags (a dot in the name, or --config) go to
// config.Load, a boolean one without its value word; the rest is the
// subcommand's.
func TestSplitArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		cfg, own []string
	}{
		{"value after a space", []string{"--store.dsn", "x.db", "list"}, []string{"--store.dsn", "x.db"}, []string{"list"}},
		{"value after =", []string{"list", "--store.dsn=x.db"}, []string{"--store.dsn=x.db"}, []string{"list"}},
		{"boolean takes no word", []string{"--store.create_schema", "list"}, []string{"--store.create_schema"}, []string{"list"}},
		{"duration takes a word", []string{"--segment.load_timeout", "5s", "list"}, []string{"--segment.load_timeout", "5s"}, []string{"list"}},
		{"--config", []string{"--config", "a.yaml", "create", "order", "--step", "5"}, []string{"--config", "a.yaml"}, []string{"create", "order", "--step", "5"}},
		{"after --", []string{"--", "--store.dsn=x"}, nil, []string{"--", "--store.dsn=x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, own := splitArgs(tt.args)
			if !reflect.DeepEqual(cfg, tt.cfg) || !reflect.DeepEqual(own, tt.own) {
				t.Errorf("splitArgs(%q) = %q, %q; want %q, %q", tt.args, cfg, own, tt.cfg, tt.own)
			}
		})
	}
}
