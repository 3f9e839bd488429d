// Package e2e holds leaf's end-to-end tests. Its TestMain builds the real
// binary once (with -race, from the module's root), and the tests run it
// as users do, over real sockets and with real signals, against a real
// SQLite file and the throwaway MariaDB, PostgreSQL and Galera cluster of
// scripts/: restarts
// after SIGTERM and kill -9, servers sharing one database, chaos with
// SIGKILL and SIGTERM on a schedule (on Galera too, each server on its own
// node, and while its nodes are killed), a database crashed, hung and down at
// start, a database away under a pipeline of new tags (SQLite unable to
// write among them), a database 50 ms away under a burst of INCRs, a
// deleted row, passwords kept out of logs, protected mode, TLS,
// the admin password, the CLI and the HTTP API, and the Redis monitoring
// tools teams run against it (Debian's prometheus-redis-exporter,
// redis-cli --stat, --latency, --scan, --bigkeys). Tests also check the
// layout: the allocator links no database driver, and config links no
// store backend.
//
// The package has no code beyond this comment. Run it with
// go test -race ./e2e; the MariaDB tests need LEAF_TEST_MYSQL_DSN (see
// scripts/mariadb.sh), the PostgreSQL tests LEAF_TEST_POSTGRES_DSN (see
// scripts/postgres.sh), the Galera tests LEAF_TEST_GALERA_DSN,
// LEAF_TEST_GALERA_NODES and LEAF_TEST_GALERA_DIR (see scripts/galera.sh),
// and fail without them when CI=true. LEAF_TEST_LONG=1 runs the longer
// variants of the replicated databases' tests; LEAF_CHAOS_PER_EVENT makes
// a chaos run longer; LEAF_TEST_SLOWDB_INCRS sets the INCRs of the burst
// on a distant database (100,000).
package e2e
