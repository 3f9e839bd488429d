package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/config"
)

// unitPath is the systemd unit, relative to this package.
const unitPath = "leaf.service"

// unitLines are the unit's settings as "Key=value", in order.
func unitLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "[") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestUnitSettings: the unit runs leaf as its own user in its state
// directory, restarts it on failure, raises its file limit and confines
// it; ExecStart's arguments are ones leaf accepts.
func TestUnitSettings(t *testing.T) {
	lines := unitLines(t)
	has := func(line string) bool {
		for _, l := range lines {
			if l == line {
				return true
			}
		}
		return false
	}
	for _, want := range []string{
		"DynamicUser=yes", "StateDirectory=leaf", "WorkingDirectory=/var/lib/leaf", "Restart=on-failure",
		"LimitNOFILE=65536", "KillSignal=SIGTERM", "TimeoutStopSec=30s",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes",
		"CapabilityBoundingSet=", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "SystemCallFilter=@system-service",
		"ExecStart=/usr/local/bin/leaf --config=/etc/leaf/leaf.yaml",
	} {
		t.Run(want, func(t *testing.T) {
			if !has(want) {
				t.Errorf("%s lacks %q", unitPath, want)
			}
		})
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "ExecReload=") {
			t.Errorf("%s: %q: leaf has no reload; a restart applies leaf.yaml", unitPath, l)
		}
	}

	t.Run("leaf accepts ExecStart's arguments", func(t *testing.T) {
		// The project's leaf.yaml is what the unit's comment installs
		// at /etc/leaf/leaf.yaml.
		yaml := filepath.Join(t.TempDir(), "leaf.yaml")
		b, err := os.ReadFile(filepath.Join("..", "leaf.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(yaml, b, 0o600); err != nil {
			t.Fatal(err)
		}
		args := strings.Fields(strings.TrimPrefix(execStart(t, lines), "/usr/local/bin/leaf"))
		for i, a := range args {
			args[i] = strings.Replace(a, "/etc/leaf/leaf.yaml", yaml, 1)
		}
		// The environment the unit's EnvironmentFile gives.
		env := []string{"LEAF_SERVER_PASSWORD=pw", "LEAF_STORE_DSN=data/leaf.db"}
		cfg, err := config.Load(args, env)
		if err != nil {
			t.Fatalf("leaf %v: %v", args, err)
		}
		if cfg.Store.DSN != "data/leaf.db" || cfg.Store.Driver != "sqlite" {
			t.Errorf("store = %s %s: want the default SQLite file under the working directory", cfg.Store.Driver, cfg.Store.DSN)
		}
	})
}

func execStart(t *testing.T, lines []string) string {
	t.Helper()
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			return v
		}
	}
	t.Fatalf("%s has no ExecStart", unitPath)
	return ""
}

// systemdAnalyze is the path of systemd-analyze, or skips the test where
// it is missing (fails under CI=true: scripts/test.sh installs systemd).
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze not found (CI=true): install Debian's systemd package")
		}
		t.Skip("systemd-analyze not found: install Debian's systemd package")
	}
	return p
}

// runnableUnit is a copy of the unit whose ExecStart names an executable
// that exists here (this test's binary), since systemd-analyze checks
// that it does; the rest is the unit as shipped.
func runnableUnit(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("ExecStart=/usr/local/bin/leaf "), []byte("ExecStart="+self+" "), 1)
	path := filepath.Join(t.TempDir(), "leaf.service")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUnitVerifies: systemd-analyze verify finds nothing to say of the
// unit: no unknown key, no value it cannot parse (either is only a
// warning to systemd, so any output fails the test).
func TestUnitVerifies(t *testing.T) {
	sa := systemdAnalyze(t)
	cmd := exec.Command(sa, "verify", runnableUnit(t))
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0")
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
	}
}

// exposureRe is the summary line of systemd-analyze security.
var exposureRe = regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`)

// TestUnitExposure: systemd's own rating of the unit's confinement,
// 0 (confined) to 10 (exposed), stays at 2.0 or below ("OK").
func TestUnitExposure(t *testing.T) {
	sa := systemdAnalyze(t)
	cmd := exec.Command(sa, "security", "--offline=yes", "--no-pager", runnableUnit(t))
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_COLORS=0")
	out, err := cmd.CombinedOutput()
	m := exposureRe.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	level, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exposure level %.1f", level)
	if level > 2.0 {
		t.Errorf("exposure level %.1f, want 2.0 or below:\n%s", level, out)
	}
}
