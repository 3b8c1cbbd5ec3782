package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// `weir audit` replays the event log and checks that it could only have
// been written by weir's deciders, that money moved only with approvals
// satisfying the policy in force, that every rebuild was proven safe, and
// — when a node is reachable — that the chain agrees. It reads; it never
// appends. What is judged and how is described in audit_checks.go.

func init() {
	register(command{name: "audit", summary: "replay the event log and check every invariant (exit 1 on a violation)", run: runAudit})
}

// Defaults of the audit flags.
const (
	defaultAuditNode   = "http://127.0.0.1:8090"
	defaultSettleGrace = 30 * time.Second
)

// auditOptions configure an audit run on an open store.
type auditOptions struct {
	Node        tron.Node // nil: no chain checks
	NodeURL     string
	NodeTimeout time.Duration
	// SettleGrace is how long after a withdrawal ended its account may lag
	// (held instead of settled/released) before that is a violation.
	SettleGrace time.Duration
	Now         func() time.Time
	Progress    *progress // nil: none
}

func (o *auditOptions) defaults() {
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = 5 * time.Second
	}
	if o.SettleGrace <= 0 {
		o.SettleGrace = defaultSettleGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// auditReport is the outcome of an audit (`--json` prints it).
type auditReport struct {
	OK             bool             `json:"ok"`
	Scope          string           `json:"scope"` // "withdrawal" or "all"
	StreamSequence uint64           `json:"stream_sequence"`
	Withdrawals    int              `json:"withdrawals"`
	Events         int              `json:"events"`
	Accounts       int              `json:"accounts"`
	States         map[string]int   `json:"states"`
	Policy         auditPolicy      `json:"policy"`
	Chain          chainSummary     `json:"chain"`
	Violations     []auditFinding   `json:"violations"`
	Warnings       []auditFinding   `json:"warnings"`
	Notes          []auditFinding   `json:"notes"`
	Withdrawal     *withdrawalAudit `json:"withdrawal,omitempty"` // scope "withdrawal": the timeline
	Elapsed        string           `json:"elapsed"`
}

type auditPolicy struct {
	Version   int       `json:"version"`
	Name      string    `json:"name"`
	ChangedBy string    `json:"changed_by,omitempty"`
	ChangedAt time.Time `json:"changed_at,omitzero"`
	Versions  int       `json:"versions"` // stored versions
}

func (a *auditor) finish(r *auditReport, start time.Time) {
	r.Violations, r.Warnings, r.Notes = []auditFinding{}, []auditFinding{}, []auditFinding{}
	for _, f := range a.findings {
		switch f.Severity {
		case sevViolation:
			r.Violations = append(r.Violations, f)
		case sevWarning:
			r.Warnings = append(r.Warnings, f)
		default:
			r.Notes = append(r.Notes, f)
		}
	}
	r.OK = len(r.Violations) == 0
	cur := a.policies.current()
	r.Policy = auditPolicy{Version: cur.Policy.Version, Name: cur.Policy.Name, ChangedBy: cur.By, ChangedAt: cur.At, Versions: len(a.policies.versions) - 1}
	r.Elapsed = time.Since(start).Round(time.Millisecond).String()
}

// auditAll audits the whole log as of now: one ordered pass over the
// stream (a consistent prefix of it), every withdrawal, every account, the
// cross-checks between them, and the chain.
func auditAll(ctx context.Context, store *eventstore.Store, opts auditOptions) (*auditReport, error) {
	opts.defaults()
	start := time.Now()
	end, err := store.LastSequence(ctx)
	if err != nil {
		return nil, err
	}
	var (
		order      []string
		byW        = map[string][]eventstore.Record{}
		byA        = map[string][]eventstore.Record{}
		policyRecs []eventstore.Record
		foreign    []eventstore.Record
	)
	opts.Progress.start("reading log", int(end))
	cut, err := store.ReadAll(ctx, 1, "", func(r eventstore.Record) error {
		switch r.Key.Type {
		case projections.TypeWithdrawal:
			if _, ok := byW[r.Key.ID]; !ok {
				order = append(order, r.Key.ID)
			}
			byW[r.Key.ID] = append(byW[r.Key.ID], r)
		case projections.TypeAccount:
			byA[r.Key.ID] = append(byA[r.Key.ID], r)
		case projections.TypePolicy:
			if r.Key.ID == projections.PolicyStreamID {
				policyRecs = append(policyRecs, r)
			} else {
				foreign = append(foreign, r)
			}
		default:
			foreign = append(foreign, r)
		}
		opts.Progress.set(int(r.Sequence))
		return nil
	})
	opts.Progress.done()
	if err != nil {
		return nil, fmt.Errorf("reading the event log: %w", err)
	}

	a := &auditor{now: opts.Now(), grace: opts.SettleGrace}
	a.policies = buildPolicyHistory(policyRecs, a.add)
	for _, r := range foreign {
		a.add(auditFinding{Severity: sevWarning, Check: "stream", Version: r.AggregateVersion, Event: r.Type,
			What: fmt.Sprintf("event on subject of %s/%s, which weir does not write", r.Key.Type, r.Key.ID)})
	}
	report := &auditReport{Scope: "all", StreamSequence: cut, States: map[string]int{}}

	accounts := map[string]accountAudit{}
	accountIDs := make([]string, 0, len(byA))
	for id := range byA {
		accountIDs = append(accountIDs, id)
	}
	sort.Strings(accountIDs)
	for _, id := range accountIDs {
		accounts[id] = a.auditAccount(id, byA[id])
		report.Events += len(byA[id])
	}

	// Withdrawals are independent of each other: replay them in parallel
	// (envelope hashing and signature recovery dominate), then merge the
	// findings in log order.
	was := make([]*withdrawalAudit, len(order))
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		done int
	)
	opts.Progress.start("withdrawals", len(order))
	for range max(1, min(runtime.GOMAXPROCS(0), len(order))) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(order) {
					return
				}
				id := order[i]
				wa := a.auditWithdrawal(id, byW[id])
				a.checkReservation(wa, accounts)
				was[i] = wa
				mu.Lock()
				done++
				opts.Progress.set(done)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	opts.Progress.done()
	byID := make(map[string]*withdrawalAudit, len(order))
	for i, wa := range was {
		a.findings = append(a.findings, wa.found...)
		byID[wa.ID] = wa
		report.States[string(wa.State)]++
		report.Events += len(byW[order[i]])
	}
	clear(byW)
	a.checkOrphanReservations(accounts, byID)
	a.checkDuplicateTxIDs(was)
	report.Chain = a.checkChain(ctx, opts.Node, opts.NodeURL, opts.NodeTimeout, was, opts.Progress)
	report.Withdrawals, report.Accounts = len(was), len(accounts)
	report.Events += len(policyRecs) + len(foreign)
	a.finish(report, start)
	return report, nil
}

// auditOne audits one withdrawal: its stream, the policy stream and its
// account, all read as of one stream sequence so they are a consistent
// cut, and its txids against the chain.
func auditOne(ctx context.Context, store *eventstore.Store, id string, opts auditOptions) (*auditReport, error) {
	opts.defaults()
	start := time.Now()
	canon, err := aggregate.ParseOperationID(id)
	if err != nil {
		return nil, fmt.Errorf("%q is not a withdrawal id (an operation id is a UUID)", id)
	}
	cut, err := store.LastSequence(ctx)
	if err != nil {
		return nil, err
	}
	load := func(typ, id string) ([]eventstore.Record, error) {
		recs, _, err := store.Load(ctx, eventstore.Key{Type: typ, ID: id})
		if err != nil {
			return nil, err
		}
		n := sort.Search(len(recs), func(i int) bool { return recs[i].Sequence > cut })
		return recs[:n], nil
	}
	recs, err := load(projections.TypeWithdrawal, canon)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("withdrawal %s not found", canon)
	}
	policyRecs, err := load(projections.TypePolicy, projections.PolicyStreamID)
	if err != nil {
		return nil, err
	}
	a := &auditor{now: opts.Now(), grace: opts.SettleGrace}
	a.policies = buildPolicyHistory(policyRecs, a.add)
	report := &auditReport{Scope: "withdrawal", StreamSequence: cut, States: map[string]int{}, Withdrawals: 1}
	wa := a.auditWithdrawal(canon, recs)
	report.Withdrawal = wa
	report.States[string(wa.State)] = 1
	report.Events = len(recs) + len(policyRecs)

	accounts := map[string]accountAudit{}
	for _, acc := range []string{wa.w.Account, wa.w.Route.Account()} {
		if acc == "" || aggregate.ValidateAccountID(acc) != nil {
			continue
		}
		if _, done := accounts[acc]; done {
			continue
		}
		arecs, err := load(projections.TypeAccount, acc)
		if err != nil {
			return nil, err
		}
		accounts[acc] = a.auditAccount(acc, arecs)
		report.Events += len(arecs)
	}
	report.Accounts = len(accounts)
	a.checkReservation(wa, accounts)
	a.findings = append(a.findings, wa.found...)
	report.Chain = a.checkChain(ctx, opts.Node, opts.NodeURL, opts.NodeTimeout, []*withdrawalAudit{wa}, opts.Progress)
	a.finish(report, start)
	return report, nil
}

// openStoreForAudit adopts the existing event stream without changing it:
// the store is opened with the stream's own storage, replicas and dedup
// window, so eventstore.Open finds nothing to update (it would otherwise
// bring the stream to the settings it is given — on a cluster, Replicas 1
// would shrink an R3 stream). A missing stream is an error, not created.
func openStoreForAudit(ctx context.Context, nc *nats.Conn) (*eventstore.Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	const streamName = "WEIR_EVENTS"
	stream, err := js.Stream(ctx, streamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("no weir event log (stream %s) on this NATS: nothing to audit", streamName)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", streamName, err)
	}
	cfg := stream.CachedInfo().Config
	return eventstore.Open(ctx, nc, eventstore.Config{
		Stream:      streamName,
		Memory:      cfg.Storage == jetstream.MemoryStorage,
		Replicas:    max(cfg.Replicas, 1),
		DedupWindow: cfg.Duplicates,
	}, projections.NewRegistry())
}

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("audit", "audit ID | --all [flags]",
		"Replays the event log and checks it: every transition against the table, every approval\n"+
			"against the policy in force then and now, every envelope (txid = sha256(raw_data), pays\n"+
			"to_address exactly amount_units of USDT), every rebuild's proof of death, the accounts\n"+
			"(available + reserved + settled = credits) and each reservation against its withdrawal;\n"+
			"with a reachable --tron-node, that confirmed txids are on chain with SUCCESS and no\n"+
			"retired txid is. ID prints the withdrawal's timeline; --all checks everything.\n"+
			"Exit 0 when every check holds, 1 naming each violation (withdrawal, event version, what).", stderr)
	natsURL := fs.String("nats-url", defaultNATSURL, "NATS server holding weir's event log")
	fs.String("token", "", "accepted for symmetry with the other commands (the audit reads the log directly)")
	all := fs.Bool("all", false, "audit every withdrawal, every account and the global invariants")
	node := fs.String("tron-node", defaultAuditNode, `java-tron HTTP API for the chain checks ("" skips them; unreachable: skipped with a note)`)
	nodeTimeout := fs.Duration("node-timeout", 5*time.Second, "timeout of each node call")
	grace := fs.Duration("settle-grace", defaultSettleGrace, "how long an ended withdrawal's account may lag before that is a violation")
	timeout := fs.Duration("timeout", defaultClientTimeout, "NATS connect timeout")
	asJSON := fs.Bool("json", false, "print a machine-readable report")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *all == (len(pos) == 1) || len(pos) > 1 {
		fmt.Fprintln(stderr, "weir audit: give one withdrawal ID or --all")
		fmt.Fprintln(stderr)
		fs.Usage()
		return errUsage
	}

	nc, err := nats.Connect(*natsURL, nats.Name("weir-audit"), nats.Timeout(*timeout), nats.MaxReconnects(0))
	if err != nil {
		return fmt.Errorf("cannot connect to NATS at %s: %w", *natsURL, err)
	}
	defer nc.Close()
	store, err := openStoreForAudit(ctx, nc)
	if err != nil {
		return err
	}
	opts := auditOptions{NodeURL: *node, NodeTimeout: *nodeTimeout, SettleGrace: *grace}
	if *node != "" {
		opts.Node = tronhttp.NewHTTPNode(*node, nil)
	}
	if !*asJSON {
		opts.Progress = newProgress(stderr)
	}
	var rep *auditReport
	if *all {
		rep, err = auditAll(ctx, store, opts)
	} else {
		rep, err = auditOne(ctx, store, pos[0], opts)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printAuditReport(stdout, rep)
	}
	if !rep.OK {
		if !*asJSON {
			fmt.Fprintf(stderr, "weir audit: %d violation(s)\n", len(rep.Violations))
		}
		return exitError{1}
	}
	return nil
}

// ---- human output ----

func printAuditReport(out io.Writer, r *auditReport) {
	if wa := r.Withdrawal; wa != nil {
		printTimeline(out, wa)
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "audited %d withdrawal(s), %d account(s), %d event(s) up to stream sequence %d in %s\n",
		r.Withdrawals, r.Accounts, r.Events, r.StreamSequence, r.Elapsed)
	if r.Scope == "all" && len(r.States) > 0 {
		states := make([]string, 0, len(r.States))
		for _, s := range aggregate.States() {
			if n := r.States[string(s)]; n > 0 {
				states = append(states, fmt.Sprintf("%s %d", s, n))
			}
		}
		fmt.Fprintf(out, "states: %s\n", strings.Join(states, ", "))
	}
	if r.Policy.Versions == 0 {
		fmt.Fprintf(out, "policy in force: %q v0 (built-in default; none stored)\n", r.Policy.Name)
	} else {
		fmt.Fprintf(out, "policy in force: %q v%d (set by %s at %s; %d version(s) stored)\n",
			r.Policy.Name, r.Policy.Version, r.Policy.ChangedBy, fmtTime(r.Policy.ChangedAt), r.Policy.Versions)
	}
	if r.Chain.Checked {
		fmt.Fprintf(out, "chain: %d txid(s) checked against %s (solid block %d)\n", r.Chain.TxIDs, r.Chain.Node, r.Chain.SolidBlock)
	} else {
		fmt.Fprintf(out, "chain: %s\n", r.Chain.Note)
	}
	printFindings := func(label string, fs []auditFinding) {
		for _, f := range fs {
			fmt.Fprintf(out, "%s %s [%s]: %s\n", label, f.where(), f.Check, f.What)
		}
	}
	printFindings("VIOLATION", r.Violations)
	printFindings("WARNING", r.Warnings)
	printFindings("NOTE", r.Notes)
	if r.OK {
		fmt.Fprintf(out, "OK: every check holds (%d warning(s))\n", len(r.Warnings))
	} else {
		fmt.Fprintf(out, "FAILED: %d violation(s), %d warning(s)\n", len(r.Violations), len(r.Warnings))
	}
}

func printTimeline(out io.Writer, wa *withdrawalAudit) {
	fmt.Fprintf(out, "withdrawal %s: %s, %s %s (%s units) from account %s to %s, requested by %s\n",
		wa.ID, stateName(wa.State), wa.Amount, wa.Asset, wa.Units, wa.Account, wa.To, wa.By)
	route := "-"
	if !wa.Route.IsZero() {
		route = string(wa.Route.Rail())
		if wa.Route.Account() != "" {
			route += " to account " + wa.Route.Account()
		}
	}
	txid := wa.TxID
	if txid == "" {
		txid = "-"
	}
	fmt.Fprintf(out, "route %s, txid %s, attempt %d", route, txid, wa.Attempt)
	if len(wa.Retired) > 0 {
		fmt.Fprintf(out, ", retired %s", strings.Join(wa.Retired, ", "))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out)
	// Align the table, then print each event's findings under its row.
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tAT\tTYPE\tSTATE\tDETAILS")
	for _, e := range wa.Timeline {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Version, e.At.UTC().Format(time.RFC3339Nano), e.Type, stateName(e.State), e.Details)
	}
	tw.Flush()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	fmt.Fprintln(out, lines[0])
	for i, e := range wa.Timeline {
		fmt.Fprintln(out, lines[i+1])
		for _, f := range e.Findings {
			fmt.Fprintf(out, "    ^ %s [%s]: %s\n", strings.ToUpper(f.Severity), f.Check, f.What)
		}
	}
}
