// Package persist is the contract between leaf and its stores, and no
// more: the interfaces a backend implements, the records they exchange,
// the sentinel errors, and the limits of Leaf's columns with their checks.
// It holds no database code, so that the allocator, which builds on it
// alone, links neither database/sql nor a driver.
//
// A Store is the whole contract between the allocator and a database: take a
// range by moving max_id up in one transaction (in Meituan Leaf's own table,
// leaf_alloc, so that existing Leaf databases work unchanged), list and read
// tags, create a tag, and give an unused tail back with a compare-and-set.
// Admin holds the operator's changes, Registry what the servers sharing a
// store know of each other; Guarded, BatchGiver and Identified are what some
// stores can do besides (and durability.Durable, in persist/durability).
//
// Each backend is a package of its own: persist/sqlite, persist/mysql and
// persist/postgres, which differ only in a Dialect of the SQL engine in
// persist/sqlstore, and persist/etcd. Every one passes the conformance
// suite in persist/storetest; persist/open opens the one the configuration
// names, and persist/durability tells and watches how its database
// replicates.
//
// Next to Leaf's table, a second one of leaf's own, leaf_guard, keeps per tag
// the end of the highest range handed out (the persistent guard, Guarded):
// a Take never answers below it, even after the row was deleted and
// re-created or lowered by hand, and even to a server that never held the
// tag. Leaf servers ignore it; without it (not created, and no right to
// create it) the backends work with the guard off.
package persist
