package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/tron"
)

// chainSummary says whether and how the log was checked against the chain.
type chainSummary struct {
	Node         string `json:"node"`
	Checked      bool   `json:"checked"`
	Note         string `json:"note,omitempty"`
	SolidBlock   int64  `json:"solid_block,omitempty"`
	TxIDs        int    `json:"txids"`
	LookupErrors int    `json:"lookup_errors"`
}

// chainItem is one txid to ask the node about, and what the log says of it.
type chainItem struct {
	wa      *withdrawalAudit
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
func (a *auditor) checkChain(ctx context.Context, node tron.Node, url string, timeout time.Duration, was []*withdrawalAudit, prog *progress) chainSummary {
	sum := chainSummary{Node: url}
	if node == nil {
		sum.Note = "no --tron-node: chain checks skipped"
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
	prog.start("chain lookups", len(items))
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
				prog.add(1)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	prog.done()

	for i, it := range items {
		report := func(sev, format string, args ...any) {
			f := auditFinding{Severity: sev, Check: "chain", Withdrawal: it.wa.ID, Version: it.version, What: fmt.Sprintf(format, args...)}
			it.wa.Checks = append(it.wa.Checks, f)
			a.add(f)
		}
		if errs[i] != nil {
			sum.LookupErrors++
			report(sevNote, "lookup of txid %s failed: %v", it.txid, errs[i])
			continue
		}
		st := results[i]
		switch it.role {
		case "confirmed":
			switch {
			case st.State != tron.TxIncluded:
				report(sevViolation, "confirmed txid %s is not on chain (the node says %s)", it.txid, st)
			case st.Receipt != tron.ReceiptSuccess:
				report(sevViolation, "confirmed txid %s is on chain with receipt %s: it did not pay", it.txid, st.Receipt)
			case it.block > 0 && st.BlockNumber != it.block:
				report(sevViolation, "confirmed txid %s is in block %d; the confirmation records block %d", it.txid, st.BlockNumber, it.block)
			}
		case "retired":
			switch st.State {
			case tron.TxIncluded:
				report(sevViolation, "retired txid %s is on chain (%s): its proof of death was wrong", it.txid, st)
			case tron.TxPending:
				report(sevWarning, "retired txid %s is still in the node's pool", it.txid)
			}
		case "failed":
			if st.Succeeded() {
				report(sevViolation, "failed, but its txid %s paid on chain (%s)", it.txid, st)
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
func (a *auditor) checkDuplicateTxIDs(was []*withdrawalAudit) {
	owner := map[string]string{}
	for _, wa := range was {
		for _, r := range wa.txids {
			if prev, ok := owner[r.TxID]; ok && prev != wa.ID {
				f := auditFinding{Severity: sevViolation, Check: "txid", Withdrawal: wa.ID, Version: r.Version,
					What: fmt.Sprintf("txid %s was already written ahead by withdrawal %s: the chain executes it once", r.TxID, prev)}
				wa.Checks = append(wa.Checks, f)
				a.add(f)
				continue
			}
			owner[r.TxID] = wa.ID
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

func (p *progress) start(label string, total int) {
	if p == nil {
		return
	}
	p.label, p.total, p.cur, p.last = label, total, 0, time.Time{}
	p.draw(true)
}

func (p *progress) add(n int) {
	if p != nil {
		p.set(p.cur + n)
	}
}

func (p *progress) set(cur int) {
	if p == nil {
		return
	}
	p.cur = cur
	p.draw(false)
}

// done completes the bar and clears the line.
func (p *progress) done() {
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
