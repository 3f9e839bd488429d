package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/leaf-id/leaf/segment"
)

// Tag creation through Leaf's HTTP API: none unless Options.AutoCreate
// (http.auto_create); then only the admin user's requests when
// CreatePolicy is "admin", and at most CreateRate a second from one client
// address, as segment.create_rate bounds a Redis connection.

// maxLimiters bounds the client addresses whose creation rate is tracked;
// past it the table starts again empty.
const maxLimiters = 4096

// creators makes the segment.Creator of each API request.
type creators struct {
	on        bool
	adminOnly bool
	rate      float64
	now       func() time.Time

	mu   sync.Mutex
	byIP map[string]*rate.Limiter
}

func newCreators(opts Options) *creators {
	return &creators{on: opts.AutoCreate, adminOnly: opts.CreatePolicy == "admin", rate: opts.CreateRate,
		now: opts.Now, byIP: map[string]*rate.Limiter{}}
}

// context is the allocator context of an API request.
func (c *creators) context(r *http.Request) context.Context {
	if !c.on {
		return segment.NoCreate(r.Context())
	}
	return segment.WithCreator(r.Context(), creator{c: c, admin: userOf(r) == userAdmin, addr: r.RemoteAddr})
}

// creator is one request's segment.Creator.
type creator struct {
	c     *creators
	admin bool
	addr  string
}

func (k creator) MayCreate(name string) error {
	if k.c.adminOnly && !k.admin {
		return errors.New("only the admin user creates tags (segment.auto_create: admin)")
	}
	if k.c.rate <= 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(k.addr)
	if err != nil {
		host = k.addr
	}
	k.c.mu.Lock()
	lim := k.c.byIP[host]
	if lim == nil {
		if len(k.c.byIP) >= maxLimiters {
			clear(k.c.byIP)
		}
		lim = rate.NewLimiter(rate.Limit(k.c.rate), max(1, int(k.c.rate)))
		k.c.byIP[host] = lim
	}
	ok := lim.AllowN(k.c.now(), 1)
	k.c.mu.Unlock()
	if !ok {
		return fmt.Errorf("more than %g tag creations a second from this client (segment.create_rate)", k.c.rate)
	}
	return nil
}
