package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/tron"
)

// Operator metrics (CONTRACT.md "Metrics (names)"), read from the read
// models at each scrape and from the node calls as they happen.

// opsCollector reports withdrawals by state, the queue depths, the oldest
// in-flight age and the ambiguous withdrawals from the projector.
type opsCollector struct {
	p   *projections.Projector
	now func() time.Time

	withdrawals, queueDepth, oldest, ambiguous *prometheus.Desc
}

func newOpsCollector(p *projections.Projector, now func() time.Time) *opsCollector {
	return &opsCollector{p: p, now: now,
		withdrawals: prometheus.NewDesc("weir_withdrawals",
			"Withdrawals by state: open ones as the read models hold them now, ended ones (confirmed, rejected, failed) counted since the log began.",
			[]string{"state"}, nil),
		queueDepth: prometheus.NewDesc("weir_queue_depth",
			"Withdrawals in each work queue: approvals (waiting for approvers), ready (approved and reserved, waiting for a worker), in_flight (signing … broadcast).",
			[]string{"queue"}, nil),
		oldest: prometheus.NewDesc("weir_inflight_oldest_age_seconds",
			"Age of the oldest in-flight withdrawal's current envelope (0 when none is in flight): alert when it grows past the envelope's expiry.", nil, nil),
		ambiguous: prometheus.NewDesc("weir_ambiguous_withdrawals",
			"In-flight withdrawals whose outcome only a lookup by txid can tell (a send unacknowledged, or no live lease).", nil, nil),
	}
}

func (c *opsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.withdrawals
	ch <- c.queueDepth
	ch <- c.oldest
	ch <- c.ambiguous
}

func (c *opsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.p.Stats()
	for _, s := range aggregate.States() {
		n := float64(st.Open[s])
		if s.IsTerminal() {
			n = float64(st.Ended[s])
		}
		ch <- prometheus.MustNewConstMetric(c.withdrawals, prometheus.GaugeValue, n, string(s))
	}
	now := c.now()
	inFlight := c.p.InFlight(now)
	ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(len(c.p.PendingApprovals())), "approvals")
	ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(len(c.p.Ready(now))), "ready")
	ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(len(inFlight)), "in_flight")
	var oldest time.Duration
	ambiguous := 0
	for _, it := range inFlight {
		age := it.EnvelopeAge
		if it.EnvelopeAt.IsZero() {
			age = it.Age
		}
		oldest = max(oldest, age)
		if it.Ambiguous {
			ambiguous++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds())
	ch <- prometheus.MustNewConstMetric(c.ambiguous, prometheus.GaugeValue, float64(ambiguous))
}

// nodeMetrics counts and times every call weir makes to the TRON node, fed
// by tron.Observed's hooks.
type nodeMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	mu       sync.Mutex
	failures int    // consecutive failed calls
	lastErr  string // the last failure's text
}

func newNodeMetrics() *nodeMetrics {
	return &nodeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_node_requests_total",
			Help: "Calls to the TRON node by call (Broadcast, Lookup, SolidLookup, Head, …) and outcome (ok, error, timeout).",
		}, []string{"call", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_node_request_duration_seconds",
			Help:    "Time a call to the TRON node took, by call.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"call"}),
	}
}

func (m *nodeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.duration}
}

// observe wraps n so that every call is counted and timed.
func (m *nodeMetrics) observe(n tron.Node) *tron.Observed {
	o := tron.NewObserved(n)
	o.Timed = func(_ context.Context, call tron.NodeMethod, err error, took time.Duration) {
		m.requests.WithLabelValues(string(call), nodeOutcome(err)).Inc()
		m.duration.WithLabelValues(string(call)).Observe(took.Seconds())
		m.mu.Lock()
		if err == nil {
			m.failures, m.lastErr = 0, ""
		} else {
			m.failures++
			m.lastErr = string(call) + ": " + err.Error()
		}
		m.mu.Unlock()
	}
	return o
}

// failing says how many calls in a row failed, and the last failure.
func (m *nodeMetrics) failing() (int, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failures, m.lastErr
}

// Thresholds of what /healthz calls degraded.
const (
	degradedNodeFailures  = 3
	degradedProjectionLag = 1000
	degradedInFlightAge   = 10 * time.Minute
)

// degraded lists what works but needs an operator's eye, for /healthz.
func (e *engine) degraded(ctx context.Context) []string {
	var out []string
	if lag, err := e.projector.Lag(ctx); err == nil && lag >= degradedProjectionLag {
		out = append(out, fmt.Sprintf("projections: %d events behind the log", lag))
	}
	ambiguous := 0
	var oldest time.Duration
	for _, it := range e.projector.InFlight(time.Now()) {
		if it.Ambiguous {
			ambiguous++
		}
		oldest = max(oldest, it.Age)
	}
	if ambiguous > 0 {
		out = append(out, fmt.Sprintf("withdrawals: %d in flight are ambiguous (reconciliation by txid due)", ambiguous))
	}
	if oldest >= degradedInFlightAge {
		out = append(out, fmt.Sprintf("withdrawals: the oldest in flight has been in its state for %s", oldest.Round(time.Second)))
	}
	if e.nodeMetrics != nil {
		if n, last := e.nodeMetrics.failing(); n >= degradedNodeFailures {
			out = append(out, fmt.Sprintf("tron node: the last %d calls failed (last: %s)", n, last))
		}
	}
	return out
}

func nodeOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timeout"
	}
	return "error"
}
