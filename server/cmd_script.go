package server

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/leaf-id/leaf/resp"
)

// Lua scripting: EVAL, EVALSHA and SCRIPT, on gopher-lua (the interpreter
// miniredis embeds). redis.call and redis.pcall run leaf's own commands,
// with Redis's conversions between replies and Lua values, so the common
// counter scripts ("INCR, and EXPIRE if it is 1") run unchanged.
//
// A run gets an interpreter with the base, table, string and math
// libraries only: no os, io, package (require), debug, loadfile, dofile
// nor print; reading an undefined global or setting one is an error, as
// in Redis 7. Interpreters are kept for later runs, but one whose run
// changed its globals or libraries (rawset, setmetatable) is dropped, so
// no run sees what another left. A run is stopped after Options.ScriptTimeLimit. The IDs a
// script's INCRs take are each taken as by an INCR sent alone: other
// connections may take IDs of the same tag between two of them.

// DefaultScriptTimeLimit is Options.ScriptTimeLimit's default, Redis's
// lua-time-limit.
const DefaultScriptTimeLimit = 5 * time.Second

// luaOptions start an interpreter small, as most scripts are (its
// default data stack alone is 80 KiB), and let it grow: 200 nested calls
// as Lua's own C stack limit, a data stack of up to a million values.
var luaOptions = lua.Options{
	SkipOpenLibs:        true,
	CallStackSize:       200,
	MinimizeStackMemory: true,
	RegistrySize:        256,
	RegistryMaxSize:     1 << 20,
}

// Bounds of the script cache and of what one string.rep may build.
const (
	maxScripts   = 10_000
	maxLuaString = 64 << 20
)

func registerScript(t table) {
	scriptFlags := []string{"noscript", "stale", "skip_monitor", "may_replicate", "no_mandatory_keys"}
	t.add(
		&command{
			name: "eval", arity: -3, fn: cmdEval, flags: scriptFlags, acl: []string{"slow", "scripting"},
			summary: "Executes a Lua script", since: "2.6.0", group: "scripting", complex: "Depends on the script that is executed.",
			args: []argDoc{{name: "script", typ: "string"}, {name: "numkeys", typ: "integer"}},
		},
		&command{
			name: "evalsha", arity: -3, fn: cmdEvalSHA, flags: scriptFlags, acl: []string{"slow", "scripting"},
			summary: "Executes a Lua script by its SHA1 digest", since: "2.6.0", group: "scripting", complex: "Depends on the script that is executed.",
			args: []argDoc{{name: "sha1", typ: "string"}, {name: "numkeys", typ: "integer"}},
		},
		(&command{
			name: "script", arity: -2,
			flags: []string{}, acl: []string{"slow"},
			summary: "A container for Lua scripts management commands", since: "2.6.0", group: "scripting", complex: "Depends on subcommand.",
			help: []string{
				"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
				"EXISTS <sha1> [<sha1> ...]",
				"    Return information about the existence of the scripts in the script cache.",
				"FLUSH [ASYNC|SYNC]",
				"    Flush the Lua scripts cache.",
				"KILL",
				"    Kill the currently executing Lua script.",
				"LOAD <script>",
				"    Load a script into the scripts cache without executing it.",
				"HELP",
				"    Print this help.",
			},
		}).sub(
			&command{name: "load", arity: 3, fn: cmdScriptLoad, flags: []string{"noscript", "stale"}, acl: []string{"slow", "scripting"},
				summary: "Loads a server-side Lua script to the script cache", since: "2.6.0", group: "scripting", complex: "O(N) with N being the length in bytes of the script body.",
				args: []argDoc{{name: "script", typ: "string"}}},
			&command{name: "exists", arity: -3, fn: cmdScriptExists, flags: []string{"noscript"}, acl: []string{"slow", "scripting"},
				summary: "Determines whether server-side Lua scripts exist in the script cache", since: "2.6.0", group: "scripting",
				complex: "O(N) with N being the number of scripts to check", args: []argDoc{{name: "sha1", typ: "string"}}},
			&command{name: "flush", arity: -2, fn: cmdScriptFlush, flags: []string{"noscript"}, acl: []string{"slow", "scripting"},
				summary: "Removes all server-side Lua scripts from the script cache", since: "2.6.0", group: "scripting", complex: "O(N) with N being the number of scripts in cache"},
			&command{name: "kill", arity: 2, fn: cmdScriptKill, flags: []string{"noscript", "allow_busy"}, acl: []string{"slow", "scripting"},
				summary: "Answers NOTBUSY: scripts stop by themselves after the time limit", since: "2.6.0", group: "scripting", complex: "O(1)"},
			&command{name: "help", arity: 2, fn: cmdScriptHelp, flags: []string{"loading", "stale"}, acl: []string{"slow", "scripting"},
				summary: "Returns helpful text about the different subcommands", since: "5.0.0", group: "scripting", complex: "O(1)"},
		),
	)
}

// scriptCache holds the compiled scripts by SHA1 (hex, lowercase). Past
// maxScripts an arbitrary one is dropped: its EVALSHA then answers
// NOSCRIPT, which clients answer with EVAL.
type scriptCache struct {
	mu sync.Mutex
	m  map[string]*lua.FunctionProto
}

func (sc *scriptCache) get(sha string) *lua.FunctionProto {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.m[sha]
}

func (sc *scriptCache) put(sha string, p *lua.FunctionProto) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.m == nil {
		sc.m = map[string]*lua.FunctionProto{}
	}
	if _, ok := sc.m[sha]; !ok && len(sc.m) >= maxScripts {
		for k := range sc.m {
			delete(sc.m, k)
			break
		}
	}
	sc.m[sha] = p
}

func (sc *scriptCache) flush() {
	sc.mu.Lock()
	sc.m = nil
	sc.mu.Unlock()
}

func sha1hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// compile compiles a script body and caches it; the error is the reply.
func (s *Server) compile(body []byte) (string, *lua.FunctionProto, string) {
	sha := sha1hex(body)
	if p := s.scripts.get(sha); p != nil {
		return sha, p, ""
	}
	chunk, err := parse.Parse(bytes.NewReader(body), "@user_script")
	if err != nil {
		return sha, nil, fmt.Sprintf(errScriptCompile, sanitize(err.Error()))
	}
	p, err := lua.Compile(chunk, "user_script")
	if err != nil {
		return sha, nil, fmt.Sprintf(errScriptCompile, sanitize(err.Error()))
	}
	s.scripts.put(sha, p)
	return sha, p, ""
}

func cmdEval(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	sha, p, errText := s.compile(args[1])
	if errText != "" {
		s.writeError(c, conn, errText)
		return
	}
	s.runScript(c, conn, sha, p, args)
}

func cmdEvalSHA(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	sha := strings.ToLower(string(args[1]))
	p := s.scripts.get(sha)
	if p == nil {
		s.writeError(c, conn, errNoScript)
		return
	}
	s.runScript(c, conn, sha, p, args)
}

func cmdScriptLoad(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	sha, _, errText := s.compile(args[2])
	if errText != "" {
		s.writeError(c, conn, errText)
		return
	}
	conn.WriteBulkString(sha)
}

func cmdScriptExists(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	conn.WriteArray(len(args) - 2)
	for _, sha := range args[2:] {
		writeBool(conn, s.scripts.get(strings.ToLower(string(sha))) != nil)
	}
}

func cmdScriptFlush(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	if len(args) > 3 || (len(args) == 3 && !bytes.EqualFold(args[2], []byte("sync")) && !bytes.EqualFold(args[2], []byte("async"))) {
		s.writeError(c, conn, errScriptFlushOption)
		return
	}
	s.scripts.flush()
	conn.WriteString("OK")
}

func cmdScriptKill(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	s.writeError(c, conn, errNotBusy)
}

func cmdScriptHelp(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	writeHelp(conn, s.cmds["script"].help)
}

// scriptRun is one run of a script: its interpreter, and the connection
// its redis.call commands write their replies to, to be read back.
type scriptRun struct {
	s       *Server
	c       *client
	sha     string
	scratch *resp.Conn
	// where is the position of the redis.call whose error the script did
	// not catch: Redis's error replies name it.
	where string
}

// runScript runs EVAL's or EVALSHA's script p with its keys and
// arguments and writes its reply.
func (s *Server) runScript(c *client, conn *resp.Conn, sha string, p *lua.FunctionProto, args [][]byte) {
	numKeys, ok := parseInt(args[2])
	switch {
	case !ok:
		s.writeError(c, conn, errNotInteger)
		return
	case numKeys < 0:
		s.writeError(c, conn, errNumKeysNegative)
		return
	case numKeys > int64(len(args)-3):
		s.writeError(c, conn, errNumKeysTooMany)
		return
	}
	keys, argv := args[3:3+numKeys], args[3+numKeys:]

	vm, _ := s.luaVMs.Get().(*luaVM)
	if vm == nil {
		vm = newLuaVM()
	}
	L := vm.L
	run := &scriptRun{s: s, c: c, sha: sha, scratch: resp.NewConn(c.addr, c.laddr)}
	vm.run = run
	L.G.Global.RawSetString("KEYS", stringTable(L, keys))
	L.G.Global.RawSetString("ARGV", stringTable(L, argv))

	// A script runs in the caller's database; its SELECT lasts for the
	// script only, as in Redis 7.
	db := c.db
	defer func() { c.db = db }()
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.ScriptTimeLimit)
	defer cancel()
	L.SetContext(ctx)
	L.Push(L.NewFunctionFromProto(p))
	err := L.PCall(0, 1, nil)
	L.RemoveContext()
	switch {
	case err == nil:
		s.writeLua(c, conn, L.Get(-1))
	case s.ctx.Err() != nil:
		s.writeError(c, conn, errShuttingDown)
	case ctx.Err() != nil:
		s.writeError(c, conn, fmt.Sprintf(errScriptTimeout, s.opts.ScriptTimeLimit, sha))
	default:
		s.writeError(c, conn, run.errorText(err))
	}
	// The interpreter serves another run only if this one ended well and
	// left its globals and libraries as they were.
	vm.run = nil
	if err != nil || !vm.intact() {
		L.Close()
		return
	}
	L.SetTop(0)
	s.luaVMs.Put(vm)
}

// luaVM is an interpreter kept between runs: making one costs far more
// than most scripts (its libraries are hundreds of values). run is the
// run its redis table serves now.
type luaVM struct {
	L    *lua.LState
	run  *scriptRun
	snap []tableSnap // the tables a script could change, as opened: globals first
	meta lua.LValue  // the guard on globals
	smt  lua.LValue  // strings' metatable, whose __index is string
}

// tableSnap is a table's entries as opened.
type tableSnap struct {
	t       *lua.LTable
	entries map[lua.LValue]lua.LValue
}

func newLuaVM() *luaVM {
	L := lua.NewState(luaOptions)
	vm := &luaVM{L: L}
	vm.open()
	g := L.G.Global
	vm.meta = L.GetMetatable(g)
	vm.smt = L.GetMetatable(lua.LString(""))
	for _, v := range []lua.LValue{g, g.RawGetString("string"), g.RawGetString("table"),
		g.RawGetString("math"), g.RawGetString("redis"), vm.meta, vm.smt} {
		t, ok := v.(*lua.LTable)
		if !ok {
			continue
		}
		ts := tableSnap{t: t, entries: map[lua.LValue]lua.LValue{}}
		t.ForEach(func(k, v lua.LValue) { ts.entries[k] = v })
		vm.snap = append(vm.snap, ts)
	}
	return vm
}

// intact reports whether a run left the interpreter as opened: the same
// entries in the globals (but KEYS and ARGV) and the libraries, and the
// same metatables. A script cannot change them but with rawset,
// setmetatable or a library's own fields.
func (vm *luaVM) intact() bool {
	L := vm.L
	if L.GetMetatable(L.G.Global) != vm.meta || L.GetMetatable(lua.LString("")) != vm.smt {
		return false
	}
	for i, ts := range vm.snap {
		n, same := 0, true
		ts.t.ForEach(func(k, v lua.LValue) {
			if i == 0 && (k == lua.LString("KEYS") || k == lua.LString("ARGV")) {
				return
			}
			n++
			if w, ok := ts.entries[k]; !ok || w != v {
				same = false
			}
		})
		want := len(ts.entries)
		if i == 0 {
			for _, k := range []string{"KEYS", "ARGV"} {
				if _, ok := ts.entries[lua.LString(k)]; ok {
					want--
				}
			}
		}
		if !same || n != want {
			return false
		}
	}
	return true
}

// errorText is the reply to an error the script did not catch, in Redis
// 7's form: the error, then the script and where in it.
func (r *scriptRun) errorText(err error) string {
	var ae *lua.ApiError
	if !errors.As(err, &ae) {
		return fmt.Sprintf(errScriptRun, sanitize(err.Error()), r.sha, "?")
	}
	if t, ok := ae.Object.(*lua.LTable); ok {
		// redis.call's error, a table {err=...}, or one the script raised.
		if e, ok := t.RawGetString("err").(lua.LString); ok {
			return fmt.Sprintf(errScriptCall, sanitize(string(e)), r.sha, r.where)
		}
	}
	msg := ae.Object.String()
	line := "?"
	if rest, ok := strings.CutPrefix(msg, "user_script:"); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			line = rest[:i]
		}
	}
	return fmt.Sprintf(errScriptRun, sanitize(msg), r.sha, line)
}

// open loads the sandbox's libraries, the redis table, and the guards on
// globals.
func (vm *luaVM) open() {
	L := vm.L
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	g := L.G.Global
	for _, name := range []string{"dofile", "loadfile", "require", "module", "print", "_printregs", "_GOPHER_LUA_VERSION"} {
		g.RawSetString(name, lua.LNil)
	}
	if str, ok := g.RawGetString("string").(*lua.LTable); ok {
		str.RawSetString("rep", L.NewFunction(luaStringRep))
	}
	redis := L.NewTable()
	L.SetFuncs(redis, map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return vm.run.call(L, true) },
		"pcall":              func(L *lua.LState) int { return vm.run.call(L, false) },
		"error_reply":        func(L *lua.LState) int { return replyTable(L, "err") },
		"status_reply":       func(L *lua.LState) int { return replyTable(L, "ok") },
		"sha1hex":            func(L *lua.LState) int { L.Push(lua.LString(sha1hex([]byte(L.CheckString(1))))); return 1 },
		"log":                func(L *lua.LState) int { return 0 },
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"set_repl":           func(L *lua.LState) int { return 0 },
	})
	for name, v := range map[string]int{"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3} {
		redis.RawSetString(name, lua.LNumber(v))
	}
	g.RawSetString("redis", redis)
	meta := L.NewTable()
	meta.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.CheckAny(2).String())
		return 0
	}))
	meta.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	L.SetMetatable(g, meta)
}

// luaStringRep is string.rep bounded to maxLuaString bytes: one call
// cannot make the server allocate without limit.
func luaStringRep(L *lua.LState) int {
	s, n := L.CheckString(1), L.CheckInt64(2)
	if n <= 0 || s == "" {
		L.Push(lua.LString(""))
		return 1
	}
	if n > maxLuaString/int64(len(s)) {
		L.RaiseError("string.rep: result longer than %d bytes", maxLuaString)
		return 0
	}
	L.Push(lua.LString(strings.Repeat(s, int(n))))
	return 1
}

// replyTable is redis.error_reply and redis.status_reply: {field=s}.
func replyTable(L *lua.LState, field string) int {
	t := L.NewTable()
	t.RawSetString(field, lua.LString(L.CheckString(1)))
	L.Push(t)
	return 1
}

func stringTable(L *lua.LState, items [][]byte) *lua.LTable {
	t := L.CreateTable(len(items), 0)
	for i, b := range items {
		t.RawSetInt(i+1, lua.LString(b))
	}
	return t
}

// call is redis.call (raise true) and redis.pcall: it runs one of leaf's
// commands as a client would send it and converts its reply to Lua; an
// error reply is raised, or returned as {err=...} by pcall.
func (r *scriptRun) call(L *lua.LState, raise bool) int {
	fail := func(msg string) int {
		t := L.NewTable()
		t.RawSetString("err", lua.LString(msg))
		if raise {
			r.where = strings.TrimSuffix(strings.TrimPrefix(L.Where(1), "user_script:"), ":")
			L.Error(t, 0)
			return 0
		}
		L.Push(t)
		return 1
	}
	n := L.GetTop()
	if n == 0 {
		return fail(errScriptNoArgs)
	}
	args := make([][]byte, n)
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			args[i-1] = []byte(v)
		case lua.LNumber:
			args[i-1] = []byte(luaNumberString(float64(v)))
		default:
			return fail(errScriptArgType)
		}
	}
	s, c := r.s, r.c
	cmd := s.lookupCommand(c, args)
	switch {
	case cmd == nil:
		return fail(errScriptUnknown)
	case !cmd.arityOK(len(args)):
		return fail(errScriptArity)
	case hasFlag(cmd, "noscript"):
		return fail(errScriptNotAllowed)
	}
	r.scratch.Reset()
	c.runNested(cmd, func() { cmd.fn(s, c, r.scratch, args) })
	v, rest := parseReply(L, r.scratch.Bytes())
	_ = rest
	if t, ok := v.(*lua.LTable); ok {
		if e, ok := t.RawGetString("err").(lua.LString); ok {
			return fail(string(e))
		}
	}
	L.Push(v)
	return 1
}

// lookupCommand finds a command and its subcommand by the names in args,
// nil when there is none.
func (s *Server) lookupCommand(c *client, args [][]byte) *command {
	n := c.lowerName(args[0])
	if n < 0 {
		return nil
	}
	cmd := s.cmds[string(c.name[:n])]
	if cmd == nil || cmd.subs == nil || len(args) < 2 {
		return cmd
	}
	if n = c.lowerName(args[1]); n < 0 {
		return nil
	}
	return cmd.subs[string(c.name[:n])]
}

func hasFlag(cmd *command, flag string) bool {
	for _, f := range cmd.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// luaNumberString formats a Lua number as an argument, as Lua's
// tostring does: integers without a fraction.
func luaNumberString(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}

// parseReply converts the first RESP2 reply in b to a Lua value as Redis
// does: integer -> number, bulk -> string, nil -> false, array -> table,
// status -> {ok=...}, error -> {err=...}. It returns the rest of b.
func parseReply(L *lua.LState, b []byte) (lua.LValue, []byte) {
	if len(b) == 0 {
		return lua.LFalse, b
	}
	end := bytes.Index(b, []byte("\r\n"))
	if end < 0 {
		return lua.LFalse, nil
	}
	line, rest := b[1:end], b[end+2:]
	switch b[0] {
	case '+':
		t := L.NewTable()
		t.RawSetString("ok", lua.LString(line))
		return t, rest
	case '-':
		t := L.NewTable()
		t.RawSetString("err", lua.LString(line))
		return t, rest
	case ':':
		n, _ := strconv.ParseInt(string(line), 10, 64)
		return lua.LNumber(n), rest
	case '$':
		n, _ := strconv.Atoi(string(line))
		if n < 0 || n+2 > len(rest) {
			return lua.LFalse, rest
		}
		return lua.LString(rest[:n]), rest[n+2:]
	case '*':
		n, _ := strconv.Atoi(string(line))
		if n < 0 {
			return lua.LFalse, rest
		}
		t := L.CreateTable(n, 0)
		for i := 1; i <= n; i++ {
			var v lua.LValue
			v, rest = parseReply(L, rest)
			t.RawSetInt(i, v)
		}
		return t, rest
	}
	return lua.LFalse, nil
}

// writeLua writes a script's result as Redis converts it: number ->
// integer (truncated), string -> bulk, true -> 1, false and nil -> nil,
// {err=...} -> error, {ok=...} -> status, other tables -> array up to
// the first nil.
func (s *Server) writeLua(c *client, conn *resp.Conn, v lua.LValue) {
	switch v := v.(type) {
	case lua.LNumber:
		conn.WriteInt64(int64(v))
	case lua.LString:
		conn.WriteBulkString(string(v))
	case lua.LBool:
		if v {
			conn.WriteInt(1)
		} else {
			conn.WriteNull()
		}
	case *lua.LTable:
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			s.writeError(c, conn, string(e))
			return
		}
		if st, ok := v.RawGetString("ok").(lua.LString); ok {
			conn.WriteString(string(st))
			return
		}
		n := 0
		for v.RawGetInt(n+1) != lua.LNil {
			n++
		}
		conn.WriteArray(n)
		for i := 1; i <= n; i++ {
			s.writeLua(c, conn, v.RawGetInt(i))
		}
	default:
		conn.WriteNull()
	}
}
