package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-payouts/weir/tron"
)

// Every node call is counted by call and outcome and timed; three failures
// in a row make /healthz say the node is failing, and one success clears it.
func TestNodeCallsAreCountedTimedAndRepeatedFailuresDegradeHealth(t *testing.T) {
	m := newNodeMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.collectors()...)
	sim := tron.NewSimNode(tron.SimConfig{Start: time.Now().UTC(), Instant: true})
	o := m.observe(sim)
	ctx := context.Background()
	if _, err := o.Head(ctx); err != nil {
		t.Fatal(err)
	}
	down := errors.New("connection refused")
	o.Before = func(context.Context, tron.NodeMethod) error { return down }
	for range 3 {
		if _, err := o.SolidHead(ctx); !errors.Is(err, down) {
			t.Fatalf("SolidHead: %v", err)
		}
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			if c := mt.GetCounter(); c != nil {
				got[key] = c.GetValue()
			}
			if h := mt.GetHistogram(); h != nil {
				got[key] = float64(h.GetSampleCount())
			}
		}
	}
	for key, want := range map[string]float64{
		"weir_node_requests_total call=Head outcome=ok":         1,
		"weir_node_requests_total call=SolidHead outcome=error": 3,
		"weir_node_request_duration_seconds call=Head":          1,
		"weir_node_request_duration_seconds call=SolidHead":     3,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v (all: %v)", key, got[key], want, got)
		}
	}
	if n, last := m.failing(); n != 3 || !strings.Contains(last, "connection refused") {
		t.Fatalf("failing = %d %q", n, last)
	}
	o.Before = nil
	if _, err := o.Head(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := m.failing(); n != 0 {
		t.Fatalf("a success did not clear the failures: %d", n)
	}
	if nodeOutcome(context.DeadlineExceeded) != "timeout" {
		t.Fatal("a deadline is not a timeout")
	}
}
