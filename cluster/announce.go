package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/snowflake"
)

// Announce tells every live server of a change already in effect in the
// store and on this server (a floor raised, a step set), and waits until
// each has confirmed it, up to AckTimeout. An error wrapping
// ErrUnconfirmed names those that did not; the change stays in effect. With
// the features off it does nothing: there is no one to tell.
func (n *Node) Announce(ctx context.Context, kind, tag string, value int64) error {
	if n.offNow() {
		return nil
	}
	ch := persist.Change{Kind: kind, Tag: tag, Value: value, Node: n.opts.Node.ID}
	_, err := Announce(ctx, n.reg, []persist.Change{ch}, n.opts.AckTimeout, n.opts.Heartbeat/10)
	if err != nil {
		n.unconfirmed.Add(1)
	}
	return err
}

// Announce appends changes to reg's log and waits, up to timeout, until
// every live node but their publisher (Change.Node) has confirmed the last
// (and so all: nodes apply the log in order), reading the registry every
// poll (kept between 10ms and 200ms). It returns how many confirmed; an
// error wrapping ErrUnconfirmed names those that did not. Servers and the
// leaf tags command both announce with it.
func Announce(ctx context.Context, reg persist.Registry, changes []persist.Change, timeout, poll time.Duration) (int, error) {
	var seq int64
	self := ""
	for _, ch := range changes {
		var err error
		if seq, err = reg.Publish(ctx, ch); err != nil {
			return 0, fmt.Errorf("%w: the change could not be announced: %w", ErrUnconfirmed, err)
		}
		self = ch.Node
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poll = min(max(poll, 10*time.Millisecond), 200*time.Millisecond)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var pending []persist.Node
	var last error
	for {
		select {
		case <-ctx.Done():
			return 0, unconfirmed(pending, last, timeout)
		case <-timer.C:
		}
		nodes, err := reg.Nodes(ctx)
		if err == nil {
			pending = pending[:0]
			confirmed := 0
			for _, nd := range nodes {
				switch {
				case self != "" && nd.ID == self:
				case nd.Seen < seq:
					pending = append(pending, nd)
				default:
					confirmed++
				}
			}
			if len(pending) == 0 {
				return confirmed, nil
			}
		} else if ctx.Err() == nil {
			last = err
		}
		timer.Reset(poll)
	}
}

// unconfirmed is Announce's error: who did not confirm, or why they could
// not be asked.
func unconfirmed(pending []persist.Node, last error, timeout time.Duration) error {
	if len(pending) == 0 {
		return fmt.Errorf("%w within %s: the registry could not be read: %w", ErrUnconfirmed, timeout, last)
	}
	names := make([]string, len(pending))
	for i, nd := range pending {
		names[i] = nd.ID + " (" + nd.Addr + ")"
	}
	return fmt.Errorf("%w within %s: %s", ErrUnconfirmed, timeout, strings.Join(names, ", "))
}

// Nodes lists the live servers, from the registry; ErrOff when the
// features are off.
func (n *Node) Nodes(ctx context.Context) ([]persist.Node, error) {
	n.mu.Lock()
	off := n.off
	n.mu.Unlock()
	if off != nil {
		return nil, fmt.Errorf("%w: %w", ErrOff, off)
	}
	nodes, err := n.reg.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.nodes, n.nodesAt = nodes, n.opts.Now()
	n.mu.Unlock()
	return nodes, nil
}

// RecentNodes is Nodes at most a heartbeat old, for INFO, the metrics and
// the status page; on an error it answers the last list it has.
func (n *Node) RecentNodes(ctx context.Context) []persist.Node {
	n.mu.Lock()
	nodes, at := n.nodes, n.nodesAt
	n.mu.Unlock()
	if !at.IsZero() && n.opts.Now().Sub(at) < n.opts.Heartbeat {
		return nodes
	}
	if fresh, err := n.Nodes(ctx); err == nil {
		return fresh
	}
	return nodes
}

// Status is the node's state, from memory.
type Status struct {
	Enabled   bool
	Off       string // why the features are off, "" when on
	Node      persist.NodeInfo
	Serving   bool          // the lease is current: cached IDs are served
	LeaseLeft time.Duration // until it lapses unrenewed; 0 when lapsed
	LastBeat  time.Time     // start of the last successful heartbeat
	LastError string        // of the last failed heartbeat since
	Applied   int64         // the last change applied
	Worker    int           // Snowflake worker id, -1 none
	NoWorker  string        // why there is none, when the registry said so

	Heartbeats, HeartbeatFailures, Lapses int64
	Changes, Unconfirmed, Drops           int64 // changes applied; announcements unconfirmed; caches dropped

	Heartbeat, Lease, AckTimeout, NodeTimeout time.Duration
	Layout                                    snowflake.Layout
	Snowflake                                 snowflake.Stats
}

// Status returns the node's state.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := Status{
		Enabled: n.off == nil, Node: n.opts.Node, Serving: n.serving && n.off == nil && n.alloc.Held() == nil,
		LastBeat: n.lastBeat, Applied: n.seen, Worker: n.worker,
		Heartbeats: n.beats.Load(), HeartbeatFailures: n.failures.Load(), Lapses: n.lapses.Load(),
		Changes: n.applied.Load(), Unconfirmed: n.unconfirmed.Load(), Drops: n.drops.Load(),
		Heartbeat: n.opts.Heartbeat, Lease: n.opts.Lease, AckTimeout: n.opts.AckTimeout, NodeTimeout: n.opts.NodeTimeout,
		Layout: n.gen.Layout(), Snowflake: n.gen.Stats(),
	}
	if n.off != nil {
		st.Off = n.off.Error()
	}
	if n.lastErr != nil {
		st.LastError = n.lastErr.Error()
	}
	if n.noWorker != nil {
		st.NoWorker = n.noWorker.Error()
	}
	if st.Serving {
		st.LeaseLeft = max(n.deadline.Sub(n.opts.Now()), 0)
	}
	return st
}

// Modes is the segment.Modes of the Snowflake tags, served by gen: a tag
// whose recorded layout is not gen's is refused, since its IDs would not
// be unique beside those of servers with the other layout.
func Modes(gen *snowflake.Generator) segment.Modes { return modes{gen} }

type modes struct{ gen *snowflake.Generator }

// errMode is segment.ErrMode for an unknown mode.
var errMode = errors.New("unknown mode")

func (m modes) Generator(mode, layout string) (segment.Generator, error) {
	if mode != persist.ModeSnowflake {
		return nil, fmt.Errorf("%w: %w %q", segment.ErrMode, errMode, mode)
	}
	if want := m.gen.Layout().String(); layout != want {
		return nil, fmt.Errorf("%w: the tag was created with the Snowflake layout %q and this server's is %q: "+
			"every server must have the layout the tag was created with (cluster.snowflake_*)", segment.ErrMode, layout, want)
	}
	return m.gen, nil
}

func (m modes) Layout(mode string) (string, error) {
	if mode != persist.ModeSnowflake {
		return "", fmt.Errorf("%w: %w %q", segment.ErrMode, errMode, mode)
	}
	return m.gen.Layout().String(), nil
}
