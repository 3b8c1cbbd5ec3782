package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A tiny bench run produces every figure, positive, with its baseline and
// target where it has one. Nothing here judges speed: the targets are for
// a person reading a full run, not for a test on a shared machine.
func TestBenchReportsEveryFigure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := runMain(ctx, []string{"bench", "--n", "12", "--clients", "4", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("weir bench exited %d\nstderr:\n%s", code, stderr.String())
	}
	var rep benchReport
	dec := json.NewDecoder(strings.NewReader(stdout.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("--json output is not one report: %v\n%s", err, stdout.String())
	}
	if rep.Config.N != 12 || rep.Config.Storage != "file" || rep.Config.Sync != "lazy" || rep.Config.CPUs < 1 {
		t.Errorf("config: %+v", rep.Config)
	}
	withTarget := map[string]bool{
		"intake_requests_per_s": true, "e2e_4w_per_s": true, "e2e_rtt_4w_per_s": true, "audit_replay_events_per_s": true,
		"hot_account_intake_per_s": true, "burst_rtt100_per_s": true, "e2e_always_per_s": true,
	}
	// A ceiling, not a ratio: a target and a verdict, no baseline.
	atMost := map[string]bool{"node_calls_per_withdrawal": true, "node_calls_per_withdrawal_lag": true, "appends_per_withdrawal": true, "cpu_ms_per_withdrawal": true}
	got := map[string]benchMetric{}
	for _, m := range rep.Metrics {
		got[m.Name] = m
		if m.Value <= 0 {
			t.Errorf("%s = %v, want > 0", m.Name, m.Value)
		}
		if atMost[m.Name] {
			if m.Target == nil || m.Pass == nil || *m.Pass != (m.Value <= *m.Target) || m.Ratio != nil {
				t.Errorf("%s: value %v target %v pass %v ratio %v", m.Name, m.Value, m.Target, m.Pass, m.Ratio)
			}
			continue
		}
		if withTarget[m.Name] != (m.Target != nil) {
			t.Errorf("%s: target %v", m.Name, m.Target)
		}
		if m.Target != nil && (m.Baseline == nil || *m.Baseline <= 0 || m.Ratio == nil || *m.Ratio <= 0 || m.Pass == nil) {
			t.Errorf("%s: baseline %v ratio %v pass %v", m.Name, m.Baseline, m.Ratio, m.Pass)
		}
	}
	for _, name := range []string{
		"raw_publish_per_s", "raw_publish_concurrent_per_s", "raw_replay_per_s", "appends_per_request",
		"intake_requests_per_s", "e2e_1w_per_s", "e2e_2w_per_s", "e2e_4w_per_s",
		"e2e_rtt_1w_per_s", "e2e_rtt_2w_per_s", "e2e_rtt_4w_per_s",
		"raw_replay_events_per_s", "audit_replay_events_per_s", "raw_replay_all_events_per_s", "audit_all_events_per_s", "latency_p50_ms", "latency_p99_ms",
		"hot_account_intake_per_s", "burst_rtt0_per_s", "burst_rtt100_per_s", "node_calls_per_withdrawal",
		"appends_per_withdrawal", "cpu_ms_per_withdrawal", "raw_publish_always_concurrent_per_s", "e2e_always_per_s",
		"burst_lag_per_s", "node_calls_per_withdrawal_lag", "e2e_always_log_appends_per_withdrawal",
	} {
		if _, ok := got[name]; !ok {
			t.Errorf("no %s in the report", name)
		}
	}
	// The simulated node's CPU is read from the thread CPU clock (Linux).
	if _, ok := got["sim_node_cpu_ms_per_withdrawal"]; !ok && runtime.GOOS == "linux" {
		t.Error("no sim_node_cpu_ms_per_withdrawal in the report")
	}
	// A request appends its creation, the account's reservation and the
	// withdrawal's funds_reserved: counted on the stream, not assumed.
	if a := got["appends_per_request"].Value; a != 3 {
		t.Errorf("appends per request = %v, want 3", a)
	}
	if got["latency_p99_ms"].Value < got["latency_p50_ms"].Value {
		t.Errorf("p99 %v < p50 %v", got["latency_p99_ms"].Value, got["latency_p50_ms"].Value)
	}
}

func TestBenchTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := runMain(ctx, []string{"bench", "--n", "6", "--clients", "2", "--storage", "memory"}, &stdout, &stderr); code != 0 {
		t.Fatalf("weir bench exited %d\nstderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"METRIC", "RAW BASELINE", "intake over NATS", "end to end to confirmed, 4 worker(s)", "audit replay", "p99", "memory storage"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if code := runMain(ctx, []string{"bench", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "-json") {
		t.Errorf("--help: exit %d\n%s", code, stderr.String())
	}
	if code := runMain(ctx, []string{"bench", "--storage", "tape"}, &stdout, &stderr); code != 2 {
		t.Errorf("--storage tape: exit %d, want 2", code)
	}
}

// --series runs the series named (by series or metric name) and those
// they are compared with, and nothing else; an unknown name is a usage
// error.
func TestBenchSeriesRunsOnlyThoseNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := runMain(ctx, []string{"bench", "--n", "9", "--clients", "3", "--storage", "memory", "--json", "--series", "hot_account_intake_per_s"}, &stdout, &stderr); code != 0 {
		t.Fatalf("weir bench exited %d\nstderr:\n%s", code, stderr.String())
	}
	var rep benchReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range rep.Metrics {
		names = append(names, m.Name)
	}
	want := []string{"raw_publish_per_s", "raw_publish_concurrent_per_s", "raw_replay_per_s",
		"appends_per_request", "intake_requests_per_s", "intake_ratio_concurrent_raw", "hot_account_intake_per_s"}
	if strings.Join(names, " ") != strings.Join(want, " ") || rep.Config.Series != "raw,intake,hot_account" {
		t.Fatalf("--series hot_account_intake_per_s ran %v (series %q), want %v", names, rep.Config.Series, want)
	}
	// --scale K pays K withdrawals and reports what they leave behind: no
	// paid withdrawal is still held by the projector.
	stdout.Reset()
	if code := runMain(ctx, []string{"bench", "--n", "9", "--clients", "3", "--storage", "memory", "--json", "--series", "scale", "--scale", "20"}, &stdout, &stderr); code != 0 {
		t.Fatalf("weir bench --scale exited %d\nstderr:\n%s", code, stderr.String())
	}
	rep = benchReport{}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	scale := map[string]float64{}
	for _, m := range rep.Metrics {
		scale[m.Name] = m.Value
	}
	if len(rep.Metrics) < 6 || scale["scale_paid_per_s"] <= 0 || scale["scale_heap_mb"] <= 0 || scale["scale_load_account_ms"] <= 0 {
		t.Fatalf("--series scale --scale 20: %+v", scale)
	}
	if open, ok := scale["scale_open_withdrawals"]; !ok || open != 0 {
		t.Errorf("%v paid withdrawals still held in memory, want 0", open)
	}
	if code := runMain(ctx, []string{"bench", "--series", "e2e,nonsense"}, &stdout, &stderr); code != 2 {
		t.Errorf("--series nonsense: exit %d, want 2", code)
	}
}
