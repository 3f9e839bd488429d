package server

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/leaf-id/leaf/resp"
)

// Pub/Sub for the Sentinel face: SUBSCRIBE to Sentinel's event channels
// (+switch-master and the others, all beginning with + or -), PSUBSCRIBE
// to any pattern, and their UNSUBSCRIBE, with Redis's replies and, on a
// RESP2 connection, its subscribed mode. leaf publishes one event:
// +switch-master "<name> <old ip> <old port> <new ip> <new port>" when
// the server SENTINEL GET-MASTER-ADDR-BY-NAME (or MASTER) gave for a name
// is no longer the one it would give (the server left the slot map, or
// this server started or stopped serving), checked every heartbeat (every
// second at most) while anyone is subscribed. Messages are queued on the subscriber's
// connection (resp.Conn.Push), as MONITOR's lines: a subscriber that
// does not read is disconnected once subscriberMaxPending bytes wait.
// There is no PUBLISH: other channels are refused, not silently dead.

// subscriberMaxPending bounds the bytes waiting to be written to a
// subscriber.
const subscriberMaxPending = 1 << 20

// switchMaster is the one channel leaf publishes to.
const switchMaster = "+switch-master"

// subscription is a connection's channels and patterns.
type subscription struct {
	channels map[string]struct{}
	patterns map[string]struct{}
}

func (sub *subscription) count() int { return len(sub.channels) + len(sub.patterns) }

// subscribers are the connections subscribed to a channel or a pattern,
// and whether the goroutine that publishes +switch-master runs.
type subscribers struct {
	mu       sync.Mutex
	list     map[*client]*subscription
	watching bool
}

// remove forgets c's subscriptions.
func (ss *subscribers) remove(c *client) {
	ss.mu.Lock()
	delete(ss.list, c)
	ss.mu.Unlock()
}

func registerPubSub(t table) {
	flags := []string{"pubsub", "noscript", "loading", "stale"}
	t.add(
		&command{name: "subscribe", arity: -2, fn: cmdSubscribe, flags: flags, acl: []string{"pubsub", "slow"},
			summary: "Listens for messages published to channels", since: "2.0.0", group: "pubsub",
			complex: "O(N) where N is the number of channels to subscribe to."},
		&command{name: "psubscribe", arity: -2, fn: cmdPSubscribe, flags: flags, acl: []string{"pubsub", "slow"},
			summary: "Listens for messages published to channels that match one or more patterns", since: "2.0.0", group: "pubsub",
			complex: "O(N) where N is the number of patterns to subscribe to."},
		&command{name: "unsubscribe", arity: -1, fn: cmdUnsubscribe, flags: flags, acl: []string{"pubsub", "slow"},
			summary: "Stops listening to messages posted to channels", since: "2.0.0", group: "pubsub",
			complex: "O(N) where N is the number of channels to unsubscribe."},
		&command{name: "punsubscribe", arity: -1, fn: cmdPUnsubscribe, flags: flags, acl: []string{"pubsub", "slow"},
			summary: "Stops listening to messages published to channels that match one or more patterns", since: "2.0.0", group: "pubsub",
			complex: "O(N) where N is the number of patterns to unsubscribe."},
	)
}

// sentinelChannel reports whether ch is one of Sentinel's event channels.
func sentinelChannel(ch []byte) bool {
	return len(ch) > 1 && (ch[0] == '+' || ch[0] == '-') || string(ch) == "__sentinel__:hello"
}

// subscribe adds names to c's channels (patterns when pattern), writing
// Redis's reply for each: [kind, name, subscriptions].
func (s *Server) subscribe(c *client, conn *resp.Conn, names [][]byte, pattern bool) {
	kind := "subscribe"
	if pattern {
		kind = "psubscribe"
	}
	ss := &s.subs
	ss.mu.Lock()
	if ss.list == nil {
		ss.list = map[*client]*subscription{}
	}
	sub := ss.list[c]
	if sub == nil {
		sub = &subscription{channels: map[string]struct{}{}, patterns: map[string]struct{}{}}
		ss.list[c] = sub
	}
	set := sub.channels
	if pattern {
		set = sub.patterns
	}
	for _, n := range names {
		set[string(n)] = struct{}{}
		conn.WritePush(3)
		conn.WriteBulkString(kind)
		conn.WriteBulk(n)
		conn.WriteInt(sub.count())
	}
	c.subscribed = sub.count()
	start := !ss.watching
	ss.watching = true
	ss.mu.Unlock()
	if start {
		go s.watchMasters()
	}
}

// unsubscribe removes names from c's channels (patterns when pattern),
// all of them when names is empty, writing Redis's reply for each; with
// nothing to remove, one reply with a nil name.
func (s *Server) unsubscribe(c *client, conn *resp.Conn, names [][]byte, pattern bool) {
	kind := "unsubscribe"
	if pattern {
		kind = "punsubscribe"
	}
	ss := &s.subs
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sub := ss.list[c]
	if sub == nil {
		sub = &subscription{channels: map[string]struct{}{}, patterns: map[string]struct{}{}}
	}
	set := sub.channels
	if pattern {
		set = sub.patterns
	}
	if len(names) == 0 {
		all := make([]string, 0, len(set))
		for n := range set {
			all = append(all, n)
		}
		sort.Strings(all)
		for _, n := range all {
			names = append(names, []byte(n))
		}
	}
	if len(names) == 0 {
		conn.WritePush(3)
		conn.WriteBulkString(kind)
		conn.WriteNull()
		conn.WriteInt(sub.count())
	}
	for _, n := range names {
		delete(set, string(n))
		conn.WritePush(3)
		conn.WriteBulkString(kind)
		conn.WriteBulk(n)
		conn.WriteInt(sub.count())
	}
	c.subscribed = sub.count()
	if c.subscribed == 0 {
		delete(ss.list, c)
	}
}

// cmdSubscribe: SUBSCRIBE channel ... -> a reply per channel. Only
// Sentinel's event channels: any other is refused, and then none is
// subscribed.
func cmdSubscribe(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	for _, ch := range args[1:] {
		if !sentinelChannel(ch) {
			s.writeError(c, conn, fmt.Sprintf(errChannel, cstr(ch)))
			return
		}
	}
	s.subscribe(c, conn, args[1:], false)
}

// cmdPSubscribe: PSUBSCRIBE pattern ... -> a reply per pattern; any
// pattern, though only Sentinel's events are ever published.
func cmdPSubscribe(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.subscribe(c, conn, args[1:], true)
}

func cmdUnsubscribe(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.unsubscribe(c, conn, args[1:], false)
}

func cmdPUnsubscribe(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.unsubscribe(c, conn, args[1:], true)
}

// subscribedMode applies Redis's rule to a RESP2 connection with
// subscriptions: only the Pub/Sub commands, PING, QUIT and RESET run, and
// PING answers as a message, [pong, argument]. It reports whether it
// answered the command itself.
func (s *Server) subscribedMode(c *client, conn *resp.Conn, cmd *command, args [][]byte) bool {
	name, _, _ := strings.Cut(cmd.name, "|")
	switch name {
	case "subscribe", "psubscribe", "unsubscribe", "punsubscribe", "quit", "reset":
		return false
	case "ping":
		s.begin(c, cmd, true, args)
		conn.WriteArray(2)
		conn.WriteBulkString("pong")
		if len(args) > 1 {
			conn.WriteBulk(args[1])
		} else {
			conn.WriteBulkString("")
		}
		s.ran(c, cmd, conn, args)
		return true
	}
	c.stats.reject(cmd)
	c.flagTx()
	s.writeError(c, conn, fmt.Sprintf(errSubscribedOnly, name))
	return true
}

// publish sends payload on channel to every connection subscribed to it
// or to a pattern that matches it; a connection that does not read its
// messages is closed.
func (s *Server) publish(channel, payload string) {
	ss := &s.subs
	var slow []*client
	ss.mu.Lock()
	for c, sub := range ss.list {
		c.meta.Lock()
		proto := c.meta.resp
		c.meta.Unlock()
		var w resp.Writer
		w.SetProtocol(proto)
		if _, ok := sub.channels[channel]; ok {
			w.WritePush(3)
			w.WriteBulkString("message")
			w.WriteBulkString(channel)
			w.WriteBulkString(payload)
		}
		for p := range sub.patterns {
			if globMatch([]byte(p), []byte(channel)) {
				w.WritePush(4)
				w.WriteBulkString("pmessage")
				w.WriteBulkString(p)
				w.WriteBulkString(channel)
				w.WriteBulkString(payload)
			}
		}
		if len(w.Bytes()) > 0 && !c.conn.Push(w.Bytes(), subscriberMaxPending) {
			slow = append(slow, c)
		}
	}
	ss.mu.Unlock()
	for _, c := range slow {
		ss.remove(c)
		s.log.Warn("closing a subscriber that does not read its messages", "id", c.id, "addr", c.addr,
			"pending_bytes", subscriberMaxPending)
		c.conn.Kill()
	}
}

// watchMasters publishes +switch-master for each master name whose answer
// changed, every heartbeat (every second at most, so that a lapse is told
// at once whatever cluster.heartbeat), until nobody is subscribed or the
// server shuts down.
func (s *Server) watchMasters() {
	every := time.Second
	if s.opts.Cluster != nil {
		every = min(every, s.opts.Cluster.Status().Heartbeat)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			s.subs.mu.Lock()
			s.subs.watching = false
			s.subs.mu.Unlock()
			return
		case <-tick.C:
		}
		s.subs.mu.Lock()
		if len(s.subs.list) == 0 {
			s.subs.watching = false
			s.subs.mu.Unlock()
			return
		}
		s.subs.mu.Unlock()
		now := s.master().Addr
		for name, was := range s.given.changed(now) {
			oh, op := splitHostPort(was)
			nh, np := splitHostPort(now)
			s.publish(switchMaster, strings.Join([]string{name, oh, op, nh, np}, " "))
		}
	}
}

// changed records addr as the answer for every name, and returns the
// names whose answer was another, with that other.
func (g *givenMasters) changed(addr string) map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out map[string]string
	for name, was := range g.addrs {
		if was != addr {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = was
			g.addrs[name] = addr
		}
	}
	return out
}

// splitHostPort is host and port of addr as text; addr and "0" when it
// has no port.
func splitHostPort(addr string) (string, string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, "0"
	}
	return h, p
}
