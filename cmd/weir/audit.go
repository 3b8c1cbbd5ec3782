package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// `weir audit` is flags, progress and printing around sagas/audit, which
// holds the judgement. It reads; it never appends.

func init() {
	register(command{name: "audit", summary: "replay the event log and check every invariant (exit 1 on a violation)", run: runAudit})
}

const defaultAuditNode = "http://127.0.0.1:8090"

// defaultMaxChainBlocks bounds the chain side by default: about a week of
// mainnet blocks (3 s each), an hour or so of calls against a hosted node.
const defaultMaxChainBlocks = 200_000

// openStoreForAudit adopts the existing event stream without changing it:
// the store is opened with the stream's own storage, replicas and dedup
// window, so eventstore.Open finds nothing to update (it would otherwise
// bring the stream to the settings it is given — on a cluster, Replicas 1
// would shrink an R3 stream). A missing stream is an error, not created.
//
// With sealer (--event-key), every event's tag is verified: one that does
// not verify is a violation named by its stream sequence.
func openStoreForAudit(ctx context.Context, nc *nats.Conn, sealer eventstore.Sealer) (*eventstore.Store, error) {
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
		Sealer:      sealer,
	}, eventlog.NewRegistry())
}

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := clientFlagSet("audit", "audit ID | --all [flags]",
		"Replays the event log and checks it: every transition against the table, every approval\n"+
			"against the policy in force then and now, every envelope (txid = sha256(raw_data), pays\n"+
			"to_address exactly amount_units of USDT), every rebuild's proof of death, the accounts\n"+
			"(available + reserved + settled = credits) and each reservation against its withdrawal;\n"+
			"with a reachable --tron-node, that confirmed txids are on chain with SUCCESS in the\n"+
			"block recorded, no retired txid is, and every proof of death or failure holds on the\n"+
			"solid blocks it cites. ID prints the withdrawal's timeline; --all checks everything.\n"+
			"The node must serve the chain the log was written on: the blocks the log's envelopes were\n"+
			"built on carry the ids the log recorded, and block 0 is --expect-genesis when given, else the\n"+
			"genesis block the log's configuration records (weir serve records its node's); another\n"+
			"chain is a violation and nothing else is asked of it. With --all, the chain side: every\n"+
			"successful USDT transfer out of a hot wallet (every one the log's configuration named, and\n"+
			"--hot-wallet) in solid blocks --from-block..--to-block (default: the first block the log\n"+
			"names to the solid head) must be a confirmed withdrawal (txid, payee, amount) — otherwise\n"+
			"\"paid outside weir or log lost events\" — and every confirmed withdrawal recorded in the\n"+
			"range must be among them. A node that cannot answer leaves a note (chain unavailable).\n"+
			"An event that cannot be read, a broken back-pointer or a version gap is a violation named\n"+
			"by its stream sequence; the audit goes on with everything else. ID also runs the checks\n"+
			"across streams that concern it (its txids written by no other withdrawal, no reservation\n"+
			"for it on another account).\n"+
			"Exit 0 when every check holds, 1 naming each violation (withdrawal, event version, what),\n"+
			"2 when the audit could not run (cannot connect, not authorised, no such withdrawal); with\n"+
			"--require-chain, 3 (\"chain unavailable\") when no violation was found but a chain check could not run.", stderr)
	o := &clientOpts{}
	fs.StringVar(&o.natsURL, "nats-url", defaultNATSURL, "NATS server holding weir's event log")
	fs.StringVar(&o.token, "token", "", "token of an auditor (or operator) principal: the NATS login on weir's embedded server")
	o.creds = addNATSCredFlags(fs)
	all := fs.Bool("all", false, "audit every withdrawal, every account and the global invariants")
	node := fs.String("tron-node", defaultAuditNode, `java-tron HTTP API for the chain checks ("" skips them; unreachable: skipped with a note)`)
	solidityNode := fs.String("tron-solidity-node", "", "endpoint serving /walletsolidity/* (default: the --tron-node URL)")
	apiKey := fs.String("tron-api-key", "", "API key sent to the node as TRON-PRO-API-KEY (TronGrid); never printed")
	nodeTimeout := fs.Duration("node-timeout", 5*time.Second, "timeout of each node call")
	expectGenesis := fs.String("expect-genesis", "", `id of the chain's block 0 the node must serve (64 hex digits, or "mainnet"); overrides the genesis the log's configuration records; "": that one, and the blocks the log's envelopes were built on`)
	fromBlock := fs.Int64("from-block", 0, "chain side (--all): first solid block to scan (0: the first block the log names)")
	toBlock := fs.Int64("to-block", 0, "chain side (--all): last solid block to scan (0: the node's solid head)")
	requireChain := fs.Bool("require-chain", false, `exit 3 ("chain unavailable") when a chain check could not run — no node, an unreachable one, unanswered lookups, a chain side that did not read its whole range — instead of 0 with a note`)
	maxBlocks := fs.Int64("max-chain-blocks", defaultMaxChainBlocks, "chain side: the most blocks it reads (one call each); a longer range is not scanned, with a note (0: no bound)")
	nodeRPS := fs.Float64("node-rps", 0, "node calls started per second (0: no limit; a hosted endpoint such as TronGrid wants one)")
	hotWallets := fs.String("hot-wallet", "", "chain side: more hot-wallet addresses to list transfers of, comma-separated (the log's configuration names the others)")
	grace := fs.Duration("settle-grace", audit.DefaultSettleGrace, "how long an ended withdrawal's account may lag before that is a violation")
	fs.DurationVar(&o.timeout, "timeout", defaultClientTimeout, "NATS connect timeout")
	asJSON := fs.Bool("json", false, "print a machine-readable report")
	eventKeyFile := fs.String("event-key", "", "the serve --event-key file: verify every event's tag (without it, tags are not checked)")
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

	opts := audit.Options{NodeURL: *node, NodeTimeout: *nodeTimeout, SettleGrace: *grace, FromBlock: *fromBlock, ToBlock: *toBlock, MaxBlocks: *maxBlocks}
	if *expectGenesis != "" {
		if opts.ExpectGenesis, err = audit.ParseGenesis(*expectGenesis); err != nil {
			fmt.Fprintf(stderr, "weir audit: --expect-genesis: %v\n", err)
			return errUsage
		}
	}
	if *requireChain && *node == "" {
		fmt.Fprintln(stderr, `weir audit: --require-chain needs a --tron-node (--tron-node "" skips the chain)`)
		return errUsage
	}
	if *maxBlocks < 0 || *nodeRPS < 0 {
		fmt.Fprintln(stderr, "weir audit: --max-chain-blocks and --node-rps cannot be negative")
		return errUsage
	}
	if *fromBlock < 0 || *toBlock < 0 || (*toBlock > 0 && *fromBlock > *toBlock) {
		fmt.Fprintf(stderr, "weir audit: --from-block %d --to-block %d is not a block range\n", *fromBlock, *toBlock)
		return errUsage
	}
	for w := range strings.SplitSeq(*hotWallets, ",") {
		if w = strings.TrimSpace(w); w == "" {
			continue
		}
		if _, err := tron.ParseAddress(w); err != nil {
			fmt.Fprintf(stderr, "weir audit: --hot-wallet %q: %v\n", w, err)
			return errUsage
		}
		opts.HotWallets = append(opts.HotWallets, w)
	}

	// A permission the server refuses surfaces as an asynchronous error,
	// and the request it refused would only time out: end the run at once
	// with the refusal as the cause.
	ctx, refused := context.WithCancelCause(ctx)
	defer refused(nil)
	// Exit 2, not 1: "could not run" must never read as "violation found".
	couldNotRun := func(err error) error {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		fmt.Fprintf(stderr, "weir audit: could not run: %v\n", err)
		return exitError{2}
	}
	// Its own inbox prefix: the events it reads must not pass through
	// _INBOX.>, which every principal may subscribe.
	nc, err := o.connect("weir-audit", nats.CustomInboxPrefix(natsauth.AuditInboxPrefix),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				refused(fmt.Errorf("not authorised to read the event log (an auditor's or an operator's --token reads it): %w", err))
			}
		}))
	if err != nil {
		return couldNotRun(err)
	}
	defer nc.Close()
	var sealer eventstore.Sealer
	if *eventKeyFile != "" {
		kr, err := loadEventKey(*eventKeyFile)
		if err != nil {
			return couldNotRun(err)
		}
		sealer = kr
	} else if !*asJSON {
		fmt.Fprintln(stdout, "note: no --event-key: event tags are not verified (a forged event is found only when it breaks another rule)")
	}
	store, err := openStoreForAudit(ctx, nc, sealer)
	if err != nil {
		return couldNotRun(err)
	}
	if *node != "" {
		var n tron.Node = tronhttp.New(tronhttp.Config{URL: *node, SolidityURL: *solidityNode, APIKey: *apiKey})
		if *nodeRPS > 0 {
			n = tron.NewLimited(n, *nodeRPS, 0)
		}
		opts.Node = n
	}
	if !*asJSON {
		opts.Progress = newProgress(stderr)
	}
	var rep *audit.Report
	if *all {
		rep, err = audit.All(ctx, store, opts)
	} else {
		rep, err = audit.Withdrawal(ctx, store, pos[0], opts)
	}
	if err != nil {
		return couldNotRun(err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return couldNotRun(err)
		}
	} else {
		printAuditReport(stdout, rep)
	}
	if !rep.OK {
		if rep.Chain.Identity == "mismatch" {
			fmt.Fprintf(stderr, "weir audit: not the expected chain: %s\n", rep.Chain.Note)
		}
		if !*asJSON {
			fmt.Fprintf(stderr, "weir audit: %d violation(s)\n", len(rep.Violations))
		}
		return exitError{1}
	}
	if gaps := rep.ChainGaps(); *requireChain && len(gaps) > 0 {
		fmt.Fprintf(stderr, "weir audit: chain unavailable: %s\n", strings.Join(gaps, "; "))
		return exitError{3}
	}
	return nil
}

// ---- human output ----

func printAuditReport(out io.Writer, r *audit.Report) {
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
	printChainSide(out, r.Chain)
	printFindings := func(label string, fs []audit.Finding) {
		for _, f := range fs {
			fmt.Fprintf(out, "%s %s [%s]: %s\n", label, f.Where(), f.Check, f.What)
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

// printChainSide says which chain the node serves and what the chain side
// found.
func printChainSide(out io.Writer, c audit.ChainSummary) {
	if c.Genesis != "" || c.Identity != "" {
		words := map[string]string{
			"genesis":     "block 0 is the expected genesis",
			"log genesis": "block 0 is the genesis the log's configuration records",
			"log blocks":  "the blocks the log's envelopes were built on match",
			"unchecked":   "unchecked: the log names no chain or block on it and no --expect-genesis was given",
			"mismatch":    "ANOTHER CHAIN",
			"unknown":     "unknown: the node did not tell its genesis",
		}
		var parts []string
		for _, p := range strings.Split(c.Identity, "+") {
			parts = append(parts, cmp.Or(words[p], p))
		}
		how := strings.Join(parts, " and ")
		fmt.Fprintf(out, "chain identity: genesis %s: %s\n", cmp.Or(c.Genesis, "-"), cmp.Or(how, c.Identity))
	}
	if !c.Checked {
		return
	}
	if c.FromBlock == 0 && c.ToBlock == 0 {
		fmt.Fprintf(out, "chain side: %s\n", c.ChainSideNote)
		return
	}
	fmt.Fprintf(out, "chain side: blocks %d..%d (%d read) of hot wallet(s) %s: %d USDT transfer(s), %d matched, %d unmatched, %d in flight; %d confirmed withdrawal(s) not found on chain, %d recorded outside the range\n",
		c.FromBlock, c.ToBlock, c.CheckedBlocks, strings.Join(c.HotWallets, ", "), c.Transfers, c.Matched, len(c.UnmatchedTransfers), c.InFlight,
		len(c.UnmatchedWithdrawals), c.OutsideRange)
	if c.ChainSideNote != "" {
		fmt.Fprintf(out, "chain side: %s\n", c.ChainSideNote)
	}
}

func printTimeline(out io.Writer, wa *audit.Replay) {
	fmt.Fprintf(out, "withdrawal %s: %s, %s %s (%s units) from account %s to %s, requested by %s\n",
		wa.ID, audit.StateName(wa.State), wa.Amount, wa.Asset, wa.Units, wa.Account, wa.To, wa.By)
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
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Version, e.At.UTC().Format(time.RFC3339Nano), e.Type, audit.StateName(e.State), e.Details)
	}
	tw.Flush()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	fmt.Fprintln(out, lines[0])
	for i, e := range wa.Timeline {
		fmt.Fprintln(out, lines[i+1])
		for _, f := range e.Findings {
			fmt.Fprintf(out, "    ^ %s [%s]: %s\n", strings.ToUpper(string(f.Severity)), f.Check, f.What)
		}
	}
}

// progress draws a progress bar on a terminal; on anything else it says
// nothing.
type progress struct {
	w          io.Writer
	on         bool
	label      string
	total, cur int
	last       time.Time
}

// newProgress draws on w only when w is a terminal (a character device).
func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.on = true
		}
	}
	return p
}

func (p *progress) Start(label string, total int) {
	if p == nil {
		return
	}
	p.label, p.total, p.cur, p.last = label, total, 0, time.Time{}
	p.draw(true)
}

func (p *progress) Add(n int) {
	if p != nil {
		p.Set(p.cur + n)
	}
}

func (p *progress) Set(cur int) {
	if p == nil {
		return
	}
	p.cur = cur
	p.draw(false)
}

// done completes the bar and clears the line.
func (p *progress) Done() {
	if p == nil || !p.on {
		return
	}
	p.cur = p.total
	p.draw(true)
	fmt.Fprint(p.w, "\r\033[K")
}

const progressWidth = 30

func (p *progress) draw(force bool) {
	if !p.on {
		return
	}
	now := time.Now()
	if !force && now.Sub(p.last) < 100*time.Millisecond && p.cur < p.total {
		return
	}
	p.last = now
	frac := 1.0
	if p.total > 0 {
		frac = min(1, float64(p.cur)/float64(p.total))
	}
	filled := int(frac * progressWidth)
	fmt.Fprintf(p.w, "\r\033[K%-16s [%s%s] %3.0f%% %d/%d", p.label,
		strings.Repeat("#", filled), strings.Repeat(".", progressWidth-filled), frac*100, p.cur, p.total)
}
