package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"golang.org/x/time/rate"

	"github.com/leaf-id/leaf/internal/ratelog"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
)

// What a stranger or one client may cost the server (README, "Security"):
// a refused password is logged at warn with the client's address (ten a
// minute, then a count) and after Options.MaxAuthFailures of them the
// connection is closed, so guessing runs at the speed of new connections,
// not of a pipeline; a connection that has not authenticated within
// Options.Conn.AuthTimeout is closed by the connection layer; a client creates
// tags only as Options.CreatePolicy and CreateRate allow (the connection
// is the segment.Creator of its requests); CLIENT LIST is the admin's when
// there is an admin password, and client names and library attributes
// are capped at maxClientAttr bytes.

// maxClientAttr bounds a client name, lib-name and lib-ver: CLIENT LIST
// shows them for every connection.
const maxClientAttr = 256

// adminOnly are the commands that, with an admin password set, only the
// admin user may run besides the administrative ones (cmd_admin.go): they
// show or end every client's connection.
var adminOnly = []string{"client|list", "client|kill"}

// initSecurity sets up the refusal log and puts the adminOnly commands
// the table has behind adminOK.
func (s *Server) initSecurity() {
	s.failLog = ratelog.New(s.log, slog.LevelWarn, "authentication failed", ratelog.Options{Now: s.now})
	if s.opts.CreatePolicy == "admin" && s.opts.AdminPassword != "" {
		// A request made with the server's context rather than a
		// connection's is no admin's: it creates no tag.
		s.ctx = segment.WithCreator(s.ctx, noCreator{})
	}
	for _, name := range adminOnly {
		cmd := s.cmds[name]
		if container, sub, ok := strings.Cut(name, "|"); ok && s.cmds[container] != nil {
			cmd = s.cmds[container].subs[sub]
		}
		if cmd == nil {
			continue
		}
		fn, try := cmd.fn, cmd.try
		cmd.fn = func(s *Server, c *client, conn *resp.Conn, args [][]byte) {
			if s.adminOK(c, conn, name) {
				fn(s, c, conn, args)
			}
		}
		if try != nil {
			// A refusal writes its reply where the command may block.
			cmd.try = func(s *Server, c *client, conn *resp.Conn, args [][]byte) bool {
				return (s.opts.AdminPassword == "" || c.admin) && try(s, c, conn, args)
			}
		}
	}
}

// authFailed counts and logs a refused password (never the password), and
// closes the connection, once its reply is written, at the
// Options.MaxAuthFailures-th.
func (s *Server) authFailed(c *client, conn *resp.Conn) {
	s.authFailures.Add(1)
	c.authFailures++
	s.failLog.Log("id", c.id, "addr", c.addr, "failures", c.authFailures)
	if m := s.opts.MaxAuthFailures; m > 0 && c.authFailures >= m {
		s.authCutoffs.Add(1)
		s.log.Warn("closing a connection after too many refused passwords", "id", c.id, "addr", c.addr,
			"failures", c.authFailures, "max_auth_failures", m)
		conn.Quit()
	}
}

// noCreator refuses every creation (the server's own context under
// segment.auto_create admin).
type noCreator struct{}

func (noCreator) MayCreate(string) error {
	return errors.New("only the admin user's requests create tags (segment.auto_create: admin)")
}

// MayCreate is the connection's segment.Creator: the admin user's when
// Options.CreatePolicy is "admin", at most Options.CreateRate a second.
func (c *client) MayCreate(name string) error {
	s := c.s
	if s.opts.CreatePolicy == "admin" && !c.admin && s.opts.AdminPassword != "" {
		return errors.New("only the admin user creates tags (segment.auto_create: admin): AUTH admin <password>, or LEAF.CREATE")
	}
	r := s.opts.CreateRate
	if r <= 0 {
		return nil
	}
	// MayCreate runs inside the connection's command: one at a time.
	if c.creates == nil {
		c.creates = rate.NewLimiter(rate.Limit(r), max(1, int(r)))
	}
	if !c.creates.AllowN(s.now(), 1) {
		return fmt.Errorf("this connection created %g tags a second already (segment.create_rate)", r)
	}
	return nil
}

// certLogin logs a TLS connection in as the user its verified client
// certificate names (common name default or admin), once, after the
// handshake, before its first command.
func (c *client) certLogin(conn *resp.Conn) {
	c.certPending = false
	st, ok := conn.TLSState()
	if !ok || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return
	}
	switch cn := st.PeerCertificates[0].Subject.CommonName; cn {
	case adminUser:
		c.setUser(conn, true)
	case defaultUser:
		c.setUser(conn, false)
	default:
		return
	}
	c.s.log.Debug("client logged in by certificate", "id", c.id, "addr", c.addr, "user", certUser(st))
}

// certUser is the common name of a verified client certificate.
func certUser(st tls.ConnectionState) string { return st.PeerCertificates[0].Subject.CommonName }

// infoSecurity writes the security counts of INFO's Leaf section.
func (s *Server) infoSecurity(line func(k string, v any)) {
	cs := s.alloc.CreateStats()
	line("tags_created", cs.Created)
	line("tag_creates_refused", cs.Refused)
	line("tag_creates_refused_max_tags", cs.Full)
	line("auth_failure_disconnects", s.authCutoffs.Load())
	line("auth_timeouts", s.rs.Stats().AuthTimeouts)
}
