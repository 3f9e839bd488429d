package server

import (
	"errors"
	"fmt"

	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// LEAF.INFO: a tag's state, as Leaf's /cache page shows it, plus runway and
// guard.

func registerLeaf(t table) {
	t.add(&command{
		name: "leaf.info", arity: 2, fn: cmdLeafInfo,
		flags: []string{"readonly", "fast"}, acl: []string{"read", "fast"},
		firstKey: 1, keyFlags: []string{"RO", "access"},
		summary: "Returns the state of a tag: both segments, step, loads, runway and guard",
		since:   "1.0.0", group: "server", complex: "O(1)",
		args: []argDoc{{name: "key", typ: "key"}},
	})
}

// leafInfoFields is the number of field/value pairs cmdLeafInfo writes
// for a segment tag; leafInfoModeFields for a tag of another mode, which
// has no segments, step or runway.
const (
	leafInfoFields     = 32
	leafInfoModeFields = 9
)

// cmdLeafInfo: LEAF.INFO tag -> field/value pairs (a map in RESP3). Booleans
// are 0/1 integers; last_load is unix milliseconds (0: never); issued
// counts the IDs handed out, skipped the cached IDs a floor skipped
// (reserved, never handed out); retries counts the loads the database
// rolled back and that ran again, ambiguous those whose commit was left
// unknown (never served); runway_seconds is a double, inf when the tag is
// idle; store_ok is 0 while the database is away (a call failed and no
// probe has reached it since) and store_away_since is when that began,
// unix milliseconds (0: not away); store_replication and store_durability
// are how the database replicates and whether a failover can lose ranges
// (safe, unsafe, unknown), as last checked. A Snowflake tag shows only tag,
// mode, issued, vanished, last_error and the store fields. It does not
// look the tag up in the database: a tag this server has not seen is
// unknown.
func cmdLeafInfo(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	in, err := s.alloc.Info(string(c.key(args[1])))
	if err != nil {
		if errors.Is(err, segment.ErrUnknownTag) {
			s.writeError(c, conn, fmt.Sprintf(errUnknownTag, args[1]))
			return
		}
		s.allocError(c, conn, args[1], err)
		return
	}
	if in.Mode != "" {
		conn.WriteMap(leafInfoModeFields)
		conn.WriteBulkString("tag")
		conn.WriteBulkString(in.Name)
		conn.WriteBulkString("mode")
		conn.WriteBulkString(modeName(in.Mode))
		conn.WriteBulkString("issued")
		conn.WriteInt64(in.Issued)
		conn.WriteBulkString("vanished")
		writeBool(conn, in.Vanished)
		conn.WriteBulkString("last_error")
		conn.WriteBulkString(in.LastError)
		s.writeStoreState(conn)
		return
	}
	conn.WriteMap(leafInfoFields)
	conn.WriteBulkString("tag")
	conn.WriteBulkString(in.Name)
	conn.WriteBulkString("mode")
	conn.WriteBulkString(modeName(in.Mode))
	conn.WriteBulkString("init")
	writeBool(conn, in.Init)
	conn.WriteBulkString("pos")
	conn.WriteInt(in.Pos)
	conn.WriteBulkString("next_ready")
	writeBool(conn, in.NextReady)
	conn.WriteBulkString("loading")
	writeBool(conn, in.Loading)
	conn.WriteBulkString("step")
	conn.WriteInt64(in.Step)
	conn.WriteBulkString("min_step")
	conn.WriteInt64(in.MinStep)
	for i, sg := range in.Segments {
		p := "segment0_"
		if i == 1 {
			p = "segment1_"
		}
		conn.WriteBulkString(p + "value")
		conn.WriteInt64(sg.Value)
		conn.WriteBulkString(p + "max")
		conn.WriteInt64(sg.Max)
		conn.WriteBulkString(p + "step")
		conn.WriteInt64(sg.Step)
	}
	conn.WriteBulkString("loads")
	conn.WriteInt64(in.Loads)
	conn.WriteBulkString("failures")
	conn.WriteInt64(in.Failures)
	conn.WriteBulkString("last_load")
	conn.WriteInt64(unixMilli(in.LastLoad))
	conn.WriteBulkString("issued")
	conn.WriteInt64(in.Issued)
	conn.WriteBulkString("skipped")
	conn.WriteInt64(in.Skipped)
	conn.WriteBulkString("runway_ids")
	conn.WriteInt64(in.RunwayIDs)
	conn.WriteBulkString("runway_seconds")
	conn.WriteDouble(in.RunwaySeconds)
	conn.WriteBulkString("guard_high")
	conn.WriteInt64(in.GuardHigh)
	conn.WriteBulkString("guard_trips")
	conn.WriteInt64(in.GuardTrips)
	conn.WriteBulkString("guard_repairs")
	conn.WriteInt64(in.GuardRepairs)
	conn.WriteBulkString("retries")
	conn.WriteInt64(in.Retries)
	conn.WriteBulkString("ambiguous")
	conn.WriteInt64(in.Ambiguous)
	conn.WriteBulkString("vanished")
	writeBool(conn, in.Vanished)
	conn.WriteBulkString("last_error")
	conn.WriteBulkString(in.LastError)
	s.writeStoreState(conn)
}

// writeStoreState writes LEAF.INFO's last fields: the database state as
// this server sees it now (INFO leaf has the same), since last_error may
// be an old one.
func (s *Server) writeStoreState(conn *resp.Conn) {
	st := s.alloc.Stats()
	conn.WriteBulkString("store_ok")
	writeBool(conn, st.StoreOK)
	conn.WriteBulkString("store_away_since")
	conn.WriteInt64(unixMilli(st.AwaySince))
	// How the database replicates (INFO leaf has the details).
	r := s.replication()
	conn.WriteBulkString("store_replication")
	conn.WriteBulkString(r.Kind)
	conn.WriteBulkString("store_durability")
	conn.WriteBulkString(r.Safety.String())
}

// writeBool writes b as the integer 1 or 0 in both protocols, so clients
// read the same type whichever they speak.
func writeBool(conn *resp.Conn, b bool) {
	if b {
		conn.WriteInt(1)
		return
	}
	conn.WriteInt(0)
}
