package resp

import "time"

// The authentication timeout (Options.AuthTimeout): a connection that has
// not authenticated within it is closed, on an event loop by the sweep that
// also closes idle connections, on a goroutine by its read deadline.

// sweepPlan is the period of a loop's sweep for an idle timeout and an
// authentication timeout (either 0: none), and each in sweeps; period 0
// when there is neither.
func sweepPlan(idle, auth time.Duration) (period time.Duration, idleTicks, authTicks int64) {
	shortest := idle
	if shortest <= 0 || (auth > 0 && auth < shortest) {
		shortest = auth
	}
	if shortest <= 0 {
		return 0, 0, 0
	}
	period = min(max(shortest/4, time.Millisecond), time.Second) // as sweepEvery
	ticks := func(d time.Duration) int64 {
		if d <= 0 {
			return 0
		}
		return int64((d+period-1)/period) + 1
	}
	return period, ticks(idle), ticks(auth)
}

// readDeadline is the read deadline of a goroutine's connection: the idle
// timeout's from now, or the end of its time to authenticate if sooner;
// zero when neither applies.
func (c *Conn) readDeadline(idle time.Duration) time.Time {
	var d time.Time
	if idle > 0 {
		d = time.Now().Add(idle)
	}
	if a := c.srv.opts.AuthTimeout; a > 0 && c.rd.unauth {
		if end := c.born.Add(a); d.IsZero() || end.Before(d) {
			d = end
		}
	}
	return d
}

// authExpired reports whether c is unauthenticated past its time.
func (c *Conn) authExpired(now time.Time) bool {
	a := c.srv.opts.AuthTimeout
	return a > 0 && c.rd.unauth && !now.Before(c.born.Add(a))
}

// authTimedOut counts and logs a connection closed for not authenticating.
func (s *Server) authTimedOut(c *Conn) {
	s.authTimeouts.Add(1)
	s.log.Debug("closing a client that did not authenticate in time", "addr", c.addr, "auth_timeout", s.opts.AuthTimeout)
}
