package cluster

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// The Redis Cluster face: every live server is a master of a contiguous
// range of the 16,384 hash slots, computed from the registry alone, so
// that every server that reads the same registry state answers the same
// map. No slot ever moves by a command: any server answers any tag, so a
// client with an older map is never wrong, only less even.

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// DefaultNodeTimeoutBeats is the node timeout in heartbeats when
// Options.NodeTimeout is zero: a server whose last renewal is this many
// heartbeats older than the freshest one leaves the slot map.
const DefaultNodeTimeoutBeats = 5

// Shard is one server of the slot map and the slots it is given.
type Shard struct {
	persist.Node
	// First and Last are its slots, both included; a server that is late
	// (Late) has none: First is 0 and Last -1.
	First, Last int
	// Late: its last renewal is older than the node timeout allows (it
	// stopped, or cannot reach the store); it holds no slots.
	Late bool
}

// Name is the server's Redis Cluster node name: 40 hex digits, the SHA-1
// of its id in the registry, the same on every server.
func (s Shard) Name() string { return NodeName(s.ID) }

// NodeName is the Redis Cluster node name of the registry's node id: the
// hex SHA-1 of the id. Redis names nodes with 40 hex digits and clients
// rely on it.
func NodeName(id string) string {
	sum := sha1.Sum([]byte(id))
	return hex.EncodeToString(sum[:])
}

// SlotMap is the Redis Cluster face's map.
type SlotMap struct {
	// Shards are the servers ordered by id: the members first, each with
	// its range in slot order (they cover every slot), then the late ones.
	Shards []Shard
	// Self is this server's index in Shards, -1 when it is not listed
	// (not registered, or its registration lapsed).
	Self int
}

// Members is the number of servers holding slots.
func (m SlotMap) Members() int {
	n := 0
	for _, s := range m.Shards {
		if !s.Late {
			n++
		}
	}
	return n
}

// ComputeSlotMap is the slot map of the live servers nodes (the registry's
// list, with their heartbeat ages): the servers whose last renewal is at
// most timeout older than the freshest one's are the members, ordered by
// id, and member i of n gets the slots from i*16384/n to (i+1)*16384/n-1.
// The others are listed as late, with no slots. Ages are compared with
// the freshest rather than with zero so that a store that stalls (every
// age grows alike) empties nobody out of the map. self is this server's
// id: with no node listed, the map is this server alone, with every slot.
func ComputeSlotMap(nodes []persist.Node, timeout time.Duration, self persist.NodeInfo) SlotMap {
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b persist.Node) int { return cmp.Compare(a.ID, b.ID) })
	sorted = slices.CompactFunc(sorted, func(a, b persist.Node) bool { return a.ID == b.ID })
	if len(sorted) == 0 {
		sorted = []persist.Node{{NodeInfo: self, Worker: -1}}
	}
	freshest := sorted[0].Age
	for _, n := range sorted {
		freshest = min(freshest, n.Age)
	}
	m := SlotMap{Self: -1}
	var late []Shard
	for _, n := range sorted {
		if n.Age-freshest > timeout {
			late = append(late, Shard{Node: n, First: 0, Last: -1, Late: true})
			continue
		}
		m.Shards = append(m.Shards, Shard{Node: n})
	}
	for i := range m.Shards {
		m.Shards[i].First = i * Slots / len(m.Shards)
		m.Shards[i].Last = (i+1)*Slots/len(m.Shards) - 1
	}
	m.Shards = append(m.Shards, late...)
	for i, s := range m.Shards {
		if s.ID == self.ID {
			m.Self = i
		}
	}
	return m
}

// NodeTimeout is how much older than the freshest a server's last renewal
// may be before it leaves the slot map (Options.NodeTimeout, or
// DefaultNodeTimeoutBeats heartbeats).
func (n *Node) NodeTimeout() time.Duration { return n.opts.NodeTimeout }

// SlotMap is the slot map from the registry's live servers, read at most a
// heartbeat ago (RecentNodes). With the cluster features off, or while the
// registry lists no server (it could not be read yet), it is this server
// alone.
func (n *Node) SlotMap(ctx context.Context) SlotMap {
	var nodes []persist.Node
	if !n.offNow() {
		nodes = n.RecentNodes(ctx)
	}
	return ComputeSlotMap(nodes, n.opts.NodeTimeout, n.opts.Node)
}

// KeySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the part between the first { and the next }
// when not empty), modulo 16384, as Redis and every cluster client
// compute it.
func KeySlot(key []byte) int {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return int(crc16(key) & (Slots - 1))
			}
		}
		break
	}
	return int(crc16(key) & (Slots - 1))
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis's.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^c]
	}
	return crc
}

// crcTable is crc16's table, one entry per byte value.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
