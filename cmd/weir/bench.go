package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

func init() {
	register(command{
		name:    "bench",
		summary: "performance figures next to raw JetStream, measured in the same run",
		run:     runBench,
	})
}

const benchAbout = `weir bench starts the whole engine in this process (as weir serve runs it: embedded
NATS, event store, NATS command service, projections with their checkpoints, ledger
saga) on a temporary store, and measures weir next to the raw JetStream operations it
is built on, in the same run, on the same storage:

  raw       sync publish with Nats-Expected-Last-Subject-Sequence (and Nats-Msg-Id) to
            fresh subjects, 1 publisher and --clients publishers; ordered-consumer replay
  intake    n withdrawal requests over NATS through the micro service
            (weir.cmd.withdrawal.request) from --clients concurrent clients; the appends
            a request makes are counted on the stream. Target: intake ≥ 50% of
            raw publish (1 publisher) ÷ appends per request
  e2e       withdrawals/s from approved to confirmed on the simulated node in instant
            mode, with 1, 2 and 4 broadcast workers, n/3 fresh withdrawals each.
            Target: 4 workers ≥ 2.5× 1 worker
  e2e_rtt   the same with --node-rtt on every node call, 48 withdrawals, each worker
            driving one at a time, a block every 30 ms (TRON's 3 s ÷ 100): whether
            workers scale without a shared bottleneck. Target: 4 workers ≥ 2.5× 1
  audit     every withdrawal stream folded from one ReadAll and checked with
            aggregate.Audit, in events/s. Target: ≥ 50% of a raw ordered replay of the
            same messages
  whole     weir audit --all without a node (every check but the chain, signature
            recovery included) against a raw ordered replay of the whole log; no target
  latency   p50/p99 from the withdrawal.requested event to the first send, n/4
            withdrawals from 4 closed-loop clients (request, then approve), 4 workers
  hot_account  the intake's n requests again, all on one account (its stream grows by
            one reservation per request). Target: ≥ 80% of the intake spread over n
            accounts
  burst     n approved withdrawals drained by one worker, with no node round trip
            and with 100 ms on every node call (a hosted node), TRON's 3 s blocks
            made ten times faster (one every 300 ms), the same for both. Target: 100 ms ≥ 50% of 0 ms;
            node calls per withdrawal ≤ 1.5, appends per withdrawal (approved →
            confirmed, counted on the withdrawal streams) ≤ 4, process CPU per
            withdrawal (weir and the embedded server; the simulated node's own CPU,
            read from the thread CPU clock around each of its calls and blocks, is
            left out and reported beside it) ≤ 1 ms. Workers run with serve's
            defaults (--inflight, --node-concurrency). A third run, n/4 at 100 ms on
            a chain with mainnet's 19-block solidity lag (a block every 100 ms, chain
            time ×30): node calls per withdrawal there ≤ 1.5
  e2e_always  n/3 withdrawals drained by 2 workers on file storage with fsync on
            every write (a second engine unless this run is --sync always), against
            the raw fsync-always concurrent publish rate ÷ every append the drain
            made to the log (the withdrawal's and its account's settlement).
            Target: ≥ 80%
  scale     with --scale K only: K withdrawals paid end to end (100 accounts), then
            the process's resident memory and Go heap (weir and the embedded server
            are one process here), the withdrawals still held by the projector, and
            the time to load a paid withdrawal and a busy account (cold and warm)

--series runs only the series named (series or metric names, comma-separated) and
those they are compared with. Apart from hot_account, each withdrawal is on an
account of its own, credited before timing starts, so no account stream grows with n. The default storage is file with lazy sync: the same
storage for weir and raw, where fsync on every write (--sync always, weir serve's
default) would mostly measure the disk. The CPU column is the share of all CPUs
this process kept busy: near 100% means the machine, not waiting, was the limit.
Targets are ratios within one run; a missed one is marked ✗ and is not an error.
`

// benchConfig is every flag of `weir bench`.
type benchConfig struct {
	N       int
	Storage string
	Sync    string
	Clients int
	JSON    bool
	Keep    string
	Profile string
	NodeRTT time.Duration
	// Scale, when above 0, pays that many withdrawals and reports memory
	// and load latency after them (series "scale", only on request).
	Scale int
	// Series, when not empty, are the only series run (with those whose
	// figures they are compared with).
	Series map[string]bool
}

// benchSeries names each series --series can pick and the metrics it
// reports; --series takes either.
var benchSeries = []struct {
	name    string
	metrics []string
}{
	{"raw", []string{"raw_publish_per_s", "raw_publish_concurrent_per_s", "raw_replay_per_s"}},
	{"intake", []string{"appends_per_request", "intake_requests_per_s", "intake_ratio_concurrent_raw"}},
	{"hot_account", []string{"hot_account_intake_per_s"}},
	{"e2e", []string{"e2e_1w_per_s", "e2e_2w_per_s", "e2e_4w_per_s", "e2e_cpu_ceiling_ratio"}},
	{"e2e_rtt", []string{"e2e_rtt_1w_per_s", "e2e_rtt_2w_per_s", "e2e_rtt_4w_per_s"}},
	{"burst", []string{"burst_rtt0_per_s", "burst_rtt100_per_s", "node_calls_per_withdrawal", "appends_per_withdrawal", "cpu_ms_per_withdrawal"}},
	{"e2e_always", []string{"raw_publish_always_concurrent_per_s", "e2e_always_per_s"}},
	{"latency", []string{"latency_p50_ms", "latency_p99_ms"}},
	{"audit", []string{"raw_replay_events_per_s", "audit_replay_events_per_s"}},
	{"whole_audit", []string{"raw_replay_all_events_per_s", "audit_all_events_per_s"}},
	// Only with --scale K.
	{"scale", []string{"scale_paid_per_s", "scale_rss_mb", "scale_heap_mb", "scale_open_withdrawals",
		"scale_load_withdrawal_ms", "scale_load_account_cold_ms", "scale_load_account_ms", "scale_load_account_stored_ms"}},
}

// parseBenchSeries turns --series into the set of series to run, adding
// those a chosen one is compared with (hot_account with intake, intake
// with raw). Empty means every series.
func parseBenchSeries(list string) (map[string]bool, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	out := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, sr := range benchSeries {
			if name == sr.name || slices.Contains(sr.metrics, name) {
				out[sr.name], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("no series or metric named %q", name)
		}
	}
	if out["hot_account"] {
		out["intake"] = true
	}
	if out["intake"] {
		out["raw"] = true
	}
	return out, nil
}

// runs reports whether series name is to be run.
func (c benchConfig) runs(name string) bool { return c.Series == nil || c.Series[name] }

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg benchConfig
	fs := newFlagSet("bench", "bench [--n N] [--storage file|memory] [--sync lazy|always] [--clients C] [--series NAME[,NAME]] [--json]", stderr)
	fs.IntVar(&cfg.N, "n", 2000, "withdrawal requests timed through the intake; each end-to-end run pays n/3 more, and n/4 more measure latency (the default runs in about 15 s on 2 cores)")
	fs.StringVar(&cfg.Storage, "storage", "file", "JetStream storage for everything measured: file or memory")
	fs.StringVar(&cfg.Sync, "sync", "lazy", "with file storage: lazy (JetStream's default flush) or always (fsync every write, weir serve's default); lazy measures weir, always mostly the disk")
	fs.IntVar(&cfg.Clients, "clients", 16, "concurrent NATS clients for the intake (and publishers for the concurrent raw baseline)")
	fs.BoolVar(&cfg.JSON, "json", false, "print one JSON object instead of the table")
	fs.StringVar(&cfg.Keep, "keep", "", "put the store in `DIR` (absent or empty) and keep it afterwards; default: a temporary directory, removed at the end")
	fs.StringVar(&cfg.Profile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE` (go tool pprof)")
	fs.DurationVar(&cfg.NodeRTT, "node-rtt", 10*time.Millisecond, "round trip added to every node call in the second end-to-end series (a real java-tron is a network call away); 0 skips that series")
	fs.IntVar(&cfg.Scale, "scale", 0, "also pay `K` withdrawals (e.g. 100000) and report memory and load latency after them; long, so off unless asked (0)")
	series := fs.String("series", "", "run only these series (comma-separated series or metric names: "+benchSeriesNames()+"); default all")
	printDefaults := fs.Usage
	fs.Usage = func() {
		fmt.Fprint(stderr, benchAbout+"\n")
		printDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var serr error
	cfg.Series, serr = parseBenchSeries(*series)
	switch {
	case serr != nil:
		fmt.Fprintf(stderr, "bench: --series: %v\n", serr)
		return errUsage
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "bench: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	case cfg.N < 3:
		fmt.Fprintln(stderr, "bench: --n must be at least 3")
		return errUsage
	case cfg.Storage != "file" && cfg.Storage != "memory":
		fmt.Fprintf(stderr, "bench: --storage must be file or memory, not %q\n", cfg.Storage)
		return errUsage
	case cfg.Sync != "lazy" && cfg.Sync != "always":
		fmt.Fprintf(stderr, "bench: --sync must be lazy or always, not %q\n", cfg.Sync)
		return errUsage
	case cfg.Scale < 0:
		fmt.Fprintln(stderr, "bench: --scale must be 0 or more")
		return errUsage
	case cfg.Clients < 1:
		fmt.Fprintln(stderr, "bench: --clients must be at least 1")
		return errUsage
	case cfg.Keep != "" && cfg.Storage == "memory":
		fmt.Fprintln(stderr, "bench: --keep needs --storage file")
		return errUsage
	}
	dir := cfg.Keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "weir-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := demoEmptyDir(dir); err != nil {
		return err
	}
	progress := stderr
	if cfg.JSON {
		progress = io.Discard
	}
	if cfg.Profile != "" {
		f, err := os.Create(cfg.Profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	b, err := startBench(ctx, cfg, dir, progress)
	if err != nil {
		return err
	}
	defer b.close()
	rep, err := b.run()
	if err != nil {
		return err
	}
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.writeTable(stdout)
	return nil
}

func benchSeriesNames() string {
	names := make([]string, len(benchSeries))
	for i, sr := range benchSeries {
		names[i] = sr.name
	}
	return strings.Join(names, ", ")
}

// ---- the report --------------------------------------------------------

// benchReport is the bench's outcome; --json prints it as is.
type benchReport struct {
	Config  benchReportConfig `json:"config"`
	Metrics []benchMetric     `json:"metrics"`
	// Pass is true when every metric with a target meets it.
	Pass bool `json:"pass"`
}

type benchReportConfig struct {
	N               int     `json:"n"`
	Storage         string  `json:"storage"`
	Sync            string  `json:"sync"`
	Clients         int     `json:"clients"`
	CPUs            int     `json:"cpus"`
	GOMAXPROCS      int     `json:"gomaxprocs"`
	Go              string  `json:"go"`
	RawMessages     int     `json:"raw_messages"`
	E2EPerRun       int     `json:"e2e_withdrawals_per_run"`
	BurstPerRun     int     `json:"burst_withdrawals_per_run,omitempty"`
	Series          string  `json:"series,omitempty"`
	LatencySamples  int     `json:"latency_withdrawals"`
	WorkerPollMs    int64   `json:"worker_poll_ms"`
	Node            string  `json:"node"`
	DurationSeconds float64 `json:"duration_seconds"`
	// LoadAverage is the machine's 1-minute load average when the bench
	// started (Linux): above 0 means other processes shared the CPUs.
	LoadAverage *float64 `json:"load_average_1m,omitempty"`
}

// benchMetric is one row: a figure, and for the ones with a target the
// baseline it is compared with.
type benchMetric struct {
	Name     string   `json:"name"`
	Label    string   `json:"label"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit"`
	Baseline *float64 `json:"baseline,omitempty"`
	// BaselineLabel names what Baseline is.
	BaselineLabel string   `json:"baseline_label,omitempty"`
	Ratio         *float64 `json:"ratio,omitempty"`
	Target        *float64 `json:"target,omitempty"`
	Pass          *bool    `json:"pass,omitempty"`
	// CPUBusy is the share of all CPUs this process kept busy while the
	// figure was measured (0..1); near 1 means the machine, not weir, was
	// the limit.
	CPUBusy *float64 `json:"cpu_busy,omitempty"`
}

func (r *benchReport) add(name, label string, value float64, unit string, busy *float64) *benchMetric {
	r.Metrics = append(r.Metrics, benchMetric{Name: name, Label: label, Value: value, Unit: unit, CPUBusy: busy})
	return &r.Metrics[len(r.Metrics)-1]
}

// benchWindow measures one timed section: wall time, and the CPU time the
// process used in it.
type benchWindow struct {
	wall  time.Time
	cpu   time.Duration
	cpuOK bool
}

func benchStart() benchWindow {
	cpu, ok := benchProcessCPU()
	return benchWindow{wall: time.Now(), cpu: cpu, cpuOK: ok}
}

// end returns the elapsed wall time and the share of all CPUs kept busy.
func (w benchWindow) end() (time.Duration, *float64) {
	elapsed := time.Since(w.wall)
	cpu, ok := benchProcessCPU()
	if !ok || !w.cpuOK || elapsed <= 0 {
		return elapsed, nil
	}
	busy := (cpu - w.cpu).Seconds() / (elapsed.Seconds() * float64(runtime.NumCPU()))
	return elapsed, &busy
}

// compare sets the metric's baseline and target (a minimum ratio).
func (m *benchMetric) compare(baseline float64, baselineLabel string, target float64) {
	ratio := 0.0
	if baseline > 0 {
		ratio = m.Value / baseline
	}
	pass := ratio >= target
	m.Baseline, m.BaselineLabel, m.Ratio, m.Target, m.Pass = &baseline, baselineLabel, &ratio, &target, &pass
}

// atMost sets a target the figure must not exceed (no baseline).
func (m *benchMetric) atMost(target float64) {
	pass := m.Value <= target
	m.Target, m.Pass = &target, &pass
}

// against shows the figure next to a baseline, with no target.
func (m *benchMetric) against(baseline float64, baselineLabel string) {
	ratio := 0.0
	if baseline > 0 {
		ratio = m.Value / baseline
	}
	m.Baseline, m.BaselineLabel, m.Ratio = &baseline, baselineLabel, &ratio
}

func (r *benchReport) metric(name string) float64 {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value
		}
	}
	return 0
}

func (r *benchReport) writeTable(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "weir bench — n=%d, %s storage", c.N, c.Storage)
	if c.Storage == "file" {
		fmt.Fprintf(w, " (sync %s)", c.Sync)
	}
	fmt.Fprintf(w, ", %d CPUs, %s, %d clients, simulated node in instant mode, %.1f s", c.CPUs, c.Go, c.Clients, c.DurationSeconds)
	if c.LoadAverage != nil {
		fmt.Fprintf(w, ", load average %.2f at start", *c.LoadAverage)
	}
	fmt.Fprint(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tVALUE\tRAW BASELINE\tRATIO\tTARGET\t\tCPU")
	for _, m := range r.Metrics {
		base, ratio, target, mark := "", "", "", ""
		if m.Baseline != nil {
			base = strings.TrimSpace(benchNum(*m.Baseline)+" "+m.Unit) + " (" + m.BaselineLabel + ")"
		}
		if m.Ratio == nil && m.Target != nil {
			target = "≤ " + benchNum(*m.Target)
		}
		if m.Ratio != nil {
			if m.Name == "e2e_4w_per_s" {
				ratio = fmt.Sprintf("%.2f×", *m.Ratio)
				if m.Target != nil {
					target = fmt.Sprintf("≥ %.1f×", *m.Target)
				}
			} else {
				ratio = fmt.Sprintf("%.0f%%", *m.Ratio*100)
				if m.Target != nil {
					target = fmt.Sprintf("≥ %.0f%%", *m.Target*100)
				}
			}
		}
		if m.Pass != nil {
			mark = "✓"
			if !*m.Pass {
				mark = "✗"
			}
		}
		cpu := ""
		if m.CPUBusy != nil {
			cpu = fmt.Sprintf("%.0f%%", *m.CPUBusy*100)
		}
		value := strings.TrimSpace(benchNum(m.Value) + " " + m.Unit)
		if m.Unit == "×" {
			value = benchNum(m.Value) + "×"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Label, value, base, ratio, target, mark, cpu)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nCPU: the share of all CPUs this process kept busy during the measurement.")
	if r.Pass {
		fmt.Fprintln(w, "Every target met.")
	} else {
		fmt.Fprintln(w, "Some targets missed (✗).")
	}
}

// benchNum prints a figure with a precision that suits its size.
func benchNum(v float64) string {
	switch {
	case v >= 1000:
		s := strconv.FormatInt(int64(math.Round(v)), 10)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		return b.String()
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// ---- the rig -------------------------------------------------------------

// benchRig is the running engine plus the bench's own connections, workers
// and chain driver.
type benchRig struct {
	ctx      context.Context
	cfg      benchConfig
	progress io.Writer
	eng      *engine
	sim      *tron.SimNode
	node     *tron.Observed // the simulated node, paced by roundTrip and nudgeChain
	limited  *tron.Limited  // node, bounded as weir serve bounds it; what workers call
	wake     chan struct{}  // a broadcast happened: make a block
	// rtt is added to every node call (nanoseconds; 0 = none), as the
	// network between weir and a real node would.
	rtt atomic.Int64
	// blockEvery, when above 0, makes a block on that cadence (wall
	// time, nanoseconds) instead of as soon as something was sent.
	blockEvery atomic.Int64
	// nodeCalls counts every call made to the node; byMethod the same
	// per method (for the breakdown in the burst series' label).
	nodeCalls atomic.Int64
	byMethod  sync.Map // tron.NodeMethod → *atomic.Int64
	// simCPU is the CPU the simulated node spent answering calls and
	// making blocks (nanoseconds): a real node is not in weir's process,
	// so the CPU per withdrawal leaves it out. simCalls holds, per OS
	// thread, the thread's CPU clock when a call began (see meterSim).
	simCPU   atomic.Int64
	simCalls sync.Map // thread id → time.Duration
	// metering turns the measure on, for the one drain that reports CPU:
	// a thread locked per node call delays the scheduler enough to show
	// in the latency series (p99 ~20 → 30–50 ms when always on).
	metering atomic.Bool
	dir      string
	// next is the next unused withdrawal index (benchOpID, benchAccount).
	next int
	// inflight is what startWorkers gives each worker to drive at once
	// (0: the default of weir serve).
	inflight int
	// accountOf, when set, is the account withdrawal i is requested on
	// (default benchAccount(i)).
	accountOf func(i int) string
	signer    tron.Signer
	nc        *nats.Conn
	js        jetstream.JetStream
	tokens    map[string]string
	log       *slog.Logger

	connsMu sync.Mutex
	conns   []*nats.Conn

	// chain driver
	stopChain context.CancelFunc
	chainDone chan struct{}
	workersMu sync.Mutex
	workers   []*sagas.Worker

	nextID atomic.Int64
}

// benchPollInterval is how often an idle bench worker looks for work
// without being told, as in weir serve: the projector wakes the workers
// when a withdrawal becomes ready, and the chain driver after every block.
const benchPollInterval = time.Second

func startBench(ctx context.Context, cfg benchConfig, dir string, progress io.Writer) (*benchRig, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := startEngine(ctx, serveConfig{configMaxAge: defaultConfigMaxAge,
		Data: dir, HTTP: "127.0.0.1:0", Replicas: 1, Sync: cfg.Sync, Workers: 0,
		// Instant mode (lag 0): included in the next block, solid at
		// once. The bench makes the blocks; the engine's own block clock
		// is effectively off.
		SimBlockInterval: 24 * time.Hour, SimSolidityLag: 0,
		LogLevel: "warn", memory: cfg.Storage == "memory", simEphemeral: true,
	}, log, io.Discard)
	if err != nil {
		return nil, err
	}
	b := &benchRig{ctx: ctx, cfg: cfg, progress: progress, eng: eng, sim: eng.sim, log: log, tokens: map[string]string{}, dir: dir}
	b.wake = make(chan struct{}, 1)
	b.node = &tron.Observed{Node: eng.sim, Before: b.roundTrip, After: b.nudgeChain}
	// As weir serve bounds its node calls by default (the round trip is
	// inside the bound, as a real call's is).
	b.limited = tron.NewLimited(b.node, 0, defaultNodeConcurrency)
	for _, p := range api.DevPrincipals().All() {
		b.tokens[p.Name] = p.Token
	}
	if b.signer, err = tron.NewKeySigner(devSigningKey[:]); err != nil {
		b.close()
		return nil, err
	}
	if b.nc, err = b.connect("weir-bench"); err != nil {
		b.close()
		return nil, err
	}
	if b.js, err = jetstream.New(b.nc); err != nil {
		b.close()
		return nil, err
	}
	// As weir serve does: a withdrawal made ready wakes the workers.
	eng.projector.OnReady(b.notifyWorkers)
	b.sim.Advance(2)
	chainCtx, cancel := context.WithCancel(ctx)
	b.stopChain, b.chainDone = cancel, make(chan struct{})
	go b.driveChain(chainCtx)
	return b, nil
}

func (b *benchRig) connect(name string) (*nats.Conn, error) {
	nc, err := b.eng.emb.Connect(nats.Name(name))
	if err != nil {
		return nil, err
	}
	b.connsMu.Lock()
	b.conns = append(b.conns, nc)
	b.connsMu.Unlock()
	return nc, nil
}

// release closes a connection made by connect before the rig closes: the
// scale series runs a hundred batches, and connections kept to the end
// would be counted in its memory figure (client buffers on both sides).
func (b *benchRig) release(nc *nats.Conn) {
	nc.Close()
	b.connsMu.Lock()
	b.conns = slices.DeleteFunc(b.conns, func(c *nats.Conn) bool { return c == nc })
	b.connsMu.Unlock()
}

func (b *benchRig) close() {
	if b.stopChain != nil {
		b.stopChain()
		<-b.chainDone
	}
	b.connsMu.Lock()
	for _, nc := range b.conns {
		nc.Close()
	}
	b.connsMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = b.eng.Close(ctx)
}

func (b *benchRig) say(format string, args ...any) {
	fmt.Fprintf(b.progress, "bench: "+format+"\n", args...)
}

// roundTrip waits the configured round trip before a node call, as a
// network call would (tron.Observed's Before hook).
func (b *benchRig) roundTrip(ctx context.Context, m tron.NodeMethod) error {
	b.nodeCalls.Add(1)
	c, _ := b.byMethod.LoadOrStore(m, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
	if d := time.Duration(b.rtt.Load()); d > 0 {
		if err := sleepCtx(ctx, d); err != nil {
			return err
		}
	}
	b.meterSimStart()
	return nil
}

// meterSimStart locks the calling goroutine to its thread and notes the
// thread's CPU clock; meterSimStop, on the same goroutine once the node
// answered, adds what the thread spent meanwhile to simCPU. The simulated
// node answers on the caller's goroutine, so that is its own CPU (its
// signature checks, mostly), exactly: nothing else runs on a locked thread.
// It reports whether it started a measure: only then has meterSimStop
// anything to do.
func (b *benchRig) meterSimStart() bool {
	if !b.metering.Load() {
		return false
	}
	runtime.LockOSThread()
	tid, cpu, ok := benchThreadCPU()
	if !ok {
		runtime.UnlockOSThread()
		return false
	}
	b.simCalls.Store(tid, cpu)
	return true
}

func (b *benchRig) meterSimStop() {
	tid, cpu, ok := benchThreadCPU()
	if !ok {
		return
	}
	// Only a goroutine that meterSimStart locked finds its thread here: a
	// locked thread runs no other goroutine.
	if began, found := b.simCalls.LoadAndDelete(tid); found {
		b.simCPU.Add(int64(cpu - began.(time.Duration)))
		runtime.UnlockOSThread()
	}
}

// nudgeChain tells the chain driver after every broadcast, so the next
// block comes at once (tron.Observed's After hook).
func (b *benchRig) nudgeChain(_ context.Context, m tron.NodeMethod, _ error) {
	b.meterSimStop()
	if m != tron.NodeBroadcast {
		return
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// driveChain makes a block whenever the pool holds something (at once
// after a broadcast, and at least every 2 ms), then tells the workers. In
// instant mode that block includes and solidifies what was sent.
func (b *benchRig) driveChain(ctx context.Context) {
	defer close(b.chainDone)
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		case <-t.C:
		}
		if every := time.Duration(b.blockEvery.Load()); every > 0 {
			// A block on a fixed cadence, as a real chain makes them,
			// whether or not anything was sent.
			if time.Since(last) < every {
				continue
			}
		} else if b.sim.PendingCount() == 0 {
			continue
		}
		last = time.Now()
		// Metered as a node call is: the thread locked around Advance
		// only, so its CPU clock is the simulated chain's own. Unmetered,
		// no clock is read.
		metered := b.meterSimStart()
		b.sim.Advance(1)
		if metered {
			b.meterSimStop()
		}
		b.notifyWorkers()
	}
}

// notifyWorkers wakes the running workers (it never blocks).
func (b *benchRig) notifyWorkers() {
	b.workersMu.Lock()
	defer b.workersMu.Unlock()
	for _, w := range b.workers {
		w.Notify()
	}
}

// ---- NATS clients ----------------------------------------------------------

// clients runs jobs 0..n-1 on `clients` concurrent clients, each on a NATS
// connection of its own (as separate producers would be), and returns the
// first error.
func (b *benchRig) clients(clients, n int, job func(c *api.Client, i int) error) error {
	ncs := make([]*nats.Conn, 0, clients)
	defer func() {
		for _, nc := range ncs {
			b.release(nc)
		}
	}()
	for i := range clients {
		nc, err := b.connect(fmt.Sprintf("weir-bench-client-%d", i))
		if err != nil {
			return err
		}
		ncs = append(ncs, nc)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, nc := range ncs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := job(api.NewClient(nc, ""), i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func benchOpID(i int) string { return fmt.Sprintf("be0c0000-0000-4000-8000-%012d", i) }

func benchAccount(i int) string { return fmt.Sprintf("bench-%06d", i) }

// benchAddress is a fixed external destination (not custodied).
var benchAddress = demoAddress("bench")

func (b *benchRig) request(c *api.Client, i int) error {
	if b.accountOf != nil {
		return b.requestOn(c, i, b.accountOf(i))
	}
	return b.requestOn(c, i, benchAccount(i))
}

// benchBurstBlock is the burst series' block cadence: TRON's 3 s blocks,
// chain time compressed ten times.
const benchBurstBlock = 300 * time.Millisecond

// benchLagBlock is the block cadence of the burst on a chain with
// mainnet's solidity lag: TRON's 3 s blocks compressed thirty times, so
// the 19 blocks a withdrawal waits take 1.9 s of wall time, not 57.
const benchLagBlock = 100 * time.Millisecond

// benchRTTBlock is the round-trip series' block cadence: TRON's 3 s
// blocks, chain time compressed a hundred times.
const benchRTTBlock = 30 * time.Millisecond

// benchHotAccount is the one account of the hot-account series.
const benchHotAccount = "bench-hot"

func (b *benchRig) requestOn(c *api.Client, i int, account string) error {
	_, err := c.As(b.tokens["alice"]).Request(b.ctx, api.WithdrawalRequest{
		OperationID: benchOpID(i), Account: account, ToAddress: benchAddress,
		Amount: "1.25", Asset: aggregate.USDT.Code,
	})
	return err
}

func (b *benchRig) approve(c *api.Client, i int) error {
	r, err := c.As(b.tokens["bob"]).Approve(b.ctx, benchOpID(i))
	if err != nil {
		return fmt.Errorf("approve %s: %w", benchOpID(i), err)
	}
	if r.Value.State != aggregate.StateApproved {
		return fmt.Errorf("approve %s: state %q", benchOpID(i), r.Value.State)
	}
	return nil
}

// ---- workers -------------------------------------------------------------

// startWorkers runs n broadcast workers, each on its own connection and
// store handle (as separate processes would), until the returned stop is
// called.
func (b *benchRig) startWorkers(n int) (stop func() error, err error) {
	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var started []*sagas.Worker
	var ncs []*nats.Conn
	stop = func() error {
		cancel()
		wg.Wait()
		for _, nc := range ncs {
			b.release(nc)
		}
		b.workersMu.Lock()
		b.workers = slices.DeleteFunc(b.workers, func(w *sagas.Worker) bool { return slices.Contains(started, w) })
		b.workersMu.Unlock()
		close(errs)
		return <-errs
	}
	for i := range n {
		id := fmt.Sprintf("bench-%dw-%d", n, i+1)
		nc, err := b.connect("weir-bench-" + id)
		if err != nil {
			_ = stop()
			return nil, err
		}
		ncs = append(ncs, nc)
		store, err := eventstore.Open(b.ctx, nc, b.eng.storeCfg, eventlog.NewRegistry())
		if err != nil {
			_ = stop()
			return nil, err
		}
		w, err := sagas.NewWorker(sagas.WorkerConfig{
			ID: id, Repo: sagas.NewRepo(store), Node: b.limited, Signer: b.signer,
			Custody: devCustody().lookup, Work: b.eng.projector,
			// The chain runs far faster than the wall clock here; the
			// longest window keeps envelopes alive through the run.
			ExpirationWindow: tron.MaxExpiration,
			PollInterval:     benchPollInterval, Logger: b.log, Inflight: b.inflight,
		})
		if err != nil {
			_ = stop()
			return nil, err
		}
		started = append(started, w)
		b.workersMu.Lock()
		b.workers = append(b.workers, w)
		b.workersMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx); err != nil {
				errs <- fmt.Errorf("worker %s: %w", id, err)
			}
		}()
	}
	return stop, nil
}

// waitForEvents follows the log from fromSeq until every id in ids has an
// event of type typ, and returns when the last one was seen.
func (b *benchRig) waitForEvents(ctx context.Context, fromSeq uint64, typ string, ids map[string]bool) (time.Time, error) {
	last, _, err := b.countEvents(ctx, fromSeq, typ, ids)
	return last, err
}

// countEvents is waitForEvents also counting every event of the ids it
// saw on the way (the appends they took from fromSeq on).
func (b *benchRig) countEvents(ctx context.Context, fromSeq uint64, typ string, ids map[string]bool) (time.Time, int, error) {
	seen := map[string]bool{}
	var last time.Time
	events := 0
	errDone := errors.New("done")
	err := b.eng.store.Subscribe(ctx, fromSeq, eventlog.TypeWithdrawal, func(r eventstore.Record) error {
		if ids[r.Key.ID] {
			events++
		}
		if r.Type == typ && ids[r.Key.ID] && !seen[r.Key.ID] {
			seen[r.Key.ID] = true
			if len(seen) == len(ids) {
				last = time.Now()
				return errDone
			}
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return last, events, nil
	}
	return last, events, fmt.Errorf("waiting for %s: %d of %d seen: %w", typ, len(seen), len(ids), err)
}

// ---- the run ---------------------------------------------------------------

func (b *benchRig) run() (*benchReport, error) {
	began := time.Now()
	cfg := b.cfg
	perRun := cfg.N / 3
	latencyN := max(cfg.N/4, 8)
	// A burst of n: at 100 ms a burst ends with ~0.3 s more latency than at
	// 0 ms (the last send's round trip and the solid scan's two), which a
	// smaller one lets dominate: the figure is then a latency, not what
	// the pipeline drains.
	burstN := max(cfg.N, 4)
	lagN := max(cfg.N/4, 4)
	rawN := 3 * cfg.N
	rep := &benchReport{Config: benchReportConfig{
		N: cfg.N, Storage: cfg.Storage, Sync: cfg.Sync, Clients: cfg.Clients,
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
		RawMessages: rawN, E2EPerRun: perRun, LatencySamples: latencyN,
		WorkerPollMs: benchPollInterval.Milliseconds(), Node: "simulated, instant (included and solid in the next block)",
	}}
	if cfg.runs("burst") {
		rep.Config.BurstPerRun = burstN
	}
	if cfg.Series != nil {
		var names []string
		for _, sr := range benchSeries {
			if cfg.Series[sr.name] {
				names = append(names, sr.name)
			}
		}
		rep.Config.Series = strings.Join(names, ",")
	}
	if load, ok := benchLoadAverage(); ok {
		rep.Config.LoadAverage = &load
	}

	// (a) raw JetStream.
	var raw1, rawC float64
	if cfg.runs("raw") {
		b.say("raw publish-with-expectation: %d messages, 1 publisher", rawN)
		var busy *float64
		var err error
		if raw1, busy, err = b.rawPublish("one", rawN, 1); err != nil {
			return nil, err
		}
		rep.add("raw_publish_per_s", "raw publish-with-expectation, 1 publisher", raw1, "msg/s", busy)
		b.say("raw publish-with-expectation: %d messages, %d publishers", rawN, cfg.Clients)
		if rawC, busy, err = b.rawPublish("many", rawN, cfg.Clients); err != nil {
			return nil, err
		}
		rep.add("raw_publish_concurrent_per_s", fmt.Sprintf("raw publish-with-expectation, %d publishers", cfg.Clients), rawC, "msg/s", busy)
		rawReplay, busy, err := b.bestOf(3, func() (float64, *float64, error) {
			_, rate, busy, err := b.rawReplay(benchRawStream, "weirbench.one.*", 0)
			return rate, busy, err
		})
		if err != nil {
			return nil, err
		}
		rep.add("raw_replay_per_s", fmt.Sprintf("raw ordered replay, %d messages", rawN), rawReplay, "msg/s", busy)
	}

	// (b) intake, each withdrawal on an account of its own, so no
	// account stream grows with n.
	var intake float64
	if cfg.runs("intake") {
		lo, err := b.take(cfg.N)
		if err != nil {
			return nil, err
		}
		b.say("intake: %d requests over NATS, %d clients", cfg.N, cfg.Clients)
		before, err := b.settled()
		if err != nil {
			return nil, err
		}
		win := benchStart()
		if err := b.clients(cfg.Clients, cfg.N, func(c *api.Client, i int) error { return b.request(c, lo+i) }); err != nil {
			return nil, err
		}
		elapsed, busy := win.end()
		intake = float64(cfg.N) / elapsed.Seconds()
		after, err := b.eng.store.LastSequence(b.ctx)
		if err != nil {
			return nil, err
		}
		appends := float64(after-before) / float64(cfg.N)
		rep.add("appends_per_request", "appends per request (measured on the stream)", appends, "", nil)
		rep.add("intake_requests_per_s", fmt.Sprintf("intake over NATS, %d clients", cfg.Clients), intake, "req/s", busy).
			compare(raw1/appends, fmt.Sprintf("raw, 1 publisher ÷ %.2f", appends), 0.5)
		rep.add("intake_ratio_concurrent_raw", fmt.Sprintf("intake ÷ (raw, %d publishers ÷ appends)", cfg.Clients), intake/(rawC/appends), "", nil)
	}

	// (b') the same number of requests, all on one account: its stream
	// grows by a reservation per request, which must not slow the next.
	if cfg.runs("hot_account") {
		lo := b.next
		b.next += cfg.N
		if _, _, err := b.eng.intake.Credit(b.ctx, sagas.CreditInput{
			Account: benchHotAccount, CreditID: "bench", Amount: json.RawMessage(strconv.Quote(strconv.Itoa(10 * cfg.N))), By: "olivia",
		}); err != nil {
			return nil, err
		}
		b.say("hot account: %d requests over NATS on one account, %d clients", cfg.N, cfg.Clients)
		if _, err := b.settled(); err != nil {
			return nil, err
		}
		win := benchStart()
		if err := b.clients(cfg.Clients, cfg.N, func(c *api.Client, i int) error {
			return b.requestOn(c, lo+i, benchHotAccount)
		}); err != nil {
			return nil, err
		}
		elapsed, busy := win.end()
		rep.add("hot_account_intake_per_s", fmt.Sprintf("intake over NATS, one account, %d clients", cfg.Clients), float64(cfg.N)/elapsed.Seconds(), "req/s", busy).
			compare(intake, fmt.Sprintf("intake over %d accounts", cfg.N), 0.8)
	}

	// (c) end to end, 1, 2 and 4 workers, each on a fresh batch of n/3
	// (requested and approved before the clock starts). The intake's
	// withdrawals stay requested throughout, so every run sees the same
	// amount of open state in the read models.
	if cfg.runs("e2e") {
		oneBusy := 0.0
		for _, workers := range []int{1, 2, 4} {
			lo, err := b.take(perRun)
			if err != nil {
				return nil, err
			}
			b.say("end to end: %d withdrawals, %d worker(s)", perRun, workers)
			d, err := b.endToEnd(lo, lo+perRun, workers)
			if err != nil {
				return nil, err
			}
			m := rep.add(fmt.Sprintf("e2e_%dw_per_s", workers), fmt.Sprintf("end to end to confirmed, %d worker(s)", workers), d.rate, "withdrawals/s", d.busy)
			if workers == 1 && d.busy != nil && *d.busy > 0 {
				oneBusy = *d.busy
			}
			if workers == 4 {
				m.compare(rep.metric("e2e_1w_per_s"), "1 worker", 2.5)
			}
		}
		if oneBusy > 0 {
			// More workers can only use the CPU one worker left idle.
			rep.add("e2e_cpu_ceiling_ratio", "CPU ceiling of 4w ÷ 1w here (1 ÷ CPU share of 1 worker)", 1/oneBusy, "×", nil)
		}
	}

	// (c') the same with a network round trip on every node call, as
	// against a real java-tron: workers then spend their time waiting,
	// not computing, and show whether they scale without a shared
	// bottleneck (the claim protocol, the store, the read models). Each
	// worker drives one withdrawal at a time here: with its pipeline (the
	// burst series) one worker alone overlaps all the round trips of a
	// batch this size, and more workers would only show that. Blocks come
	// on the chain's own cadence (benchRTTBlock), not after every send: a
	// block per send, at four workers' send rate, had every worker re-read
	// the head and follow the solid blocks several times per withdrawal.
	if rttN := min(perRun, 48); cfg.NodeRTT > 0 && cfg.runs("e2e_rtt") {
		b.rtt.Store(int64(cfg.NodeRTT))
		b.inflight = 1
		b.blockEvery.Store(int64(benchRTTBlock))
		for _, workers := range []int{1, 2, 4} {
			lo, err := b.take(rttN)
			if err != nil {
				return nil, err
			}
			b.say("end to end with a %v node round trip: %d withdrawals, %d worker(s)", cfg.NodeRTT, rttN, workers)
			d, err := b.endToEnd(lo, lo+rttN, workers)
			if err != nil {
				return nil, err
			}
			m := rep.add(fmt.Sprintf("e2e_rtt_%dw_per_s", workers), fmt.Sprintf("end to end, %v node round trip, %d worker(s), one withdrawal at a time each", cfg.NodeRTT, workers), d.rate, "withdrawals/s", d.busy)
			if workers == 4 {
				m.compare(rep.metric("e2e_rtt_1w_per_s"), "1 worker, same round trip", 2.5)
			}
		}
		b.rtt.Store(0)
		b.inflight = 0
		b.blockEvery.Store(0)
	}

	// (f) a burst of approved withdrawals drained by one worker, with no
	// node round trip and with 100 ms (a hosted node), on a chain making
	// its 3 s blocks ten times faster (one every 300 ms of wall time).
	if cfg.runs("burst") {
		var at0 benchDrain
		for _, rtt := range []time.Duration{0, 100 * time.Millisecond} {
			lo, err := b.take(burstN)
			if err != nil {
				return nil, err
			}
			b.say("burst: %d approved withdrawals, 1 worker, %v node round trip", burstN, rtt)
			b.rtt.Store(int64(rtt))
			b.blockEvery.Store(int64(benchBurstBlock))
			b.metering.Store(rtt == 0) // the drain whose CPU is reported
			d, err := b.endToEnd(lo, lo+burstN, 1)
			b.metering.Store(false)
			b.rtt.Store(0)
			b.blockEvery.Store(0)
			if err != nil {
				return nil, err
			}
			if rtt == 0 {
				at0 = d
				rep.add("burst_rtt0_per_s", fmt.Sprintf("burst of %d drained, 1 worker, no node round trip", burstN), d.rate, "withdrawals/s", d.busy)
				continue
			}
			rep.add("burst_rtt100_per_s", fmt.Sprintf("burst of %d drained, 1 worker, 100 ms node round trip", burstN), d.rate, "withdrawals/s", d.busy).
				compare(at0.rate, "the same burst, no round trip", 0.5)
			rep.add("node_calls_per_withdrawal", "node calls per confirmed withdrawal (burst, 100 ms: "+d.calls+")", d.nodeCalls, "", nil).atMost(1.5)
		}
		rep.add("appends_per_withdrawal", "appends per withdrawal, approved → confirmed (burst)", at0.appends, "", nil).atMost(4)
		if at0.cpuMs > 0 {
			rep.add("cpu_ms_per_withdrawal", fmt.Sprintf("process CPU per confirmed withdrawal, the simulated node's own %.2f ms left out (burst, no round trip)", at0.simCPUMs), at0.cpuMs, "ms", nil).atMost(1)
			if at0.simCPUMs > 0 { // where the thread CPU clock can be read
				rep.add("sim_node_cpu_ms_per_withdrawal", "the simulated node's CPU per confirmed withdrawal (signature checks, blocks; a real node is not in weir's process)", at0.simCPUMs, "ms", nil)
			}
		}
		// The same at 100 ms on a chain with mainnet's solidity lag: a
		// withdrawal waits 19 blocks in the pool's and head's view before
		// it is solid, the time in which a worker used to ask by txid
		// whether it was dropped (the head-block scan answers that for
		// every txid in flight with one call per block).
		lo, err := b.take(lagN)
		if err != nil {
			return nil, err
		}
		b.say("burst: %d approved withdrawals, 1 worker, 100 ms node round trip, %d-block solidity lag", lagN, tron.DefaultSolidityLag)
		b.sim.SetSolidityLag(tron.DefaultSolidityLag)
		b.rtt.Store(int64(100 * time.Millisecond))
		b.blockEvery.Store(int64(benchLagBlock))
		d, err := b.endToEnd(lo, lo+lagN, 1)
		b.rtt.Store(0)
		b.blockEvery.Store(0)
		b.sim.SetSolidityLag(0)
		if err != nil {
			return nil, err
		}
		rep.add("burst_lag_per_s", fmt.Sprintf("burst of %d drained, 1 worker, 100 ms node round trip, %d-block solidity lag (mainnet's)", lagN, tron.DefaultSolidityLag), d.rate, "withdrawals/s", d.busy)
		rep.add("node_calls_per_withdrawal_lag", fmt.Sprintf("node calls per confirmed withdrawal, %d-block solidity lag (%s)", tron.DefaultSolidityLag, d.calls), d.nodeCalls, "", nil).atMost(1.5)
	}

	// (g) end to end at --sync always (on a second engine when this run
	// is not already file storage with fsync always), against the raw
	// fsync-always concurrent publish rate ÷ the appends it takes.
	if cfg.runs("e2e_always") {
		if err := b.e2eAlways(rep, perRun); err != nil {
			return nil, err
		}
	}

	// (e) latency under a steady trickle.
	var p50, p99 float64
	if cfg.runs("latency") {
		lo, err := b.take(latencyN)
		if err != nil {
			return nil, err
		}
		b.say("latency: %d withdrawals, 4 clients (request, approve), 4 workers", latencyN)
		if p50, p99, err = b.latency(lo, latencyN); err != nil {
			return nil, err
		}
	}

	// (d) audit replay against a raw replay of the same messages.
	if cfg.runs("audit") {
		b.say("audit replay")
		filter := "weir.evt." + eventlog.TypeWithdrawal + ".*"
		// Workers are still confirming the latency series: the log grows while
		// it is read. Both replays stop at one stream sequence, fixed here, so
		// they read the same messages.
		upto, err := b.eng.store.LastSequence(b.ctx)
		if err != nil {
			return nil, err
		}
		var events int
		rawSame, rawBusy, err := b.bestOf(3, func() (float64, *float64, error) {
			n, rate, busy, err := b.rawReplay(b.eng.store.StreamName(), filter, upto)
			events = n
			return rate, busy, err
		})
		if err != nil {
			return nil, err
		}
		replayed, busy, err := b.bestOf(3, func() (float64, *float64, error) {
			n, rate, busy, err := b.auditReplay(upto)
			if err == nil && n != events {
				err = fmt.Errorf("audit replay read %d events, the raw replay %d", n, events)
			}
			return rate, busy, err
		})
		if err != nil {
			return nil, err
		}
		rep.add("raw_replay_events_per_s", fmt.Sprintf("raw ordered replay, the same %d events", events), rawSame, "msg/s", rawBusy)
		rep.add("audit_replay_events_per_s", fmt.Sprintf("audit replay (ReadAll + Audit), %d events", events), replayed, "events/s", busy).
			compare(rawSame, "raw ordered replay, same messages", 0.5)
	}
	// (e) the whole audit (`weir audit --all` without a node: every check
	// but the chain, signature recovery included) against a raw replay of
	// the whole log. No target: it is bounded by secp256k1 recovery, one per
	// signed envelope, which costs as much as replaying ~20 events.
	if cfg.runs("whole_audit") {
		if err := b.wholeAudit(rep); err != nil {
			return nil, err
		}
	}
	if cfg.Scale > 0 && (cfg.Series == nil || cfg.Series["scale"]) {
		if err := b.scale(rep, cfg.Scale); err != nil {
			return nil, err
		}
	}
	if cfg.runs("latency") {
		rep.add("latency_p50_ms", "request → first send, p50", p50, "ms", nil)
		rep.add("latency_p99_ms", "request → first send, p99", p99, "ms", nil)
	}
	rep.Pass = true
	for _, m := range rep.Metrics {
		if m.Pass != nil && !*m.Pass {
			rep.Pass = false
		}
	}
	rep.Config.DurationSeconds = math.Round(time.Since(began).Seconds()*10) / 10
	return rep, nil
}

// wholeAudit measures `weir audit --all` without a node against a raw
// ordered replay of the whole log.
func (b *benchRig) wholeAudit(rep *benchReport) error {
	b.say("whole audit")
	// The ledger saga settles confirmed withdrawals after the series
	// ended: wait until it is idle, or the log grows under the audit.
	if err := b.ledgerIdle(); err != nil {
		return err
	}
	var all int
	rawAll, rawAllBusy, err := b.bestOf(3, func() (float64, *float64, error) {
		n, rate, busy, err := b.rawReplay(b.eng.store.StreamName(), "weir.evt.>", 0)
		all = n
		return rate, busy, err
	})
	if err != nil {
		return err
	}
	whole, wholeBusy, err := b.bestOf(3, func() (float64, *float64, error) {
		win := benchStart()
		// A ledger saga lagging behind under load is not what is measured.
		r, err := audit.All(b.ctx, b.eng.store, audit.Options{SettleGrace: 24 * time.Hour})
		if err != nil {
			return 0, nil, err
		}
		elapsed, busy := win.end()
		// The audit read the log up to r.StreamSequence; a worker may
		// have appended since the raw replay: count the raw replay's
		// messages up to the same sequence (not timed).
		same, _, _, err := b.rawReplay(b.eng.store.StreamName(), "weir.evt.>", r.StreamSequence)
		if err != nil {
			return 0, nil, err
		}
		if !r.OK || r.Events != same {
			first := ""
			if len(r.Violations) > 0 {
				first = "; the first: " + r.Violations[0].Where() + ": " + r.Violations[0].What
			}
			return 0, nil, fmt.Errorf("audit --all: ok %v, %d events up to sequence %d (raw replay %d), %d violation(s)%s", r.OK, r.Events, r.StreamSequence, same, len(r.Violations), first)
		}
		return float64(r.Events) / elapsed.Seconds(), busy, nil
	})
	if err != nil {
		return err
	}
	rep.add("raw_replay_all_events_per_s", fmt.Sprintf("raw ordered replay, the whole log (%d events)", all), rawAll, "msg/s", rawAllBusy)
	rep.add("audit_all_events_per_s", fmt.Sprintf("weir audit --all without a node, %d events", all), whole, "events/s", wholeBusy).
		against(rawAll, "raw ordered replay, whole log")
	return nil
}

// e2eAlways drains n approved withdrawals with 2 workers on file storage
// with fsync on every write, and compares the rate with what raw JetStream
// allows there: its concurrent publish rate ÷ the appends one withdrawal
// took. This run's engine is used when it already has that storage;
// otherwise a second one is started beside it for the series.
func (b *benchRig) e2eAlways(rep *benchReport, n int) error {
	ab := b
	if b.cfg.Storage != "file" || b.cfg.Sync != "always" {
		acfg := b.cfg
		acfg.Storage, acfg.Sync = "file", "always"
		dir := filepath.Join(b.dir, "always")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		var err error
		if ab, err = startBench(b.ctx, acfg, dir, b.progress); err != nil {
			return fmt.Errorf("engine with --sync always: %w", err)
		}
		defer ab.close()
	}
	rawN := 3 * b.cfg.N
	b.say("raw publish-with-expectation, fsync always: %d messages, %d publishers", rawN, b.cfg.Clients)
	raw, busy, err := ab.rawPublish("always", rawN, b.cfg.Clients)
	if err != nil {
		return err
	}
	rep.add("raw_publish_always_concurrent_per_s", fmt.Sprintf("raw publish-with-expectation, fsync always, %d publishers", b.cfg.Clients), raw, "msg/s", busy)
	lo, err := ab.take(n)
	if err != nil {
		return err
	}
	b.say("end to end, fsync always: %d withdrawals, 2 workers", n)
	d, err := ab.endToEnd(lo, lo+n, 2)
	if err != nil {
		return err
	}
	// Every append the drain made to the log, once the ledger settled the
	// last withdrawal: each takes its fsync on the one stream, the account's
	// settlement (one per withdrawal) as much as the withdrawal's own three
	// (its signature is also the first send's intent: one append).
	if err := ab.ledgerIdle(); err != nil {
		return err
	}
	last, err := ab.eng.store.LastSequence(b.ctx)
	if err != nil {
		return err
	}
	logAppends := float64(last-d.fromSeq) / float64(n)
	rep.add("e2e_always_log_appends_per_withdrawal", fmt.Sprintf("appends to the log per withdrawal in that drain (%.2f to the withdrawal, the rest to its account)", d.appends), logAppends, "", nil)
	rep.add("e2e_always_per_s", "end to end to confirmed, fsync always, 2 workers", d.rate, "withdrawals/s", d.busy).
		compare(raw/logAppends, fmt.Sprintf("raw fsync always, %d publishers ÷ %.2f appends to the log", b.cfg.Clients, logAppends), 0.8)
	return nil
}

// bestOf runs a short measurement n times and keeps the best rate (with
// the CPU share of that run): replays take milliseconds, and one scheduling
// hiccup would otherwise decide the figure.
func (b *benchRig) bestOf(n int, f func() (float64, *float64, error)) (float64, *float64, error) {
	best := 0.0
	var bestBusy *float64
	for range n {
		v, busy, err := f()
		if err != nil {
			return 0, nil, err
		}
		if v > best {
			best, bestBusy = v, busy
		}
	}
	return best, bestBusy, nil
}

const benchRawStream = "WEIR_BENCH_RAW"

// benchRawPayload is about the size and shape of a withdrawal.requested
// event.
var benchRawPayload = []byte(`{"id":"be0c0000-0000-4000-8000-000000000000","account":"bench-000000",` +
	`"to_address":"TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy","amount":"1.250000","asset":"USDT-TRC20",` +
	`"requested_by":"alice","required_approvals":1,"rule":"single","policy_name":"four-eyes above 1000",` +
	`"policy_version":1,"at":"2026-01-01T00:00:00.000000000Z"}`)

// rawPublish publishes n messages, each to a fresh subject with the
// expectation "this subject is empty" (what creating a withdrawal is) and
// a message id, synchronously, from `publishers` goroutines on connections
// of their own; it returns messages per second. The stream has the event
// stream's storage and replicas.
func (b *benchRig) rawPublish(tag string, n, publishers int) (float64, *float64, error) {
	storage := jetstream.FileStorage
	if b.cfg.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	if _, err := b.js.CreateOrUpdateStream(b.ctx, jetstream.StreamConfig{
		Name: benchRawStream, Subjects: []string{"weirbench.>"}, Storage: storage, Replicas: 1,
		Duplicates: 2 * time.Minute, AllowDirect: true,
	}); err != nil {
		return 0, nil, fmt.Errorf("raw stream: %w", err)
	}
	jss := make([]jetstream.JetStream, publishers)
	for i := range jss {
		nc, err := b.connect(fmt.Sprintf("weir-bench-raw-%d", i))
		if err != nil {
			return 0, nil, err
		}
		if jss[i], err = jetstream.New(nc); err != nil {
			return 0, nil, err
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	win := benchStart()
	for _, js := range jss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				subj := "weirbench." + tag + "." + strconv.FormatInt(i, 10)
				if _, err := js.Publish(b.ctx, subj, benchRawPayload,
					jetstream.WithExpectLastSequencePerSubject(0),
					jetstream.WithMsgID(tag+strconv.FormatInt(i, 10))); err != nil {
					errs <- err
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, busy := win.end()
	close(errs)
	if err := <-errs; err != nil {
		return 0, nil, fmt.Errorf("raw publish: %w", err)
	}
	return float64(n) / elapsed.Seconds(), busy, nil
}

// rawReplay reads every message matching filter with an ordered consumer,
// doing nothing with them, and returns how many and how long it took. With
// upto > 0 it stops at that stream sequence (the messages after it are not
// counted).
func (b *benchRig) rawReplay(stream, filter string, upto uint64) (int, float64, *float64, error) {
	win := benchStart()
	cons, err := b.js.OrderedConsumer(b.ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return 0, 0, nil, err
	}
	info := cons.CachedInfo()
	if info == nil {
		return 0, 0, nil, errors.New("raw replay: no consumer info")
	}
	want := int(info.NumPending)
	it, err := cons.Messages()
	if err != nil {
		return 0, 0, nil, err
	}
	defer it.Stop()
	n := 0
	for n < want {
		msg, err := it.Next(jetstream.NextContext(b.ctx))
		if err != nil {
			return n, 0, nil, fmt.Errorf("raw replay: %w", err)
		}
		if upto > 0 {
			meta, err := msg.Metadata()
			if err != nil {
				return n, 0, nil, fmt.Errorf("raw replay: %w", err)
			}
			if meta.Sequence.Stream > upto {
				break
			}
		}
		n++
	}
	elapsed, busy := win.end()
	return n, float64(n) / elapsed.Seconds(), busy, nil
}

// auditReplay folds every withdrawal stream from one pass over the log and
// audits each (every transition legal, every rebuild proven, …), as
// `weir audit --all` does, up to stream sequence upto; it returns the
// events read and the time taken.
func (b *benchRig) auditReplay(upto uint64) (int, float64, *float64, error) {
	win := benchStart()
	streams := map[string][]aggregate.Event{}
	n := 0
	if _, err := b.eng.store.ReadAll(b.ctx, 0, eventlog.TypeWithdrawal, func(r eventstore.Record) error {
		if r.Sequence > upto {
			return nil // appended after the replays' fixed end
		}
		e, err := aggregate.DecodeWithdrawalEvent(r.Type, r.Payload)
		if err != nil {
			return fmt.Errorf("%s v%d: %w", r.Key.ID, r.AggregateVersion, err)
		}
		streams[r.Key.ID] = append(streams[r.Key.ID], e)
		n++
		return nil
	}); err != nil {
		return n, 0, nil, err
	}
	for id, evs := range streams {
		if _, err := aggregate.Audit(evs); err != nil {
			return n, 0, nil, fmt.Errorf("audit %s: %w", id, err)
		}
	}
	elapsed, busy := win.end()
	return n, float64(n) / elapsed.Seconds(), busy, nil
}

// take reserves n fresh withdrawal indexes and credits their accounts
// (not timed), returning the first.
func (b *benchRig) take(n int) (int, error) {
	lo := b.next
	b.next += n
	return lo, b.creditAccounts(lo, b.next)
}

// creditAccounts gives each bench account in [lo, hi) enough for its
// withdrawal.
func (b *benchRig) creditAccounts(lo, hi int) error {
	n := hi - lo
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, _, err := b.eng.intake.Credit(b.ctx, sagas.CreditInput{
					Account: benchAccount(lo + i), CreditID: "bench", Amount: json.RawMessage(`"10"`), By: "olivia", // the dev operator
				}); err != nil {
					errs <- err
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// benchDrain is one timed drain of approved withdrawals by workers.
type benchDrain struct {
	rate float64  // confirmed withdrawals per second
	busy *float64 // share of all CPUs kept busy
	// cpuMs is the process CPU per withdrawal (weir and the embedded
	// server: the simulated node's own CPU, simCPUMs, is taken out), in
	// milliseconds; 0 when it cannot be read.
	cpuMs, simCPUMs float64
	// nodeCalls and appends are per withdrawal: every node call made,
	// every event appended to the withdrawals from approved to confirmed.
	nodeCalls, appends float64
	// calls is nodeCalls by method, e.g. "Broadcast 1.00, SolidHead 0.21".
	calls string
	// fromSeq is the log's last sequence when the drain began.
	fromSeq uint64
}

// methodCounts returns the node calls made so far, by method.
func (b *benchRig) methodCounts() map[tron.NodeMethod]int64 {
	out := map[tron.NodeMethod]int64{}
	b.byMethod.Range(func(k, v any) bool {
		out[k.(tron.NodeMethod)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// methodBreakdown writes calls per withdrawal by method, most first.
func methodBreakdown(calls map[tron.NodeMethod]int64, n float64) string {
	ms := slices.Collect(maps.Keys(calls))
	slices.SortFunc(ms, func(a, b tron.NodeMethod) int { return cmp.Or(cmp.Compare(calls[b], calls[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, m := range ms {
		if calls[m] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(calls[m])/n))
		}
	}
	return strings.Join(parts, ", ")
}

// endToEnd requests and approves withdrawals [lo, hi) (not timed), waits
// until the ready queue shows them, then starts `workers` workers and times
// until every one of them is confirmed.
func (b *benchRig) endToEnd(lo, hi, workers int) (benchDrain, error) {
	if err := b.clients(b.cfg.Clients, hi-lo, func(c *api.Client, i int) error {
		if err := b.request(c, lo+i); err != nil {
			return err
		}
		return b.approve(c, lo+i)
	}); err != nil {
		return benchDrain{}, err
	}
	// The read models, notifications and history entries of the requests
	// and approvals are theirs, not the drain's: handled before its clock
	// starts, so that on a disk they do not take the drain's fsyncs.
	seq, err := b.settled()
	if err != nil {
		return benchDrain{}, err
	}
	ids := map[string]bool{}
	for i := lo; i < hi; i++ {
		ids[benchOpID(i)] = true
	}
	if ready := len(b.eng.projector.Ready(time.Now())); ready != len(ids) {
		return benchDrain{}, fmt.Errorf("%d withdrawals ready, want %d", ready, len(ids))
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
	defer cancel()
	type result struct {
		at      time.Time
		appends int
		err     error
	}
	done := make(chan result, 1)
	go func() {
		at, n, err := b.countEvents(ctx, seq+1, aggregate.EventConfirmed, ids)
		done <- result{at, n, err}
	}()
	calls, methods := b.nodeCalls.Load(), b.methodCounts()
	simCPU := b.simCPU.Load()
	win := benchStart()
	stop, err := b.startWorkers(workers)
	if err != nil {
		return benchDrain{}, err
	}
	r := <-done
	_, busy := win.end()
	cpu, cpuOK := benchProcessCPU()
	simCPU = b.simCPU.Load() - simCPU
	calls = b.nodeCalls.Load() - calls
	perMethod := b.methodCounts()
	for m, c := range methods {
		perMethod[m] -= c
	}
	if err := stop(); err != nil {
		return benchDrain{}, err
	}
	if r.err != nil {
		return benchDrain{}, r.err
	}
	n := float64(len(ids))
	d := benchDrain{
		rate: n / r.at.Sub(win.wall).Seconds(), busy: busy,
		nodeCalls: float64(calls) / n, appends: float64(r.appends) / n,
		calls: methodBreakdown(perMethod, n), fromSeq: seq,
	}
	if cpuOK && win.cpuOK {
		sim := time.Duration(simCPU)
		d.cpuMs = float64((cpu - win.cpu - sim).Microseconds()) / 1000 / n
		d.simCPUMs = float64(sim.Microseconds()) / 1000 / n
	}
	return d, nil
}

// latency runs 4 workers while 4 clients each request and approve
// withdrawals one after another, and measures, per withdrawal, the time
// from its requested event to its first broadcasting event, the intent
// written right before the first send (both stamped by this process's
// clock; the node's acceptance is no longer appended, see sagas).
func (b *benchRig) latency(first, n int) (p50, p99 float64, err error) {
	seq, err := b.eng.store.LastSequence(b.ctx)
	if err != nil {
		return 0, 0, err
	}
	ids := map[string]bool{}
	for i := first; i < first+n; i++ {
		ids[benchOpID(i)] = true
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.waitForEvents(ctx, seq+1, aggregate.EventConfirmed, ids)
		done <- err
	}()
	stop, err := b.startWorkers(4)
	if err != nil {
		return 0, 0, err
	}
	err = b.clients(4, n, func(c *api.Client, i int) error {
		if err := b.request(c, first+i); err != nil {
			return err
		}
		return b.approve(c, first+i)
	})
	if err != nil {
		cancel()
	}
	waitErr := <-done
	if stopErr := stop(); err == nil {
		err = stopErr
	}
	if err == nil {
		err = waitErr
	}
	if err != nil {
		return 0, 0, err
	}
	var lat []time.Duration
	for id := range ids {
		evs, err := b.eng.intake.Events(b.ctx, id)
		if err != nil {
			return 0, 0, err
		}
		var requested, accepted time.Time
		for _, e := range evs {
			switch {
			case e.Type == aggregate.EventRequested:
				requested = e.At
			case e.State == aggregate.StateBroadcasting && accepted.IsZero():
				// The first send's intent: a broadcasting event, or the
				// signature that carries it.
				accepted = e.At
			}
		}
		if requested.IsZero() || accepted.IsZero() {
			return 0, 0, fmt.Errorf("%s: no requested or broadcasting event", id)
		}
		lat = append(lat, accepted.Sub(requested))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(lat)))) - 1
		i = min(max(i, 0), len(lat)-1)
		return float64(lat[i].Microseconds()) / 1000
	}
	return pct(0.50), pct(0.99), nil
}

// ledgerIdle waits until the ledger saga's consumer has nothing pending
// (the last series' confirmations settled on the accounts).
func (b *benchRig) ledgerIdle() error {
	c, err := b.eng.store.EnsureConsumer(b.ctx, sagas.LedgerConsumer, "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	for {
		info, err := c.Info(ctx)
		if err != nil {
			return fmt.Errorf("ledger consumer: %w", err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return nil
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("ledger saga still busy: %w", err)
		}
	}
}

// ---- scale -------------------------------------------------------------------

// benchScaleAccounts is how many accounts the scale series pays from: each
// ends with scale/benchScaleAccounts reservations, all settled.
const benchScaleAccounts = 100

// scale pays n withdrawals end to end in batches (2 workers), then reports
// the process's memory (weir and the embedded server share it here) and
// how long loading a paid withdrawal and a busy account takes from a fresh
// Repo (no snapshot held) and from the engine's (snapshots warm).
func (b *benchRig) scale(rep *benchReport, n int) error {
	const batch = 1000
	per := n/benchScaleAccounts + 1
	for a := range benchScaleAccounts {
		if _, _, err := b.eng.intake.Credit(b.ctx, sagas.CreditInput{
			Account: benchScaleAccount(a), CreditID: "bench", Amount: json.RawMessage(strconv.Quote(strconv.Itoa(2 * per))), By: "olivia",
		}); err != nil {
			return err
		}
	}
	first := b.next
	b.next += n
	b.accountOf = func(i int) string { return benchScaleAccount((i - first) % benchScaleAccounts) }
	defer func() { b.accountOf = nil }()
	win := benchStart()
	for lo := first; lo < first+n; lo += batch {
		hi := min(lo+batch, first+n)
		if _, err := b.endToEnd(lo, hi, 2); err != nil {
			return fmt.Errorf("scale: withdrawals %d-%d: %w", lo-first, hi-first, err)
		}
		b.say("scale: %d of %d paid (%.0f s)", hi-first, n, time.Since(win.wall).Seconds())
	}
	elapsed, busy := win.end()
	rep.add("scale_paid_per_s", fmt.Sprintf("scale: %d withdrawals paid (request, approve, drain in batches of %d)", n, batch), float64(n)/elapsed.Seconds(), "withdrawals/s", busy)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if rss, ok := benchRSS(); ok {
		rep.add("scale_rss_mb", fmt.Sprintf("scale: resident memory after %d paid (weir and the embedded server, one process)", n), float64(rss)/(1<<20), "MiB", nil)
	}
	rep.add("scale_heap_mb", fmt.Sprintf("scale: Go heap in use after GC, after %d paid", n), float64(ms.HeapInuse)/(1<<20), "MiB", nil)
	rep.add("scale_open_withdrawals", "scale: withdrawals the projector still holds in memory (ready, in flight, approvals)", float64(b.openWithdrawals()), "", nil)
	fresh := sagas.NewRepo(b.eng.store)
	timeIt := func(f func() error) (float64, error) {
		t := time.Now()
		err := f()
		return float64(time.Since(t).Microseconds()) / 1000, err
	}
	wid := benchOpID(first + n - 1)
	ms1, err := timeIt(func() error { _, _, err := fresh.Withdrawal(b.ctx, wid); return err })
	if err != nil {
		return err
	}
	rep.add("scale_load_withdrawal_ms", "scale: load one paid withdrawal", ms1, "ms", nil)
	acct := benchScaleAccount(0)
	cold, err := timeIt(func() error { _, _, err := fresh.Account(b.ctx, acct); return err })
	if err != nil {
		return err
	}
	rep.add("scale_load_account_cold_ms", fmt.Sprintf("scale: load an account with %d settled reservations, no snapshot held", n/benchScaleAccounts), cold, "ms", nil)
	warm, err := timeIt(func() error { _, _, err := fresh.Account(b.ctx, acct); return err })
	if err != nil {
		return err
	}
	rep.add("scale_load_account_ms", "scale: the same account again (snapshot held)", warm, "ms", nil)
	if b.eng.snapshots != nil {
		// A restarted or second process: no snapshot in memory, the one
		// stored in KV verified and the events after it folded.
		stored := sagas.NewRepo(b.eng.store)
		stored.UseDurableSnapshots(b.eng.snapshots)
		ms, err := timeIt(func() error { _, _, err := stored.Account(b.ctx, benchScaleAccount(1)); return err })
		if err != nil {
			return err
		}
		rep.add("scale_load_account_stored_ms", fmt.Sprintf("scale: load another such account from its stored snapshot (KV %s, every %d events)", sagas.SnapshotBucket, b.eng.snapshots.Every()), ms, "ms", nil)
	}
	return nil
}

func benchScaleAccount(i int) string { return fmt.Sprintf("bench-scale-%03d", i) }

// openWithdrawals counts what the projector's queues hold.
func (b *benchRig) openWithdrawals() int {
	p := b.eng.projector
	return len(p.Ready(time.Now().Add(24*time.Hour))) + len(p.InFlight(time.Now())) + len(p.PendingApprovals())
}

// settled waits until the projector and the other followers of the log
// have handled all of it, and returns its last sequence: a timed series
// starts there, so the setup's events (the accounts' credits, the last
// series' tail) are not read on its clock.
func (b *benchRig) settled() (uint64, error) {
	seq, err := b.eng.store.LastSequence(b.ctx)
	if err != nil {
		return 0, err
	}
	if err := b.eng.projector.WaitFor(b.ctx, seq); err != nil {
		return 0, err
	}
	return seq, b.eng.followersReach(b.ctx, seq)
}

// followersReach waits until the notification publisher and the history
// index (when the engine runs them) have handled the log up to seq.
func (e *engine) followersReach(ctx context.Context, seq uint64) error {
	if e.publisher != nil {
		if err := e.publisher.WaitFor(ctx, seq); err != nil {
			return fmt.Errorf("notifications up to %d: %w", seq, err)
		}
	}
	if e.historyIndex != nil {
		if err := e.historyIndex.WaitFor(ctx, seq); err != nil {
			return fmt.Errorf("history up to %d: %w", seq, err)
		}
	}
	return nil
}
