package e2e

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
)

// TestDefaultsAgree keeps the defaults single-sourced although config
// imports nothing of leaf: the documented leaf.yaml, config.Default() and
// the defaults of the packages that use the values (segment.DefaultOptions,
// server.Default*) are equal, key by key.
func TestDefaultsAgree(t *testing.T) {
	t.Parallel()
	path := filepath.Join(moduleRoot, "leaf.yaml")
	file, err := config.Load([]string{"--config=" + path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := config.Default()
	def.File = path
	if !reflect.DeepEqual(file, def) {
		t.Errorf("leaf.yaml differs from config.Default():\n file    %+v\n Default %+v", file, def)
	}

	// Every key of the segment section is the allocator's option of the
	// same name.
	seg := reflect.ValueOf(def.Segment)
	opts := reflect.ValueOf(segment.DefaultOptions())
	for i := range seg.NumField() {
		name := seg.Type().Field(i).Name
		switch name {
		case "AutoCreate": // on, off or admin: the allocator creates unless off
			if got, want := def.Segment.AutoCreate != "off", segment.DefaultOptions().AutoCreate; got != want {
				t.Errorf("segment.auto_create %q, segment.DefaultOptions().AutoCreate = %v", def.Segment.AutoCreate, want)
			}
			continue
		case "CreateRate": // per connection: the server's
			if def.Segment.CreateRate != server.DefaultCreateRate {
				t.Errorf("segment.create_rate: config's default %v, server's %v", def.Segment.CreateRate, server.DefaultCreateRate)
			}
			continue
		}
		t.Run("segment."+name, func(t *testing.T) {
			o := opts.FieldByName(name)
			if !o.IsValid() {
				t.Fatalf("segment.Options has no field %s", name)
			}
			if got, want := seg.Field(i).Interface(), o.Interface(); got != want {
				t.Errorf("config.Default().Segment.%s = %v, segment.DefaultOptions().%s = %v", name, got, name, want)
			}
		})
	}

	limits := []struct {
		key       string
		got, want int
	}{
		{"server.max_clients", def.Server.MaxClients, server.DefaultMaxClients},
		{"server.max_request_bytes", def.Server.MaxRequestBytes, server.DefaultMaxRequestBytes},
		{"server.max_pipeline", def.Server.MaxPipeline, server.DefaultMaxPipeline},
		{"server.databases", def.Server.Databases, server.DefaultDatabases},
		{"server.script_time_limit (ms)", int(def.Server.ScriptTimeLimit.Milliseconds()), int(server.DefaultScriptTimeLimit.Milliseconds())},
	}
	for _, l := range limits {
		if l.got != l.want {
			t.Errorf("%s: config's default %d, server's %d", l.key, l.got, l.want)
		}
	}
	if got, want := def.Server.SlowlogThreshold, server.DefaultSlowlogThreshold; got != want {
		t.Errorf("server.slowlog_threshold: config's default %v, server's %v", got, want)
	}
}
