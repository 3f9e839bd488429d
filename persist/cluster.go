package persist

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// The cluster registry: what the servers sharing one store know of each
// other. It lives in leaf's own tables (or keys), never in Leaf's
// leaf_alloc, so that existing Leaf databases stay as they are.
//
//   - Nodes: every server registers with a lease that it renews with a
//     heartbeat, and removes itself on a clean shutdown. A node is live
//     while its lease has not expired; leases are measured on the
//     store's clock, so the servers' clocks need not agree.
//   - Changes: an administrative change (a floor, a step) is appended to
//     a log with a sequence number. Each node reads the log after its
//     renewal, applies what is new, and acknowledges with the sequence
//     number it has applied (Renewal.Seen); the operator's command waits
//     until every live node's Seen reaches its change. A floor is in
//     effect in the store (max_id above it) from the moment it is in the
//     log, and stays so: its Publish raises max_id in the same
//     transaction, and a node gives unused IDs back only through
//     GiveBackAfter, which refuses to go below a floor it has not
//     applied. So a node that starts after a change (Join's head) finds
//     it in the store.
//   - Worker ids, for Snowflake tags: leased like nodes, unique among
//     live holders, recycled once a lease has expired. Each records a
//     bound, the time (Unix milliseconds, on the holder's clock) up to
//     which its holder may issue IDs; the next holder starts after it.
//   - Modes: a tag created in a mode other than Leaf's segments
//     (Snowflake) records it beside its leaf_alloc row, in the same
//     transaction, and Tag.Mode reads it back with the row.

// Errors of the registry, wrapped with %w.
var (
	// ErrNoCluster: the store has no registry (its tables are missing
	// and could not be created): the server runs alone.
	ErrNoCluster = errors.New("persist: no cluster registry (its tables are missing)")
	// ErrLeaseLost: the node's registration is gone (expired and
	// removed); it must Join again.
	ErrLeaseLost = errors.New("persist: node lease lost")
	// ErrWorkerLost: the node's worker id was leased to another node
	// after its lease expired.
	ErrWorkerLost = errors.New("persist: worker id lease lost")
	// ErrNoWorker: every worker id below the limit is leased to a live
	// node.
	ErrNoWorker = errors.New("persist: no worker id free")
)

// ModeSnowflake is Tag.Mode of a Snowflake tag: time-ordered IDs made of
// time, worker id and sequence, with no store call per ID. The empty mode
// is Leaf's segment mode.
const ModeSnowflake = "snowflake"

// MaxNodeIDLen is the longest node id (VARCHAR(64)); MaxAddrLen and
// MaxVersionLen bound the other registered strings.
const (
	MaxNodeIDLen  = 64
	MaxAddrLen    = 255
	MaxVersionLen = 64
	MaxLayoutLen  = 128
)

// KeepChanges is how many of the latest changes the log keeps. A node that
// was away for more changes than this drops everything it had cached.
const KeepChanges = 1000

// NodeInfo is what a node registers.
type NodeInfo struct {
	ID      string    // unique per process: a new one at every start
	Addr    string    // where clients reach it (server.addr as it listens)
	Version string    // leaf's version
	Started time.Time // process start, on the node's clock
}

// Node is a live node, as the registry lists it.
type Node struct {
	NodeInfo
	Worker  int           // its worker id, -1 when it holds none
	Seen    int64         // the last change it applied
	Age     time.Duration // since its last renewal, on the store's clock
	Expires time.Duration // until its lease ends, on the store's clock
}

// Renewal is one heartbeat of a node.
type Renewal struct {
	Node string
	TTL  time.Duration // the lease from now, on the store's clock
	Seen int64         // every change up to this one is applied
	// Worker is the worker id the node holds (-1: none). Its lease is
	// renewed with the node's, and its bound raised to Bound when lower.
	Worker int
	Bound  int64
}

// WorkerRequest asks for a worker id.
type WorkerRequest struct {
	Node  string
	Limit int           // ids are in [0, Limit)
	TTL   time.Duration // the lease, on the store's clock
	Now   int64         // the node's clock, Unix milliseconds
	Bound int64         // the node issues no ID with a time above this
}

// Worker is a leased worker id.
type Worker struct {
	ID int
	// Prev is the bound the id had: every ID issued with it before has a
	// time at or below Prev (Unix milliseconds), so the new holder starts
	// strictly after it. 0 for an id never leased.
	Prev int64
}

// Change is one administrative change in the log.
type Change struct {
	Seq   int64  // its place in the log, from 1; set by Publish
	Kind  string // ChangeFloor or ChangeStep
	Tag   string
	Value int64
	Node  string // the node that published it ("" for a tool)
}

// Kinds of Change.
const (
	// ChangeFloor: every later ID of Tag is above Value; nodes drop
	// cached IDs at or below it.
	ChangeFloor = "floor"
	// ChangeStep: the table's step of Tag is now Value.
	ChangeStep = "step"
)

// Registry is the cluster registry of a store (see the comment above).
// Backends implement it next to Backend; every method takes a context and
// answers ErrNoCluster when the store has no registry tables.
type Registry interface {
	// Join registers the node with a lease of ttl, replacing a
	// registration under the same id, and returns the log's head: the
	// last change already in effect in the store.
	Join(ctx context.Context, n NodeInfo, ttl time.Duration) (head int64, err error)
	// Renew extends the node's lease (and its worker id's) and records
	// r.Seen as its acknowledgement. ErrLeaseLost when the node is not
	// registered (nothing is renewed); ErrWorkerLost when its worker id
	// went to another node (the node's lease is renewed).
	Renew(ctx context.Context, r Renewal) error
	// Leave removes the node and frees worker (-1: none) if the node
	// still holds it, setting its bound to bound: the node's last issued
	// time, or the bound the id had when the node leased it if that is
	// later, so never below what a holder issued. Only that id: another
	// the node holds without knowing (a LeaseWorker whose answer was
	// lost) keeps its bound and expires with its lease.
	Leave(ctx context.Context, node string, worker int, bound int64) error
	// Nodes lists the live nodes, ordered by id.
	Nodes(ctx context.Context) ([]Node, error)
	// LeaseWorker leases the node a worker id in [0, r.Limit) that no
	// live node holds: a free one whose bound is before r.Now, else a new
	// one, else the free one whose bound is the oldest (the node then
	// waits for its clock to pass it). ErrNoWorker when all are held.
	LeaseWorker(ctx context.Context, r WorkerRequest) (Worker, error)
	// Publish appends a change to the log and returns its sequence
	// number. A change becomes visible only after every change before
	// it, so a node that read up to n has seen all of 1..n. A floor
	// (ChangeFloor) also raises the tag's max_id to c.Value+1 when it is
	// lower, in the same transaction, as Admin.RaiseFloor does: a
	// give-back that lowered it since the floor's own raise is undone
	// before anyone reads the change.
	Publish(ctx context.Context, c Change) (int64, error)
	// GiveBackAfter is Store.GiveBack for a node that has applied the
	// changes up to seen: it is refused (false, nothing written) when the
	// log holds a floor of tag at or above to published after seen, or
	// no longer holds every change after seen. Publish and GiveBackAfter
	// are serialized, so a floor is never published between the check
	// and the write.
	GiveBackAfter(ctx context.Context, tag string, from, to, seen int64) (bool, error)
	// Changes returns the changes after seq, in order, and the head of
	// the log (the last sequence number; 0 when empty).
	Changes(ctx context.Context, after int64) ([]Change, int64, error)
	// CreateTag creates t (Name, Step, Description) with max_id 1 and its
	// Mode and Layout, in one transaction; false, and no error, when the
	// tag exists. ErrInvalid for a bad name, step or description.
	CreateTag(ctx context.Context, t Tag) (bool, error)
}

// CheckNode accepts what every backend's registry holds: a node id of 1
// to MaxNodeIDLen bytes, an address and a version within their limits,
// all valid UTF-8. The error wraps ErrInvalid.
func CheckNode(n NodeInfo) error {
	switch {
	case n.ID == "" || len(n.ID) > MaxNodeIDLen || !utf8.ValidString(n.ID):
		return fmt.Errorf("%w: node id %q", ErrInvalid, n.ID)
	case len(n.Addr) > MaxAddrLen || !utf8.ValidString(n.Addr):
		return fmt.Errorf("%w: address %q", ErrInvalid, n.Addr)
	case len(n.Version) > MaxVersionLen || !utf8.ValidString(n.Version):
		return fmt.Errorf("%w: version %q", ErrInvalid, n.Version)
	}
	return nil
}
