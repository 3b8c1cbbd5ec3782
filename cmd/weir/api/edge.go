package api

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/weir-payouts/weir/aggregate"
)

// The edges: what one client, and all clients together, may hold of the
// process. A flood of idle connections once took every file descriptor and
// broke the embedded store's writes; the bounds here keep descriptors,
// goroutines and memory for the work itself.

// HTTP server timeouts and caps (NewHTTPServer).
const (
	// HTTPReadHeaderTimeout bounds reading a request's headers.
	HTTPReadHeaderTimeout = 5 * time.Second
	// HTTPReadTimeout bounds reading a whole request, body included (a
	// body trickled a byte at a time is cut off here).
	HTTPReadTimeout = 15 * time.Second
	// HTTPWriteTimeout bounds a request from the end of its headers to the
	// end of the reply: a command's own bound plus a margin to write.
	HTTPWriteTimeout = DefaultCommandTimeout + 10*time.Second
	// HTTPIdleTimeout closes a keep-alive connection idle this long.
	HTTPIdleTimeout = 30 * time.Second
	// HTTPMaxHeaderBytes bounds a request's headers.
	HTTPMaxHeaderBytes = 16 << 10
)

// Defaults of the edge limits (weir serve flags).
const (
	DefaultMaxConns        = 1024 // HTTP connections open at once, all clients
	DefaultMaxConnsPerAddr = 128  // HTTP connections open at once from one IP address
	DefaultMaxInFlight     = 256  // HTTP requests handled at once
	DefaultRateLimit       = 100  // requests per second per principal (burst 2×)
)

// NewHTTPServer is an http.Server for h with every timeout and header cap
// set; serve it on a LimitListener.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: HTTPReadHeaderTimeout,
		ReadTimeout:       HTTPReadTimeout,
		WriteTimeout:      HTTPWriteTimeout,
		IdleTimeout:       HTTPIdleTimeout,
		MaxHeaderBytes:    HTTPMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// retryAfter is a refusal the caller may retry after a delay (429
// rate_limited, 503 when every request slot is busy); both transports send
// the delay as Retry-After in whole seconds.
type retryAfter struct {
	err   *aggregate.Error
	after time.Duration
}

func (e *retryAfter) Error() string { return e.err.Error() }
func (e *retryAfter) Unwrap() error { return e.err }

// retryAfterSeconds is the Retry-After value of err, "" when it has none.
func retryAfterSeconds(err error) string {
	var ra *retryAfter
	if !errors.As(err, &ra) {
		return ""
	}
	return strconv.Itoa(max(1, int(math.Ceil(ra.after.Seconds()))))
}

// RateLimiter holds one token bucket per principal: perSecond requests a
// second, bursts of twice that. One RateLimiter shared by the HTTP API and
// the NATS service gives a principal one budget across both.
type RateLimiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// NewRateLimiter allows perSecond requests a second per principal (burst
// 2×); perSecond <= 0 allows everything. now is the clock (nil: time.Now).
func NewRateLimiter(perSecond float64, now func() time.Time) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	if perSecond <= 0 {
		return &RateLimiter{limit: rate.Inf, now: now, buckets: map[string]*rate.Limiter{}}
	}
	return &RateLimiter{limit: rate.Limit(perSecond), burst: max(1, int(math.Ceil(2*perSecond))), now: now, buckets: map[string]*rate.Limiter{}}
}

// maxBuckets bounds the buckets kept; beyond it, full (idle) buckets are
// forgotten, which changes nothing for their owners.
const maxBuckets = 10000

// failedAuthKey is the bucket of a client address's failed
// authentications; the NUL keeps it apart from every principal's name.
func failedAuthKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "\x00unauthenticated " + host
}

// allow takes one request from key's bucket (a principal's name), or
// refuses with 429 rate_limited and the time until a request would be
// allowed.
func (r *RateLimiter) allow(key string) error {
	if r == nil || r.limit == rate.Inf {
		return nil
	}
	now := r.now()
	r.mu.Lock()
	b, ok := r.buckets[key]
	if !ok {
		if len(r.buckets) >= maxBuckets {
			for k, old := range r.buckets {
				if old.TokensAt(now) >= float64(r.burst) {
					delete(r.buckets, k)
				}
			}
		}
		b = rate.NewLimiter(r.limit, r.burst)
		r.buckets[key] = b
	}
	r.mu.Unlock()
	if b.AllowN(now, 1) {
		return nil
	}
	wait := time.Duration(float64(time.Second) / float64(r.limit))
	if res := b.ReserveN(now, 1); res.OK() {
		wait = res.DelayFrom(now)
		res.CancelAt(now)
	}
	return &retryAfter{
		err:   apiError(CodeRateLimited, "", fmt.Sprintf("more than %g requests per second; retry after %s", float64(r.limit), wait.Round(time.Millisecond))),
		after: wait,
	}
}

// LimitListener caps the connections ln hands out: at most total at once
// and at most perAddr from one IP address (<= 0: no cap). A connection
// beyond the per-address cap is closed at once. At the total cap the
// oldest idle connection (keep-alive between requests, or accepted and
// silent) is closed to make room — an idle flood cannot starve a client
// with work to do; when none is idle, the new connection is closed. Set
// the server's ConnState to the listener's ConnState so it knows which
// connections are idle.
type LimitListener struct {
	net.Listener
	total, perAddr int
	log            *slog.Logger

	mu     sync.Mutex
	conns  map[*limitedConn]struct{}
	byAddr map[string]int
	// Refused counts connections closed at accept; Evicted idle
	// connections closed to make room.
	refused, evicted int
}

// NewLimitListener wraps ln (see LimitListener).
func NewLimitListener(ln net.Listener, total, perAddr int, log *slog.Logger) *LimitListener {
	return &LimitListener{Listener: ln, total: total, perAddr: perAddr, log: log,
		conns: map[*limitedConn]struct{}{}, byAddr: map[string]int{}}
}

type limitedConn struct {
	net.Conn
	l         *LimitListener
	addr      string
	idle      bool
	idleSince time.Time
	once      sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		if c.l.byAddr[c.addr]--; c.l.byAddr[c.addr] <= 0 {
			delete(c.l.byAddr, c.addr)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// Accept returns the next connection within the caps.
func (l *LimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
		l.mu.Lock()
		if l.perAddr > 0 && l.byAddr[addr] >= l.perAddr {
			l.refused++
			l.mu.Unlock()
			l.log.Debug("HTTP connection refused: per-address cap", "addr", addr, "cap", l.perAddr)
			_ = c.Close()
			continue
		}
		if l.total > 0 && len(l.conns) >= l.total {
			victim := l.oldestIdle()
			if victim == nil {
				l.refused++
				l.mu.Unlock()
				l.log.Debug("HTTP connection refused: connection cap, none idle", "cap", l.total)
				_ = c.Close()
				continue
			}
			victim.idle = false // not chosen twice
			l.evicted++
			l.mu.Unlock()
			_ = victim.Close()
			l.mu.Lock()
		}
		lc := &limitedConn{Conn: c, l: l, addr: addr, idle: true, idleSince: time.Now()}
		l.conns[lc] = struct{}{}
		l.byAddr[addr]++
		l.mu.Unlock()
		return lc, nil
	}
}

func (l *LimitListener) oldestIdle() *limitedConn {
	var oldest *limitedConn
	for c := range l.conns {
		if c.idle && (oldest == nil || c.idleSince.Before(oldest.idleSince)) {
			oldest = c
		}
	}
	return oldest
}

// ConnState is http.Server.ConnState: it tells the listener which
// connections are idle.
func (l *LimitListener) ConnState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	lc.idle = s == http.StateIdle || s == http.StateNew
	lc.idleSince = time.Now()
	l.mu.Unlock()
}

// Collectors are the listener's Prometheus metrics: connections open,
// refused at accept and evicted while idle (register them on
// Metrics.Registry).
func (l *LimitListener) Collectors() []prometheus.Collector {
	stat := func(pick func(ConnStats) int) func() float64 {
		return func() float64 { return float64(pick(l.Stats())) }
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weir_http_connections_open",
			Help: "HTTP connections open now."}, stat(func(s ConnStats) int { return s.Open })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weir_http_connections_idle",
			Help: "HTTP connections open and idle now (between requests, or accepted and silent)."}, stat(func(s ConnStats) int { return s.Idle })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weir_http_connections_refused_total",
			Help: "HTTP connections closed at accept: over the per-address cap, or at the total cap with none idle."}, stat(func(s ConnStats) int { return s.Refused })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weir_http_connections_evicted_total",
			Help: "Idle HTTP connections closed to make room at the total cap."}, stat(func(s ConnStats) int { return s.Evicted })),
	}
}

// ConnStats is what a LimitListener holds and has refused.
type ConnStats struct {
	Open    int // connections open now
	Idle    int // of those, idle now
	Refused int // closed at accept
	Evicted int // idle ones closed to make room
}

// Stats reports the listener's connections.
func (l *LimitListener) Stats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ConnStats{Open: len(l.conns), Refused: l.refused, Evicted: l.evicted}
	for c := range l.conns {
		if c.idle {
			s.Idle++
		}
	}
	return s
}
