package audit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate"
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
func (a *auditor) checkChain(ctx context.Context, node tron.Node, url string, timeout time.Duration, was []*Replay, prog Progress) ChainSummary {
	sum := ChainSummary{Node: url}
	if node == nil {
		sum.Note = "no node given: chain checks skipped"
		return sum
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	solid, err := node.SolidHead(pctx)
	cancel()
	if err != nil {
		sum.Note = fmt.Sprintf("tron node %s unreachable (%v): chain checks skipped", url, err)
		return sum
	}
	sum.Checked, sum.SolidBlock = true, solid.Number

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
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range min(chainParallelism, len(items)) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(items) {
					return
				}
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
			}
		})
	}
	wg.Wait()
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
			switch st.State {
			case tron.TxIncluded:
				report(Violation, "retired txid %s is on chain (%s): its proof of death was wrong", it.txid, st)
			case tron.TxPending:
				report(Warning, "retired txid %s is still in the node's pool", it.txid)
			}
		case "failed":
			if st.Succeeded() {
				report(Violation, "failed, but its txid %s paid on chain (%s)", it.txid, st)
			}
		}
	}
	if sum.LookupErrors > 0 {
		sum.Note = fmt.Sprintf("%d of %d lookups failed (see notes)", sum.LookupErrors, len(items))
	}
	return sum
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
