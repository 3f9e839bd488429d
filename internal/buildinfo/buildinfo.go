// Package buildinfo tells which leaf is running: the version, the VCS
// revision it was built from and the Go version. The linker flags that
// make build sets (-X main.version, -X main.revision) come first; without
// them, what the Go toolchain recorded in the binary
// (runtime/debug.ReadBuildInfo: the module version of `go install
// ...@v1.2.3`, vcs.revision of a build inside a git checkout).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Unknown is the version of a build that recorded none (go run, go test,
// a build with -buildvcs=false and no linker flags).
const Unknown = "dev"

// Info is what a binary knows of its own build.
type Info struct {
	// Version is the linker's main.version, else the main module's version
	// (v1.2.3, or a pseudo-version v0.0.0-<time>-<rev12>), else Unknown.
	Version string
	// Revision is the linker's main.revision, else the VCS commit Go
	// recorded; "" when unknown.
	Revision string
	// Modified: the work tree had uncommitted changes (Go's vcs.modified).
	Modified bool
	// GoVersion is the toolchain that built the binary (runtime.Version).
	GoVersion string
}

// Read is the build of the running binary; version and revision are what
// the linker set in main ("" or Unknown when it set nothing).
func Read(version, revision string) Info {
	bi, _ := debug.ReadBuildInfo()
	return from(bi, version, revision)
}

// from is Read over a given build record (nil: none).
func from(bi *debug.BuildInfo, version, revision string) Info {
	in := Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if bi != nil {
		if in.Version == "" || in.Version == Unknown {
			if v := bi.Main.Version; v != "" && v != "(devel)" {
				in.Version = v
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Revision == "" {
					in.Revision = s.Value
				}
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
	}
	if in.Version == "" {
		in.Version = Unknown
	}
	return in
}

// Node is the version a server registers (LEAF.NODES): Version, with the
// revision's first 12 digits added when Version does not already name it
// (a release tag, Unknown), so two servers built from different commits
// never look alike. At most 64 bytes, the registry's limit.
func (i Info) Node() string {
	v := i.Version
	if rev := short(i.Revision); rev != "" && !strings.Contains(v, rev[:7]) {
		v += "+" + rev
	}
	if i.Modified && !strings.Contains(v, "dirty") {
		v += ".dirty"
	}
	if len(v) > 64 {
		v = v[:64]
	}
	return v
}

// String is the line leaf --version prints:
//
//	leaf v1.2.3 revision 0123456789abcdef0123456789abcdef01234567 go1.26.8 linux/amd64
func (i Info) String() string {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	if i.Modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("leaf %s revision %s %s %s/%s", i.Version, rev, i.GoVersion, runtime.GOOS, runtime.GOARCH)
}

// short is the first 12 characters of a revision; "" when it has fewer
// than 7 (too short to name a commit).
func short(rev string) string {
	if len(rev) < 7 {
		return ""
	}
	return rev[:min(12, len(rev))]
}
