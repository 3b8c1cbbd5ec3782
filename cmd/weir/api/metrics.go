package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the transports' Prometheus metrics on a private registry
// (never the global one, so tests and several servers in one process do
// not collide). The wiring registers its own collectors (projection lag,
// saga counters, …) on Registry; GET /metrics serves all of it.
type Metrics struct {
	Registry *prometheus.Registry

	requests *prometheus.CounterVec   // transport, route, status
	latency  *prometheus.HistogramVec // transport, command
	inFlight *prometheus.GaugeVec     // transport
}

// NewMetrics creates the transport metrics on a new private registry that
// also carries the Go runtime and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_api_requests_total",
			Help: "API requests answered, by transport (http, nats), route (HTTP pattern or NATS subject) and status (HTTP status; NATS replies carry the same).",
		}, []string{"transport", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_api_command_duration_seconds",
			Help:    "Time to answer an API command or query, by transport and command.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"transport", "command"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_api_requests_in_flight",
			Help: "API requests being handled, by transport.",
		}, []string{"transport"}),
	}
	reg.MustRegister(m.requests, m.latency, m.inFlight)
	return m
}

func (m *Metrics) observe(transport, route, command string, status int, d time.Duration) {
	m.requests.WithLabelValues(transport, route, strconv.Itoa(status)).Inc()
	if command != "" {
		m.latency.WithLabelValues(transport, command).Observe(d.Seconds())
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
