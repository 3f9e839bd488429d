package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaf-id/leaf/internal/ratelog"
)

// The HTTP side under the Redis port's rules (README, "Security"): with a
// password set, every endpoint but /healthz and /readyz asks for it, as
// HTTP Basic with the Redis user names (default, or admin with the admin
// password), as "Authorization: Bearer <password>", or as a client
// certificate whose common name is default or admin (mutual TLS). Before
// that, the Host header is checked against Options.AllowedHosts (DNS
// rebinding), the method against the endpoint (GET and HEAD where nothing
// changes), and a browser's cross-site request to the API is refused
// (CSRF: a page elsewhere cannot spend IDs with the credentials a browser
// remembers). Every refusal of a password is counted, logged at warn with
// the peer's address (rate-limited), and closes the connection, so each
// guess costs a new one.

// The users, as the Redis port names them.
const (
	userDefault = "default"
	userAdmin   = "admin"
)

// userKey is the context key of the request's user ("default", "admin").
type userKey struct{}

// userOf is the user a request authenticated as.
func userOf(r *http.Request) string {
	u, _ := r.Context().Value(userKey{}).(string)
	return u
}

// guard is the handler's security state.
type guard struct {
	pass, admin [sha256.Size]byte // digests of the passwords
	hasPass     bool
	hasAdmin    bool
	hosts       []string
	metricsOpen bool
	failures    atomic.Int64
	failLog     *ratelog.Logger
	crossOrigin *http.CrossOriginProtection
	renders     chan struct{} // a slot per page or scrape in progress (limit)
	profiles    chan struct{} // a slot for the one profile or trace at a time
	slotWait    time.Duration // slotWait; tests shorten it
}

func newGuard(opts Options, log *slog.Logger) *guard {
	g := &guard{
		hosts:       opts.AllowedHosts,
		metricsOpen: opts.MetricsOpen,
		failLog:     ratelog.New(log, slog.LevelWarn, "http authentication failed", ratelog.Options{Now: opts.Now}),
		crossOrigin: http.NewCrossOriginProtection(),
		renders:     make(chan struct{}, opts.MaxRenders),
		profiles:    make(chan struct{}, 1),
		slotWait:    slotWait,
	}
	if opts.Password != "" {
		g.pass, g.hasPass = sha256.Sum256([]byte(opts.Password)), true
	}
	if opts.AdminPassword != "" {
		g.admin, g.hasAdmin = sha256.Sum256([]byte(opts.AdminPassword)), true
	}
	return g
}

// AuthFailures is the number of requests refused for a missing or wrong
// password since start.
func (h *handler) AuthFailures() int64 { return h.g.failures.Load() }

// ServeHTTP checks the Host, the method, the credentials and (for the API)
// the request's origin, then serves the endpoint.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	health := path == "/healthz" || path == "/readyz"
	if !health && !h.g.hostOK(r.Host) {
		// 421: the request reached a server that does not serve that name.
		writeText(w, http.StatusMisdirectedRequest, "this server does not answer for host "+strconv.Quote(r.Host)+" (http.allowed_hosts)\n")
		return
	}
	if allowed := methodsOf(path); !allowed[r.Method] {
		w.Header().Set("Allow", allowHeader(allowed))
		writeText(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed here\n")
		return
	}
	if !health && !(path == "/metrics" && h.g.metricsOpen) {
		user, ok := h.g.authenticate(r)
		if !ok {
			h.refuse(w, r)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
	}
	if isAPI(path) && !sameOrigin(r) {
		writeText(w, http.StatusForbidden, "cross-site requests to the API are refused\n")
		return
	}
	if isAPI(path) {
		if err := h.g.crossOrigin.Check(r); err != nil {
			writeText(w, http.StatusForbidden, "cross-origin requests to the API are refused\n")
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// refuse answers 401 and closes the connection after it.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request) {
	h.g.failures.Add(1)
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	h.g.failLog.Log("addr", r.RemoteAddr, "host", host, "path", r.URL.Path)
	w.Header().Set("WWW-Authenticate", `Basic realm="leaf", charset="UTF-8"`)
	w.Header().Set("Connection", "close")
	writeText(w, http.StatusUnauthorized, "authentication required: HTTP Basic with user default or admin, or Authorization: Bearer <password>\n")
}

// authenticate returns the request's user, or false when the request must
// be refused. Without a password, a request that shows no credentials is
// the default user; credentials shown are checked all the same.
func (g *guard) authenticate(r *http.Request) (string, bool) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		// Mutual TLS: the CA server.tls_client_ca signed this certificate.
		if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn == userDefault || cn == userAdmin {
			return cn, true
		}
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return userDefault, !g.hasPass
	}
	if user, pass, ok := r.BasicAuth(); ok {
		return g.check(user, pass)
	}
	if token, ok := cutPrefixFold(auth, "Bearer "); ok {
		if g.hasAdmin && g.match(&g.admin, token) {
			return userAdmin, true
		}
		if g.hasPass && g.match(&g.pass, token) {
			return userDefault, true
		}
		return "", false
	}
	return "", false
}

// check compares a user's credentials, as AUTH user password does on the
// Redis port.
func (g *guard) check(user, pass string) (string, bool) {
	switch user {
	case userAdmin:
		return userAdmin, g.hasAdmin && g.match(&g.admin, pass)
	case userDefault:
		return userDefault, !g.hasPass || g.match(&g.pass, pass)
	}
	return "", false
}

// match compares pass with a password's digest in constant time (the
// digests hide the length too).
func (g *guard) match(want *[sha256.Size]byte, pass string) bool {
	got := sha256.Sum256([]byte(pass))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// hostOK reports whether the Host header is one of the allowed hosts: a
// host without a port in the list matches any port.
func (g *guard) hostOK(hostport string) bool {
	if len(g.hosts) == 0 {
		return true
	}
	hostport = strings.ToLower(hostport)
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	for _, a := range g.hosts {
		a = strings.ToLower(a)
		if a == hostport || a == host || strings.Trim(a, "[]") == host {
			return true
		}
	}
	return false
}

// isAPI reports whether path is Leaf's API, which hands out IDs.
func isAPI(path string) bool { return strings.HasPrefix(path, "/api/") }

// sameOrigin refuses a browser's request made from another site: browsers
// send Sec-Fetch-Site on every request, programs do not.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// Methods per endpoint: GET and HEAD where nothing changes; Leaf's API
// takes GET and POST, as Leaf's callers use (not HEAD: it would spend an
// ID to answer nothing); pprof's symbol lookup takes POST from go tool
// pprof.
var (
	readMethods   = map[string]bool{http.MethodGet: true, http.MethodHead: true}
	apiMethods    = map[string]bool{http.MethodGet: true, http.MethodPost: true}
	symbolMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true}
)

func methodsOf(path string) map[string]bool {
	switch {
	case isAPI(path):
		return apiMethods
	case path == "/debug/pprof/symbol":
		return symbolMethods
	}
	return readMethods
}

// allowHeader is the Allow header of a 405.
func allowHeader(m map[string]bool) string {
	var out []string
	for _, name := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		if m[name] {
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}

// cutPrefixFold is strings.CutPrefix, the prefix matched without case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// slotWait is how long a page or a scrape waits for a render slot before
// it answers 503.
const slotWait = 2 * time.Second

// limit serves next only with one of slots, waiting up to slotWait for
// one, else answers 503: what pages and scrapes hold is bounded by the
// slots, whatever the number of clients. A handler that renders into a
// buffer gives its slot back before it writes (releaseSlot), so a client
// that reads slowly does not hold one.
func (g *guard) limit(slots chan struct{}, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(g.slotWait)
		defer t.Stop()
		select {
		case slots <- struct{}{}:
		case <-t.C:
			busy(w)
			return
		case <-r.Context().Done():
			return
		}
		var once sync.Once
		release := func() { once.Do(func() { <-slots }) }
		defer release()
		next(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, release)))
	}
}

// slotKey is the context key of a request's render slot's release.
type slotKey struct{}

// releaseSlot gives the request's render slot back, once it holds what it
// will write.
func releaseSlot(r *http.Request) {
	if release, ok := r.Context().Value(slotKey{}).(func()); ok {
		release()
	}
}

// busy answers 503: every render slot stayed taken.
func busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeText(w, http.StatusServiceUnavailable, "busy: too many pages being rendered at once; try again\n")
}
