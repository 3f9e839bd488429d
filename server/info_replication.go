package server

import (
	"strings"

	"github.com/leaf-id/leaf/persist/durability"
)

// replication is the store's replication as last checked
// (Options.Replication), unknown without it.
func (s *Server) replication() durability.Replication {
	if s.opts.Replication == nil {
		return durability.UnknownReplication("not checked")
	}
	r := s.opts.Replication()
	if r.Kind == "" {
		r.Kind = durability.ReplicationUnknown
	}
	return r
}

// storeID is the store's identity (Options.StoreID), "" when unknown.
func (s *Server) storeID() string {
	if s.opts.StoreID == nil {
		return ""
	}
	return s.opts.StoreID()
}

// infoReplication writes INFO leaf's lines of the durability check: the
// store's identity (store_id, "" when unknown), how
// the database replicates (store_replication: single, galera,
// mysql_replication, postgres_streaming, raft, unknown), whether a
// failover can lose acknowledged commits and with them ranges already
// handed out (store_durability: safe, unsafe, unknown), the servers that
// hold the data and the replicas that do and do not acknowledge a commit
// before it is (-1: not shown to leaf's user), the database's own word
// for its state (Galera's), and why, with what to change when it is not
// safe.
func (s *Server) infoReplication(line func(string, any)) {
	line("store_id", s.storeID())
	r := s.replication()
	line("store_replication", r.Kind)
	line("store_durability", r.Safety.String())
	line("store_replication_members", r.Members)
	line("store_replication_sync", r.Sync)
	line("store_replication_async", r.Async)
	line("store_replication_state", r.State)
	line("store_durability_reason", infoText(r.Reason))
	line("store_durability_advice", infoText(r.Advice))
}

// infoText is free text as an INFO value: without commas, since clients
// read a value holding both "," and "=" as a list of k=v pairs (redis-py's
// INFO parser fails on any item without "=").
func infoText(s string) string { return strings.ReplaceAll(s, ",", ";") }
