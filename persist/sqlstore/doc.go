// Package sqlstore is the SQL engine that leaf's SQL backends
// (persist/sqlite, persist/mysql, persist/postgres) build on: Core
// implements persist's contract on database/sql, with the statements,
// their validation and their retries, and a backend adds only its driver,
// a Dialect (what differs between databases) and an Open that hands
// NewCore its *sql.DB.
//
// Core's files: core.go takes, reads, creates and gives back one tag at a
// time; batch.go takes many tags in one transaction (group commit);
// giveback.go gives many back in one; schema.go checks and creates the
// tables at open; registry.go is the cluster registry (persist.Registry),
// as persist/etcd/registry.go is etcd's; identity.go the store's identity.
// Deferred (deferred.go) opens a backend lazily, for a server that must
// start while its database is down.
package sqlstore
