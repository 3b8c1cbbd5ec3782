package audit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/tron"
)

// Errors of an audit that could not run on what it was given (a caller's
// mistake, not a finding about the log).
var (
	ErrNotWithdrawalID = errors.New("audit: not a withdrawal id (an operation id is a UUID)")
	ErrNotFound        = errors.New("audit: withdrawal not found")
)

// DefaultSettleGrace is how long after a withdrawal ended its account may
// lag (held instead of settled/released) before that is a violation.
const DefaultSettleGrace = 30 * time.Second

// Options configure an audit.
type Options struct {
	Node        tron.Node // nil: no chain checks
	NodeURL     string    // for the report
	NodeTimeout time.Duration
	// SettleGrace is how long after a withdrawal ended its account may lag
	// before that is a violation (DefaultSettleGrace if zero).
	SettleGrace time.Duration
	Now         func() time.Time
	Progress    Progress // nil: none

	// ExpectGenesis is the id of the chain's block 0 the node must serve
	// (ParseGenesis reads it; "" checks the chain by the blocks the log's
	// envelopes were built on only).
	ExpectGenesis string
	// FromBlock..ToBlock is the chain side's range of solid blocks (All
	// only). 0: from the first block the log names, to the solid head.
	FromBlock, ToBlock int64
	// MaxBlocks bounds the chain side's range (0: no bound): a longer one
	// is not scanned, with a note naming the flags to narrow or raise it.
	MaxBlocks int64
	// HotWallets are addresses whose transfers the chain side lists besides
	// the hot wallets the log names (a wallet retired before the log
	// recorded its configuration).
	HotWallets []string
}

// Progress hears how far a long audit has got (the CLI draws a bar). Calls
// come from one goroutine at a time.
type Progress interface {
	Start(label string, total int)
	Set(done int)
	Add(n int)
	Done()
}

type noProgress struct{}

func (noProgress) Start(string, int) {}
func (noProgress) Set(int)           {}
func (noProgress) Add(int)           {}
func (noProgress) Done()             {}

func (o *Options) defaults() {
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = 5 * time.Second
	}
	if o.SettleGrace <= 0 {
		o.SettleGrace = DefaultSettleGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Progress == nil {
		o.Progress = noProgress{}
	}
}

// auditor accumulates the findings that belong to no one withdrawal.
type auditor struct {
	policies policyHistory
	configs  configHistory
	now      time.Time
	grace    time.Duration
	findings []Finding
}

func (a *auditor) add(f Finding) { a.findings = append(a.findings, f) }

func (a *auditor) finish(r *Report, start time.Time) {
	r.Violations, r.Warnings, r.Notes = []Finding{}, []Finding{}, []Finding{}
	for _, f := range a.findings {
		switch f.Severity {
		case Violation:
			r.Violations = append(r.Violations, f)
		case Warning:
			r.Warnings = append(r.Warnings, f)
		default:
			r.Notes = append(r.Notes, f)
		}
	}
	r.OK = len(r.Violations) == 0
	cur := a.policies.current()
	r.Policy = PolicySummary{Version: cur.Policy.Version, Name: cur.Policy.Name, ChangedBy: cur.By, ChangedAt: cur.At, Versions: len(a.policies.versions) - 1}
	r.Elapsed = time.Since(start).Round(time.Millisecond).String()
}

// newAuditor folds what was in force — the configuration stream, then the
// policy stream judged against it — from one cut of the log.
func newAuditor(c *logCut, opts Options) *auditor {
	a := &auditor{now: opts.Now(), grace: opts.SettleGrace}
	a.configs = buildConfigHistory(c.config, a.add)
	if !a.configs.known() {
		a.add(Finding{Severity: Note, Check: "config", What: "the log records no configuration (written before weir recorded it): approvers, operators, the hot wallet and the daily limit are judged from the events alone, as before"})
	}
	a.policies = buildPolicyHistory(c.policy, a.configs, a.add)
	return a
}

// All audits the whole log as of now: one ordered pass over the stream (a
// consistent prefix of it), every withdrawal, every account, the
// cross-checks between them, and the chain. The error is only for a log
// that could not be read; what is wrong in it is in the report.
func All(ctx context.Context, store *eventstore.Store, opts Options) (*Report, error) {
	opts.defaults()
	start := time.Now()
	c, err := readLog(ctx, store, "", opts.Progress)
	if err != nil {
		return nil, err
	}
	a := newAuditor(c, opts)
	report := &Report{Scope: "all", StreamSequence: c.end, States: map[string]int{}, Events: c.events}
	for _, k := range sortedKeys(c.faults) {
		if k.Type != eventlog.TypeWithdrawal || len(c.byW[k.ID]) == 0 {
			a.findings = append(a.findings, c.faults[k]...)
		}
	}
	for _, r := range c.foreign {
		a.add(Finding{Severity: Warning, Check: "stream", Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type,
			What: fmt.Sprintf("event on subject of %s/%s, which weir does not write", r.Key.Type, r.Key.ID)})
	}

	accounts := map[string]accountAudit{}
	accountIDs := make([]string, 0, len(c.byA))
	for id := range c.byA {
		accountIDs = append(accountIDs, id)
	}
	sort.Strings(accountIDs)
	for _, id := range accountIDs {
		accounts[id] = a.auditAccount(id, c.byA[id])
	}

	// Withdrawals are independent of each other: replay them in parallel
	// (envelope hashing and signature recovery dominate), then merge the
	// findings in log order.
	was := make([]*Replay, len(c.order))
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		done int
	)
	opts.Progress.Start("withdrawals", len(c.order))
	for range max(1, min(runtime.GOMAXPROCS(0), len(c.order))) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(c.order) {
					return
				}
				id := c.order[i]
				wa := a.auditWithdrawal(id, c.byW[id])
				wa.addChecks(c.faultsOf(eventlog.TypeWithdrawal, id))
				a.checkReservation(wa, accounts)
				was[i] = wa
				mu.Lock()
				done++
				opts.Progress.Set(done)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	opts.Progress.Done()
	byID := make(map[string]*Replay, len(c.order))
	for _, wa := range was {
		a.findings = append(a.findings, wa.found...)
		byID[wa.ID] = wa
		report.States[string(wa.State)]++
	}
	a.checkOrphanReservations(accounts, byID, "")
	a.checkDuplicateTxIDs(was)
	var onChain []*Replay
	report.Chain, onChain = a.checkChain(ctx, opts, was)
	if report.Chain.Checked {
		a.reconcile(ctx, opts, report.Chain.SolidBlock, onChain, was, writtenAfter(store, c.end), &report.Chain)
	}
	report.Withdrawals, report.Accounts = len(was), len(accounts)
	a.finish(report, start)
	return report, nil
}

// Withdrawal audits one withdrawal: its stream, the policy stream and the
// accounts it touches, all from one pass over the log (a consistent cut),
// the cross-stream checks that concern it — a txid it wrote ahead that
// another withdrawal wrote too, a reservation for it on another account —
// and its txids against the chain. The report carries its timeline.
func Withdrawal(ctx context.Context, store *eventstore.Store, id string, opts Options) (*Report, error) {
	opts.defaults()
	start := time.Now()
	canon, err := aggregate.ParseOperationID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrNotWithdrawalID, id)
	}
	c, err := readLog(ctx, store, canon, opts.Progress)
	if err != nil {
		return nil, err
	}
	recs := c.byW[canon]
	faults := c.faultsOf(eventlog.TypeWithdrawal, canon)
	if len(recs) == 0 && len(faults) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, canon)
	}
	a := newAuditor(c, opts)
	a.findings = append(a.findings, c.faultsOf(eventlog.TypePolicy, eventlog.PolicyStreamID)...)
	a.findings = append(a.findings, c.faultsOf(eventlog.TypeConfig, eventlog.ConfigStreamID)...)
	report := &Report{Scope: "withdrawal", StreamSequence: c.end, States: map[string]int{}, Withdrawals: 1}
	wa := a.auditWithdrawal(canon, recs)
	wa.addChecks(faults)
	report.Withdrawal = wa
	report.States[string(wa.State)] = 1
	report.Events = len(recs) + len(c.policy) + len(c.config)

	// Its accounts, and every account holding a reservation for it.
	touched := []string{wa.w.Account, wa.w.Route.Account()}
	for _, acc := range sortedAccounts(c.byA) {
		if reservesFor(c.byA[acc], canon) {
			touched = append(touched, acc)
		}
	}
	accounts := map[string]accountAudit{}
	for _, acc := range touched {
		if acc == "" || aggregate.ValidateAccountID(acc) != nil {
			continue
		}
		if _, done := accounts[acc]; done {
			continue
		}
		accounts[acc] = a.auditAccount(acc, c.byA[acc])
		a.findings = append(a.findings, c.faultsOf(eventlog.TypeAccount, acc)...)
		report.Events += len(c.byA[acc])
	}
	report.Accounts = len(accounts)
	a.checkReservation(wa, accounts)
	a.checkOrphanReservations(accounts, map[string]*Replay{canon: wa}, canon)
	a.checkTxIDsAgainst(wa, c.others)
	a.findings = append(a.findings, wa.found...)
	report.Chain, _ = a.checkChain(ctx, opts, []*Replay{wa})
	if report.Chain.Checked {
		report.Chain.ChainSideNote = "the chain side (every hot-wallet transfer matched to the log) runs with --all"
	}
	a.finish(report, start)
	return report, nil
}

// addChecks files findings about the stream as a whole under the replay.
func (wa *Replay) addChecks(fs []Finding) {
	wa.Checks = append(wa.Checks, fs...)
	wa.found = append(wa.found, fs...)
}

// reservesFor reports whether an account stream holds a reservation event
// for withdrawal id.
func reservesFor(recs []eventstore.Record, id string) bool {
	for _, r := range recs {
		if r.Type != aggregate.EventAccountReserved {
			continue
		}
		if e, err := aggregate.DecodeAccountEvent(r.Type, r.Payload); err == nil {
			if ev, ok := e.(aggregate.AccountReserved); ok && ev.WithdrawalID == id {
				return true
			}
		}
	}
	return false
}

func sortedAccounts(m map[string][]eventstore.Record) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func sortedKeys(m map[eventstore.Key][]Finding) []eventstore.Key {
	keys := make([]eventstore.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Type != keys[j].Type {
			return keys[i].Type < keys[j].Type
		}
		return keys[i].ID < keys[j].ID
	})
	return keys
}
