package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

const rev = "0123456789abcdef0123456789abcdef01234567"

func record(version string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/leaf-id/leaf", Version: version}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

func TestFrom(t *testing.T) {
	tests := []struct {
		name              string
		bi                *debug.BuildInfo
		version, revision string
		want              Info
		node              string
	}{
		{"nothing recorded", nil, "", "", Info{Version: Unknown, GoVersion: runtime.Version()}, Unknown},
		{"go run", record("(devel)"), Unknown, "", Info{Version: Unknown, GoVersion: "go1.99.1"}, Unknown},
		{"go install at a tag", record("v1.2.3"), Unknown, "", Info{Version: "v1.2.3", GoVersion: "go1.99.1"}, "v1.2.3"},
		{"a checkout", record("v0.0.0-20261202034614-0123456789ab+dirty", "vcs.revision", rev, "vcs.modified", "true"), "", "",
			Info{Version: "v0.0.0-20261202034614-0123456789ab+dirty", Revision: rev, Modified: true, GoVersion: "go1.99.1"},
			"v0.0.0-20261202034614-0123456789ab+dirty"},
		{"make build", record("(devel)"), "v1.2.3-4-g0123456", rev, Info{Version: "v1.2.3-4-g0123456", Revision: rev, GoVersion: "go1.99.1"},
			"v1.2.3-4-g0123456"},
		{"linker flags win", record("v9.9.9", "vcs.revision", "fedcba9876543210"), "v1.2.3", rev,
			Info{Version: "v1.2.3", Revision: rev, GoVersion: "go1.99.1"}, "v1.2.3+0123456789ab"},
		{"revision only", record("(devel)", "vcs.revision", rev), "", "", Info{Version: Unknown, Revision: rev, GoVersion: "go1.99.1"},
			"dev+0123456789ab"},
		{"modified, no version", record("", "vcs.revision", rev, "vcs.modified", "true"), "", "",
			Info{Version: Unknown, Revision: rev, Modified: true, GoVersion: "go1.99.1"}, "dev+0123456789ab.dirty"},
		{"too long for the registry", nil, strings.Repeat("v", 70), rev, Info{Version: strings.Repeat("v", 70), Revision: rev, GoVersion: runtime.Version()},
			strings.Repeat("v", 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := from(tt.bi, tt.version, tt.revision)
			if got != tt.want {
				t.Fatalf("from = %+v, want %+v", got, tt.want)
			}
			if n := got.Node(); n != tt.node {
				t.Errorf("Node() = %q, want %q", n, tt.node)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.3", Revision: rev, GoVersion: "go1.99.1"}, "leaf v1.2.3 revision " + rev + " go1.99.1 "},
		{Info{Version: Unknown, GoVersion: "go1.99.1"}, "leaf dev revision unknown go1.99.1 "},
		{Info{Version: "v1", Revision: rev, Modified: true, GoVersion: "go1.99.1"}, "leaf v1 revision " + rev + " (modified) go1.99.1 "},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := tt.in.String()
			if want := tt.want + runtime.GOOS + "/" + runtime.GOARCH; got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
		})
	}
}

func TestReadThisBinary(t *testing.T) {
	// A test binary records its Go version; whatever else it recorded,
	// Read gives a version and the toolchain.
	in := Read("", "")
	if in.Version == "" || in.GoVersion == "" {
		t.Fatalf("Read = %+v: empty version or Go version", in)
	}
	if in := Read("v7.0.0", rev); in.Version != "v7.0.0" || in.Revision != rev {
		t.Errorf("Read with linker values = %+v", in)
	}
}
