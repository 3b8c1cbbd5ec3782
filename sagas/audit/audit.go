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
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/projections"
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

// All audits the whole log as of now: one ordered pass over the stream (a
// consistent prefix of it), every withdrawal, every account, the
// cross-checks between them, and the chain. The error is only for a log
// that could not be read; what is wrong in it is in the report.
func All(ctx context.Context, store *eventstore.Store, opts Options) (*Report, error) {
	opts.defaults()
	start := time.Now()
	end, err := store.LastSequence(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var (
		order      []string
		byW        = map[string][]eventstore.Record{}
		byA        = map[string][]eventstore.Record{}
		policyRecs []eventstore.Record
		foreign    []eventstore.Record
	)
	opts.Progress.Start("reading log", int(end))
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
		opts.Progress.Set(int(r.Sequence))
		return nil
	})
	opts.Progress.Done()
	if err != nil {
		return nil, fmt.Errorf("audit: reading the event log: %w", err)
	}

	a := &auditor{now: opts.Now(), grace: opts.SettleGrace}
	a.policies = buildPolicyHistory(policyRecs, a.add)
	for _, r := range foreign {
		a.add(Finding{Severity: Warning, Check: "stream", Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type,
			What: fmt.Sprintf("event on subject of %s/%s, which weir does not write", r.Key.Type, r.Key.ID)})
	}
	report := &Report{Scope: "all", StreamSequence: cut, States: map[string]int{}}

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
	was := make([]*Replay, len(order))
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		done int
	)
	opts.Progress.Start("withdrawals", len(order))
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
				opts.Progress.Set(done)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	opts.Progress.Done()
	byID := make(map[string]*Replay, len(order))
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

// Withdrawal audits one withdrawal: its stream, the policy stream and its
// accounts, all read as of one stream sequence so they are a consistent
// cut, and its txids against the chain. The report carries its timeline.
func Withdrawal(ctx context.Context, store *eventstore.Store, id string, opts Options) (*Report, error) {
	opts.defaults()
	start := time.Now()
	canon, err := aggregate.ParseOperationID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrNotWithdrawalID, id)
	}
	cut, err := store.LastSequence(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	load := func(typ, id string) ([]eventstore.Record, error) {
		recs, _, err := store.Load(ctx, eventstore.Key{Type: typ, ID: id})
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		n := sort.Search(len(recs), func(i int) bool { return recs[i].Sequence > cut })
		return recs[:n], nil
	}
	recs, err := load(projections.TypeWithdrawal, canon)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, canon)
	}
	policyRecs, err := load(projections.TypePolicy, projections.PolicyStreamID)
	if err != nil {
		return nil, err
	}
	a := &auditor{now: opts.Now(), grace: opts.SettleGrace}
	a.policies = buildPolicyHistory(policyRecs, a.add)
	report := &Report{Scope: "withdrawal", StreamSequence: cut, States: map[string]int{}, Withdrawals: 1}
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
	report.Chain = a.checkChain(ctx, opts.Node, opts.NodeURL, opts.NodeTimeout, []*Replay{wa}, opts.Progress)
	a.finish(report, start)
	return report, nil
}
