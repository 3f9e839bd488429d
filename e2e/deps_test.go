package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAllocatorLinksNoDriver: the allocator, the protocol and the HTTP
// API build on persist's interface alone; only the backends (and main,
// which wires them) link a database driver.
func TestAllocatorLinksNoDriver(t *testing.T) {
	t.Parallel()
	drivers := []string{
		"modernc.org/sqlite",
		"github.com/go-sql-driver/mysql",
		"github.com/jackc/pgx",
		"github.com/lib/pq",
		"go.etcd.io/",
	}
	for _, pkg := range []string{"./segment", "./server", "./httpapi", "./persist"} {
		t.Run(pkg, func(t *testing.T) {
			for _, dep := range goListDeps(t, pkg) {
				for _, d := range drivers {
					if strings.HasPrefix(dep, d) {
						t.Errorf("%s links %s", pkg, dep)
					}
				}
			}
		})
	}
}

// TestContractLinksNoDatabaseSQL: persist is the stores' contract and no
// more; the SQL engine is persist/sqlstore's. So the allocator, and the
// packages that reach the store through it alone (and persist/durability,
// whose records the server shows), link no database/sql.
// (httpapi does, through Prometheus's collectors.)
func TestContractLinksNoDatabaseSQL(t *testing.T) {
	for _, pkg := range []string{"./persist", "./persist/durability", "./segment", "./cluster", "./server"} {
		t.Run(pkg, func(t *testing.T) {
			for _, dep := range goListDeps(t, pkg) {
				if dep == "database/sql" || strings.HasPrefix(dep, "database/sql/") ||
					dep == "github.com/leaf-id/leaf/persist/sqlstore" {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		})
	}
}

// TestConfigLinksNoStore: config takes its defaults from the packages
// that use the values (server, segment, cluster, snowflake), which link
// no store; reading a configuration links no backend either. Of the
// packages under persist/ only persist/durability may be linked: like
// persist, it is part of the contract (the server shows its records) and
// holds no database code.
func TestConfigLinksNoStore(t *testing.T) {
	t.Parallel()
	for _, dep := range goListDeps(t, "./config") {
		if dep == "github.com/leaf-id/leaf/persist/durability" {
			continue
		}
		for _, d := range []string{"modernc.org/sqlite", "github.com/jackc/pgx", "go.etcd.io/", "github.com/leaf-id/leaf/persist/"} {
			if strings.HasPrefix(dep, d) {
				t.Errorf("config links %s", dep)
			}
		}
	}
}

// goListDeps is `go list -deps pkg`: every package pkg links.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = moduleRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
