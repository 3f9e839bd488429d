package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/internal/rawresp"
	"github.com/leaf-id/leaf/server"
)

// CLIENT LIST, INFO, KILL and NO-EVICT compared with redis-server's.

// clientFields parses one line of CLIENT LIST into its keys, in order,
// and values.
func clientFields(t *testing.T, line string) ([]string, map[string]string) {
	t.Helper()
	var keys []string
	vals := map[string]string{}
	for _, kv := range strings.Fields(line) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.Contains(v, "=") {
			t.Fatalf("CLIENT LIST field %q in %q is not key=value", kv, line)
		}
		keys = append(keys, k)
		vals[k] = v
	}
	return keys, vals
}

// TestClientListLikeRedis: every field of leaf's CLIENT LIST and CLIENT
// INFO line is one of Redis's (or of its later versions: lib-name,
// lib-ver, tot-net-in, tot-net-out), in Redis's order, of the same form,
// with true values: the connection's id, addresses, descriptor, name,
// last command, user, protocol.
func TestClientListLikeRedis(t *testing.T) {
	p := newComparePair(t, 2, server.Options{})
	ctx := context.Background()
	for _, c := range []*redis.Client{p.leaf, p.rds} {
		if err := c.Do(ctx, "CLIENT", "SETNAME", "lister").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Incr(ctx, "a").Err(); err != nil {
			t.Fatal(err)
		}
	}
	linfo, err := p.leaf.Do(ctx, "CLIENT", "INFO").Text()
	if err != nil {
		t.Fatal(err)
	}
	rinfo, err := p.rds.Do(ctx, "CLIENT", "INFO").Text()
	if err != nil {
		t.Fatal(err)
	}
	lkeys, lv := clientFields(t, linfo)
	rkeys, rv := clientFields(t, rinfo)
	later := map[string]bool{"lib-name": true, "lib-ver": true, "tot-net-in": true, "tot-net-out": true}
	pos := map[string]int{}
	for i, k := range rkeys {
		pos[k] = i
	}
	last := -1
	for _, k := range lkeys {
		if later[k] {
			continue
		}
		i, ok := pos[k]
		if !ok {
			t.Errorf("field %s is not Redis's", k)
			continue
		}
		if i < last {
			t.Errorf("field %s out of Redis's order %v", k, rkeys)
		}
		last = i
		num := regexp.MustCompile(`^-?\d+$`)
		if num.MatchString(lv[k]) != num.MatchString(rv[k]) {
			t.Errorf("%s = %q, Redis %q", k, lv[k], rv[k])
		}
	}
	for _, k := range []string{"name", "cmd", "user", "resp", "db", "flags", "multi", "sub", "psub", "ssub", "redir"} {
		if lv[k] != rv[k] {
			t.Errorf("%s = %q, Redis %q", k, lv[k], rv[k])
		}
	}
	id, err := p.leaf.Do(ctx, "CLIENT", "ID").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if lv["id"] != strconv.FormatInt(id, 10) || lv["laddr"] != p.in.Addr || !strings.HasPrefix(lv["addr"], "127.0.0.1:") {
		t.Errorf("CLIENT INFO %q: id %d, laddr %s", linfo, id, p.in.Addr)
	}
	if fd, _ := strconv.Atoi(lv["fd"]); fd <= 2 {
		t.Errorf("fd %s: not a socket's", lv["fd"])
	}
	// CLIENT LIST: the same line for this connection, after CLIENT INFO.
	list, err := p.leaf.Do(ctx, "CLIENT", "LIST").Text()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, "id="+lv["id"]+" ") || !strings.Contains(list, " cmd=client|list ") {
		t.Errorf("CLIENT LIST %q", list)
	}
	for _, args := range [][]any{
		{"CLIENT", "LIST", "TYPE", "foo"}, {"CLIENT", "LIST", "ID", "x"}, {"CLIENT", "LIST", "ID", "0"},
		{"CLIENT", "LIST", "FOO"}, {"CLIENT", "LIST", "TYPE"}, {"CLIENT", "LIST", "TYPE", "pubsub"},
		{"CLIENT", "LIST", "TYPE", "master"}, {"CLIENT", "LIST", "ID", "999999"},
		{"CLIENT", "NO-EVICT", "maybe"}, {"CLIENT", "NO-EVICT"}, {"CLIENT", "NO-EVICT", "on"},
	} {
		t.Run(fmt.Sprint(args), func(t *testing.T) { p.same(t, args...) })
	}
	if info, _ := p.leaf.Do(ctx, "CLIENT", "INFO").Text(); !strings.Contains(info, " flags=e ") {
		t.Errorf("after NO-EVICT on: %q, want flags=e", info)
	}
	if list, _ := p.leaf.Do(ctx, "CLIENT", "LIST", "ID", lv["id"], "999999").Text(); strings.Count(list, "\n") != 1 {
		t.Errorf("CLIENT LIST ID: %q, want this connection's line", list)
	}
}

// TestClientKillLikeRedis: CLIENT KILL's two forms answer as Redis's
// (OK or "No such client"; the number killed), with its errors; a killed
// connection is closed at once, whatever it was doing; SKIPME no kills
// the caller after its reply.
func TestClientKillLikeRedis(t *testing.T) {
	p := newComparePair(t, 2, server.Options{})
	ctx := context.Background()
	for _, args := range [][]any{
		{"CLIENT", "KILL", "1.2.3.4:5"}, {"CLIENT", "KILL", "ID", "999"}, {"CLIENT", "KILL", "ID", "x"},
		{"CLIENT", "KILL", "ID", "0"}, {"CLIENT", "KILL", "FOO", "bar"}, {"CLIENT", "KILL", "ID"},
		{"CLIENT", "KILL", "TYPE", "foo"}, {"CLIENT", "KILL", "SKIPME", "maybe"}, {"CLIENT", "KILL"},
		{"CLIENT", "KILL", "USER", "nobody"}, {"CLIENT", "KILL", "TYPE", "replica"}, {"CLIENT", "KILL", "ID", "1", "TYPE"},
		{"CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "yes"}, {"CLIENT", "KILL", "TYPE", "normal"},
	} {
		t.Run(fmt.Sprint(args), func(t *testing.T) { p.same(t, args...) })
	}

	// Victims: one idle, one in the middle of a command's arguments.
	dial := func() (net.Conn, string) {
		t.Helper()
		nc, err := net.Dial("tcp", p.in.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		nc.SetDeadline(time.Now().Add(time.Minute)) // a safety net
		io.WriteString(nc, rawresp.Cmd("PING"))
		buf := make([]byte, 7)
		if _, err := io.ReadFull(nc, buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("PING: %q, %v", buf, err)
		}
		return nc, nc.LocalAddr().String()
	}
	idle, idleAddr := dial()
	half, _ := dial()
	io.WriteString(half, "*2\r\n$4\r\nINCR\r\n$5\r\nhal") // never completed
	if got, err := p.leaf.Do(ctx, "CLIENT", "KILL", idleAddr).Text(); err != nil || got != "OK" {
		t.Fatalf("CLIENT KILL %s: %q, %v", idleAddr, got, err)
	}
	if n, err := p.leaf.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Int(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE normal: %d, %v; want 1 (SKIPME yes: not the caller)", n, err)
	}
	for _, nc := range []net.Conn{idle, half} {
		if rest, err := io.ReadAll(nc); err != nil && !strings.Contains(err.Error(), "reset") || len(rest) != 0 {
			t.Errorf("a killed connection read %q, %v; want the end", rest, err)
		}
	}
	// The caller's own connection, after its reply.
	self, _ := dial()
	io.WriteString(self, rawresp.Cmd("CLIENT", "KILL", "SKIPME", "no")+rawresp.Cmd("PING"))
	if rest, _ := io.ReadAll(self); string(rest) != ":2\r\n" {
		t.Errorf("CLIENT KILL SKIPME no: %q, want :2 (p.leaf and itself), then the end, PING unanswered", rest)
	}
}
