package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// chainItem is one txid to ask the node about, and what the log says of it.
type chainItem struct {
	wa      *Replay
	txid    string
	version uint64
	role    string // confirmed | retired | failed
	block   int64  // confirmed: the block the log records
}

// chainParallelism bounds concurrent lookups against the node.
const chainParallelism = 8

// checkChain asks the node about every txid whose fate the log asserts:
//   - a confirmed external withdrawal's txid is included with SUCCESS, in
//     the block the confirmation records;
//   - no retired txid (replaced by a rebuild with a proof of death) is
//     included; one still pending on the node is a warning;
//   - a failed withdrawal's last txid did not pay (included with SUCCESS
//     would mean the money left although the reservation was released).
//
// An unreachable node is a note and the checks are skipped: the audit of
// the log stands on its own.
//
// Before any of it, the node must serve the chain the log was written
// against (checkIdentity); a node of another chain is a violation and
// nothing is asked of it. It returns the summary and the withdrawals
// whose facts this chain can hold (those requested before its genesis
// are left out, "chain unavailable").
func (a *auditor) checkChain(ctx context.Context, opts Options, was []*Replay) (ChainSummary, []*Replay) {
	node, url, timeout, prog := opts.Node, opts.NodeURL, opts.NodeTimeout, opts.Progress
	sum := ChainSummary{Node: url, UnmatchedTransfers: []ChainTransferRecord{}, UnmatchedWithdrawals: []MissingTransfer{}}
	if node == nil {
		sum.Note = "no node given: chain checks skipped"
		return sum, nil
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	solid, err := node.SolidHead(pctx)
	cancel()
	if err != nil {
		sum.Note = fmt.Sprintf("tron node %s unreachable (%v): chain checks skipped", url, err)
		return sum, nil
	}
	sum.SolidBlock = solid.Number
	was = a.withoutPredating(ctx, node, timeout, was, &sum)
	if !a.checkIdentity(ctx, opts, solid.Number, was, &sum) {
		return sum, nil
	}
	sum.Checked = true

	var items []chainItem
	for _, wa := range was {
		w := wa.w
		if w.State == aggregate.StateConfirmed && !w.Route.IsInternal() && w.Confirmation.TxID != "" {
			items = append(items, chainItem{wa: wa, txid: w.Confirmation.TxID, version: w.Version, role: "confirmed", block: w.Confirmation.BlockNumber})
		}
		for _, r := range wa.txids {
			if r.TxID != w.Envelope.TxID {
				items = append(items, chainItem{wa: wa, txid: r.TxID, version: r.Version, role: "retired"})
			}
		}
		if w.State == aggregate.StateFailed && w.Envelope.TxID != "" {
			items = append(items, chainItem{wa: wa, txid: w.Envelope.TxID, version: w.Version, role: "failed"})
		}
	}
	sum.TxIDs = len(items)
	results := make([]tron.TxStatus, len(items))
	errs := make([]error, len(items))
	prog.Start("chain lookups", len(items))
	var mu sync.Mutex
	parallel(len(items), func(i int) {
		id, err := tron.ParseTxID(items[i].txid)
		if err == nil {
			lctx, cancel := context.WithTimeout(ctx, timeout)
			results[i], err = node.Lookup(lctx, id)
			cancel()
		}
		errs[i] = err
		mu.Lock()
		prog.Add(1)
		mu.Unlock()
	})
	prog.Done()

	for i, it := range items {
		report := func(sev Severity, format string, args ...any) {
			f := Finding{Severity: sev, Check: "chain", Withdrawal: it.wa.ID, Version: it.version, What: fmt.Sprintf(format, args...)}
			it.wa.Checks = append(it.wa.Checks, f)
			a.add(f)
		}
		if errs[i] != nil {
			sum.LookupErrors++
			report(Note, "lookup of txid %s failed: %v", it.txid, errs[i])
			continue
		}
		st := results[i]
		switch it.role {
		case "confirmed":
			switch {
			case st.State != tron.TxIncluded:
				report(Violation, "confirmed txid %s is not on chain (the node says %s)", it.txid, st)
			case st.Receipt != tron.ReceiptSuccess:
				report(Violation, "confirmed txid %s is on chain with receipt %s: it did not pay", it.txid, st.Receipt)
			case it.block > 0 && st.BlockNumber != it.block:
				report(Violation, "confirmed txid %s is in block %d; the confirmation records block %d", it.txid, st.BlockNumber, it.block)
			}
		case "retired":
			switch {
			case st.State == tron.TxIncluded && it.wa.retiredByReceipt(it.txid):
				if st.Succeeded() {
					report(Violation, "retired txid %s paid on chain (%s), yet a rebuild retired it on a failed receipt", it.txid, st)
				}
			case st.State == tron.TxIncluded:
				report(Violation, "retired txid %s is on chain (%s): its proof of death was wrong", it.txid, st)
			case st.State == tron.TxPending:
				report(Warning, "retired txid %s is still in the node's pool", it.txid)
			}
		case "failed":
			if st.Succeeded() {
				report(Violation, "failed, but its txid %s paid on chain (%s)", it.txid, st)
			}
		}
	}
	unchecked := a.checkEvidence(ctx, node, solid.Number, timeout, was, prog)
	switch {
	case sum.LookupErrors > 0 && unchecked > 0:
		sum.Note = fmt.Sprintf("%d of %d lookups failed and %d proof(s) could not be checked (see notes)", sum.LookupErrors, len(items), unchecked)
	case sum.LookupErrors > 0:
		sum.Note = fmt.Sprintf("%d of %d lookups failed (see notes)", sum.LookupErrors, len(items))
	case unchecked > 0:
		sum.Note = fmt.Sprintf("%d proof(s) could not be checked (see notes)", unchecked)
	}
	sum.LookupErrors += unchecked
	if sum.Unavailable > 0 {
		sum.Note = strings.TrimPrefix(sum.Note+fmt.Sprintf("; chain unavailable for %d withdrawal(s) requested before the node's chain began (see notes)", sum.Unavailable), "; ")
	}
	return sum, was
}

// withoutPredating leaves out the withdrawals requested before the chain
// the node serves began (its genesis block's time): that chain cannot hold
// what they did — a simulated chain restarted while the log persisted, say
// — so each gets a note "chain unavailable", never a violation. On a real
// chain (genesis in 2018) nothing predates it. A node that cannot tell its
// genesis leaves every withdrawal to be checked.
func (a *auditor) withoutPredating(ctx context.Context, node tron.Node, timeout time.Duration, was []*Replay, sum *ChainSummary) []*Replay {
	cr, ok := node.(tron.ChainReader)
	if !ok {
		return was
	}
	gctx, cancel := context.WithTimeout(ctx, timeout)
	g, err := cr.Genesis(gctx)
	cancel()
	if err != nil {
		return was
	}
	sum.Genesis = g.IDHex()
	start := g.Time()
	kept := make([]*Replay, 0, len(was))
	skipped := 0
	for _, wa := range was {
		if wa.w.RequestedAt.IsZero() || !wa.w.RequestedAt.Before(start) {
			kept = append(kept, wa)
			continue
		}
		skipped++
		f := Finding{Severity: Note, Check: "chain", Withdrawal: wa.ID, Version: wa.w.Version,
			What: fmt.Sprintf("chain unavailable: requested at %s, before the node's chain began (genesis at %s; a restarted simulated chain?): its on-chain facts cannot be checked",
				wa.w.RequestedAt.UTC().Format(time.RFC3339), start.Format(time.RFC3339))}
		wa.Checks = append(wa.Checks, f)
		a.add(f)
	}
	if skipped > 0 {
		sum.Unavailable = skipped
	}
	return kept
}

// proofRecord is a proof the log relies on: the proof of death of a
// rebuild, or the proof of a failure (a proof of death or a failing
// receipt), with the envelope it is about.
type proofRecord struct {
	Version  uint64
	Env      aggregate.Envelope
	Evidence *aggregate.Evidence // a rebuild's
	Failed   *aggregate.Failed   // a failure's
	Signed   bool                // the failed envelope had been signed
}

// evidenceItem is one thing the log says the chain shows.
type evidenceItem struct {
	wa      *Replay
	version uint64
	check   string
	what    string  // "the proof of death of txid X", for the finding
	blocks  []int64 // the solid blocks it cites
	verify  func(ctx context.Context) error
}

// checkEvidence checks every proof the log relies on against the chain the
// node serves (blocks are solid: what was true when the event was written
// is true now): the blocks a rebuild or a failure cites exist with those
// numbers, ids and times, link, and do not hold the txid
// (sagas.VerifyExpiryProof); a failing receipt is in its block
// (sagas.VerifyFailure); a confirmation's block holds the txid with
// SUCCESS at the recorded time. A cited block above the node's solid head
// is a block the chain never had. It returns how many could not be checked
// (node errors), each reported as a note.
func (a *auditor) checkEvidence(ctx context.Context, node tron.Node, head int64, timeout time.Duration, was []*Replay, prog Progress) int {
	var items []evidenceItem
	for _, wa := range was {
		for _, p := range wa.proofs {
			switch {
			case p.Evidence != nil:
				ev, env := *p.Evidence, p.Env
				items = append(items, evidenceItem{wa: wa, version: p.Version, check: "evidence",
					what: "the proof of death of txid " + env.TxID, blocks: []int64{ev.Scan.From, ev.Scan.To, ev.SolidBlockNumber},
					verify: func(ctx context.Context) error { return sagas.VerifyExpiryProof(ctx, node, env, ev) }})
			case p.Failed != nil:
				failed, env, signed := *p.Failed, p.Env, p.Signed
				var blocks []int64
				if failed.Evidence != nil {
					blocks = append(blocks, failed.Evidence.Scan.From, failed.Evidence.Scan.To, failed.Evidence.SolidBlockNumber)
				}
				if failed.Receipt != nil {
					blocks = append(blocks, failed.Receipt.BlockNumber)
				}
				items = append(items, evidenceItem{wa: wa, version: p.Version, check: "evidence",
					what: "the proof that txid " + env.TxID + " failed", blocks: blocks,
					verify: func(ctx context.Context) error { return sagas.VerifyFailure(ctx, node, env, signed, failed) }})
			}
		}
		w := wa.w
		if w.State == aggregate.StateConfirmed && w.Route.IsExternal() && w.Confirmation.TxID != "" {
			c := w.Confirmation
			items = append(items, evidenceItem{wa: wa, version: w.Version, check: "chain",
				what: "the confirmation of txid " + c.TxID, blocks: []int64{c.BlockNumber},
				verify: func(ctx context.Context) error { return confirmedIn(ctx, node, c) }})
		}
	}
	errs := make([]error, len(items))
	prog.Start("chain evidence", len(items))
	var mu sync.Mutex
	parallel(len(items), func(i int) {
		it := items[i]
		for _, n := range it.blocks {
			if n > head {
				errs[i] = fmt.Errorf("%w: it cites solid block %d, but the node's solid head is %d: a block the chain never had (solid blocks are final)", sagas.ErrProofRefuted, n, head)
				break
			}
		}
		if errs[i] == nil {
			vctx, cancel := context.WithTimeout(ctx, timeout*time.Duration(2+aggregate.MaxScanBlocks/8))
			errs[i] = it.verify(vctx)
			cancel()
		}
		mu.Lock()
		prog.Add(1)
		mu.Unlock()
	})
	prog.Done()
	unchecked := 0
	for i, it := range items {
		if errs[i] == nil {
			continue
		}
		f := Finding{Severity: Violation, Check: it.check, Withdrawal: it.wa.ID, Version: it.version, What: fmt.Sprintf("%s does not hold on chain: %v", it.what, errs[i])}
		if !errors.Is(errs[i], sagas.ErrProofRefuted) {
			unchecked++
			f.Severity, f.What = Note, fmt.Sprintf("%s could not be checked: %v", it.what, errs[i])
		}
		it.wa.Checks = append(it.wa.Checks, f)
		a.add(f)
	}
	return unchecked
}

// confirmedIn checks a confirmation against its block: the block's
// receipts hold the txid with SUCCESS at the recorded time.
func confirmedIn(ctx context.Context, node tron.Node, c aggregate.Confirmation) error {
	txid, err := tron.ParseTxID(c.TxID)
	if err != nil {
		return fmt.Errorf("%w: %w", sagas.ErrProofRefuted, err)
	}
	infos, err := node.SolidTxInfosByBlockNum(ctx, c.BlockNumber)
	if err != nil {
		return fmt.Errorf("block %d: %w", c.BlockNumber, err)
	}
	for _, in := range infos {
		if in.TxID != txid {
			continue
		}
		if in.Receipt != tron.ReceiptSuccess || (c.BlockTime != 0 && in.BlockTime != c.BlockTime) {
			return fmt.Errorf("%w: block %d has it with %s at %d; the confirmation says %s at %d", sagas.ErrProofRefuted, c.BlockNumber, in.Receipt, in.BlockTime, c.Receipt, c.BlockTime)
		}
		return nil
	}
	// java-tron answers [] for a block it lacks: look at the block itself.
	b, err := node.SolidBlockByNum(ctx, c.BlockNumber)
	if err != nil {
		return fmt.Errorf("block %d: %w", c.BlockNumber, err)
	}
	if !slices.Contains(b.TxIDs, txid) {
		return fmt.Errorf("%w: solid block %d does not hold it", sagas.ErrProofRefuted, c.BlockNumber)
	}
	return fmt.Errorf("block %d's receipts were not served", c.BlockNumber)
}

// parallel runs fn(0..n-1) on at most chainParallelism goroutines.
func parallel(n int, fn func(i int)) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
	)
	for range min(chainParallelism, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// checkDuplicateTxIDs: a txid belongs to one withdrawal. Two withdrawals
// writing ahead the same txid would share one on-chain execution.
func (a *auditor) checkDuplicateTxIDs(was []*Replay) {
	owner := map[string]string{}
	for _, wa := range was {
		for _, r := range wa.txids {
			if prev, ok := owner[r.TxID]; ok && prev != wa.ID {
				f := Finding{Severity: Violation, Check: "txid", Withdrawal: wa.ID, Version: r.Version,
					What: fmt.Sprintf("txid %s was already written ahead by withdrawal %s: the chain executes it once", r.TxID, prev)}
				wa.Checks = append(wa.Checks, f)
				a.add(f)
				continue
			}
			owner[r.TxID] = wa.ID
		}
	}
}

// checkTxIDsAgainst: no txid the withdrawal wrote ahead was written ahead
// by another withdrawal too (others: txid -> first other writer).
func (a *auditor) checkTxIDsAgainst(wa *Replay, others map[string]txidOwner) {
	for _, r := range wa.txids {
		if o, ok := others[r.TxID]; ok {
			wa.addChecks([]Finding{{Severity: Violation, Check: "txid", Withdrawal: wa.ID, Version: r.Version,
				What: fmt.Sprintf("txid %s is also written ahead by withdrawal %s (event %d, stream sequence %d): the chain executes it once", r.TxID, o.ID, o.Version, o.Sequence)}})
		}
	}
}
