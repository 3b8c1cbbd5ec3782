package audit

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/tron"
)

// The chain side of the audit (two-sided reconciliation). The checks by
// txid (checkChain) start from the log: they cannot see a payment the log
// does not name — one made outside weir with the hot wallet's key, or one
// whose events the log lost. This side starts from the chain: over a range
// of solid blocks it lists every USDT transfer out of every hot wallet and
// matches it to a confirmed withdrawal (txid, payee, amount), and every
// confirmed withdrawal recorded in the range to a transfer.

// ChainTransferRecord is a USDT transfer out of a hot wallet found on chain.
type ChainTransferRecord struct {
	TxID        string    `json:"txid"`
	Block       int64     `json:"block"`
	BlockTime   time.Time `json:"block_time"`
	From        string    `json:"from"`
	To          string    `json:"to"`
	AmountUnits string    `json:"amount_units"`
	Amount      string    `json:"amount"` // USDT, decimal
}

// MissingTransfer is a confirmed withdrawal whose txid the chain side did
// not find among the hot wallets' transfers in its recorded block.
type MissingTransfer struct {
	Withdrawal string `json:"withdrawal"`
	TxID       string `json:"txid"`
	Block      int64  `json:"block"`
}

// hotWallets are the addresses whose transfers the chain side lists:
// every hot wallet any configuration version in the log named (key
// rotation leaves several), the owners of the envelopes in the log, and
// extra (Options.HotWallets). Sorted.
func (a *auditor) hotWallets(was []*Replay, extra []string) ([]tron.Address, []string) {
	set := map[tron.Address]bool{}
	var bad []string
	add := func(s string) {
		if ad, err := tron.ParseAddress(s); err == nil {
			set[ad] = true
		} else {
			bad = append(bad, s)
		}
	}
	for _, v := range a.configs.versions {
		for _, w := range v.State.Config.HotWallets {
			add(w)
		}
	}
	for _, wa := range was {
		if owner, ok := envelopeOwner(wa.w.Envelope); ok {
			set[owner] = true
		}
		for _, p := range wa.proofs {
			if owner, ok := envelopeOwner(p.Env); ok {
				set[owner] = true
			}
		}
	}
	for _, w := range extra {
		add(w)
	}
	out := make([]tron.Address, 0, len(set))
	for ad := range set {
		out = append(out, ad)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, bad
}

// envelopeOwner is the address an envelope pays from.
func envelopeOwner(env aggregate.Envelope) (tron.Address, bool) {
	raw, err := hex.DecodeString(env.RawDataHex)
	if err != nil || len(raw) == 0 {
		return tron.Address{}, false
	}
	r, err := tron.DecodeRaw(raw)
	if err != nil {
		return tron.Address{}, false
	}
	tt, err := r.TokenTransfer()
	if err != nil {
		return tron.Address{}, false
	}
	return tt.Owner, true
}

// defaultFromBlock is the first block the log names on this chain: the
// earliest block an envelope refers to (a transaction lands after its
// reference block) or a confirmation records. ok false: the log names none.
func defaultFromBlock(was []*Replay) (int64, bool) {
	from, ok := int64(0), false
	use := func(n int64) {
		if n > 0 && (!ok || n < from) {
			from, ok = n, true
		}
	}
	for _, wa := range was {
		use(wa.w.Envelope.RefBlockNum)
		for _, p := range wa.proofs {
			use(p.Env.RefBlockNum)
		}
		if wa.w.State == aggregate.StateConfirmed && wa.w.Route.IsExternal() {
			use(wa.w.Confirmation.BlockNumber)
		}
	}
	return from, ok
}

// blockScan is what one solid block held for the chain side.
type blockScan struct {
	transfers []tron.ChainTransfer // USDT transfers out of a hot wallet, receipts resolved
	all       map[[32]byte]tron.ChainTransfer
	err       error
}

// reconcile runs the chain side over opts' block range (default: from the
// first block the log names to the node's solid head) against the
// withdrawals the chain can hold (was: checkChain's, without those that
// predate its genesis) and every withdrawal of the log (all: for txids the
// log knows in another role).
//
// The log was read before the chain: a withdrawal a running weir wrote
// ahead after that read can already be on chain. later reads the events
// appended since (only when some transfer matched nothing, or its
// withdrawal had no send intent at the cut): a transfer whose txid they
// write ahead, or whose intent they record, is in flight, not a
// violation. A txid on chain needs an intent in the log — a broadcasting
// event or the signature carrying the first send's — since weir records
// one before every send.
func (a *auditor) reconcile(ctx context.Context, opts Options, solid int64, was, all []*Replay, later func(context.Context) (afterCut, error), sum *ChainSummary) {
	cr, ok := opts.Node.(tron.ChainReader)
	if !ok {
		sum.ChainSideNote = "the node cannot list a block's transfers: chain side not checked"
		return
	}
	hot, bad := a.hotWallets(was, opts.HotWallets)
	for _, b := range bad {
		a.add(Finding{Severity: Warning, Check: "chain_side", What: fmt.Sprintf("hot wallet %q is not a TRON address: its transfers are not listed", b)})
	}
	for _, h := range hot {
		sum.HotWallets = append(sum.HotWallets, h.String())
	}
	if len(hot) == 0 {
		sum.ChainSideNote = "no hot wallet known (the log records none and --hot-wallet gave none): chain side not checked"
		return
	}
	from, to := opts.FromBlock, opts.ToBlock
	if from <= 0 {
		var named bool
		if from, named = defaultFromBlock(was); !named {
			sum.ChainSideNote = "the log names no block on this chain: chain side not checked (give --from-block to scan one)"
			return
		}
	}
	if to <= 0 || to > solid {
		if to > solid {
			a.add(Finding{Severity: Note, Check: "chain_side", What: fmt.Sprintf("--to-block %d is past the node's solid head %d: scanned to %d (a block that is not solid may still change)", to, solid, solid)})
		}
		to = solid
	}
	sum.FromBlock, sum.ToBlock = from, to
	if from > to {
		sum.ChainSideNote = fmt.Sprintf("block range %d..%d is empty (the node's solid head is %d): chain side not checked", from, to, solid)
		return
	}
	if opts.MaxBlocks > 0 && to-from+1 > opts.MaxBlocks {
		sum.ChainSideNote = fmt.Sprintf("block range %d..%d is %d blocks, more than the %d allowed (--max-chain-blocks): chain side not checked (narrow it with --from-block/--to-block, or raise the bound)",
			from, to, to-from+1, opts.MaxBlocks)
		a.add(Finding{Severity: Note, Check: "chain_side", What: sum.ChainSideNote})
		return
	}
	isHot := map[tron.Address]bool{}
	for _, h := range hot {
		isHot[h] = true
	}

	n := int(to - from + 1)
	scans := make([]blockScan, n)
	opts.Progress.Start("chain blocks", n)
	var mu sync.Mutex
	parallel(n, func(i int) {
		scans[i] = scanBlock(ctx, cr, opts.Node, opts.NodeTimeout, from+int64(i), isHot)
		mu.Lock()
		opts.Progress.Add(1)
		mu.Unlock()
	})
	opts.Progress.Done()

	// What the log says of each txid.
	type logTx struct {
		wa   *Replay
		role string // confirmed | current | retired
	}
	known := map[string]logTx{}
	for _, wa := range all {
		for _, r := range wa.txids {
			role := "retired"
			if r.TxID == wa.w.Envelope.TxID {
				role = "current"
			}
			known[strings.ToLower(r.TxID)] = logTx{wa, role}
		}
		if wa.w.State == aggregate.StateConfirmed && wa.w.Confirmation.TxID != "" {
			known[strings.ToLower(wa.w.Confirmation.TxID)] = logTx{wa, "confirmed"}
		}
	}

	seen := map[string]bool{} // txids of hot-wallet transfers with SUCCESS
	var unknown []ChainTransferRecord
	type unsent struct {
		wa  *Replay
		rec ChainTransferRecord
	}
	var noIntent []unsent // current txids on chain whose withdrawal had no intent at the cut
	var unread []string
	for i, sc := range scans {
		num := from + int64(i)
		if sc.err != nil {
			sum.UnreadBlocks++
			if len(unread) < 3 {
				unread = append(unread, fmt.Sprintf("block %d: %v", num, sc.err))
			}
			continue
		}
		sum.CheckedBlocks++
		for _, t := range sc.transfers {
			if t.Receipt != tron.ReceiptSuccess {
				sum.FailedTransfers++ // on chain, but it moved nothing
				continue
			}
			sum.Transfers++
			txid := tron.HexID(t.TxID)
			seen[txid] = true
			rec := transferRecord(t)
			lt, ok := known[txid]
			switch {
			case !ok:
				unknown = append(unknown, rec)
			case lt.role == "confirmed":
				w := lt.wa.w
				switch {
				case rec.To != w.ToAddress:
					a.chainSide(lt.wa, Violation, "its txid %s in block %d pays %s, not its to_address %s", txid, t.BlockNumber, rec.To, w.ToAddress)
				case t.Amount.Cmp(w.Amount.Units()) != 0:
					a.chainSide(lt.wa, Violation, "its txid %s in block %d pays %s units, not its amount_units %s", txid, t.BlockNumber, rec.AmountUnits, w.Amount.Units())
				default:
					sum.Matched++
				}
			case lt.role == "current" && !lt.wa.w.Terminal() && lt.wa.w.Sends == 0:
				noIntent = append(noIntent, unsent{lt.wa, rec})
			case lt.role == "current" && !lt.wa.w.Terminal():
				sum.InFlight++
				a.chainSide(lt.wa, Note, "its txid %s is on chain with SUCCESS in block %d; the log has not recorded the confirmation yet (in flight)", txid, t.BlockNumber)
			default:
				what := "its txid " + txid + " was retired by a rebuild"
				if lt.role == "current" {
					what = "it is " + string(lt.wa.w.State)
				}
				sum.UnmatchedTransfers = append(sum.UnmatchedTransfers, rec)
				a.chainSide(lt.wa, Violation, "txid %s moved %s USDT to %s in block %d, but %s: paid without a confirmed withdrawal", txid, rec.Amount, rec.To, t.BlockNumber, what)
			}
		}
	}

	a.judgeUnknown(ctx, unknown, later, sum)
	for _, u := range noIntent {
		var since afterCut
		if later != nil {
			var err error
			if since, err = later(ctx); err != nil {
				a.chainSide(u.wa, Note, "txid %s is on chain; could not read the events appended since the audit read the log to find its send intent: %v", u.rec.TxID, err)
				continue
			}
		}
		if o, ok := since.intents[u.rec.TxID]; ok {
			sum.InFlight++
			a.chainSide(u.wa, Note, "its txid %s is on chain with SUCCESS in block %d; its send intent was appended after the audit read the log (event %d, stream sequence %d): in flight",
				u.rec.TxID, u.rec.Block, o.Version, o.Sequence)
			continue
		}
		a.chainSide(u.wa, Violation, "txid %s moved %s USDT to %s in block %d, but the log holds no intent to send it (%s, no %s nor a %s carrying the first send): sent around weir's write-ahead",
			u.rec.TxID, u.rec.Amount, u.rec.To, u.rec.Block, u.wa.w.State, aggregate.EventBroadcasting, aggregate.EventSigned)
	}

	// The other way: every confirmed payment recorded in a block the scan
	// read is among that block's hot-wallet transfers.
	for _, wa := range was {
		w := wa.w
		if w.State != aggregate.StateConfirmed || !w.Route.IsExternal() || w.Confirmation.TxID == "" {
			continue
		}
		c := w.Confirmation
		txid := strings.ToLower(c.TxID)
		if c.BlockNumber < from || c.BlockNumber > to {
			sum.OutsideRange++
			continue
		}
		sc := scans[c.BlockNumber-from]
		if sc.err != nil || seen[txid] {
			continue
		}
		sum.UnmatchedWithdrawals = append(sum.UnmatchedWithdrawals, MissingTransfer{Withdrawal: wa.ID, TxID: txid, Block: c.BlockNumber})
		what := "it is not in that block"
		if id, err := tron.ParseTxID(txid); err == nil {
			if t, ok := sc.all[id]; ok {
				what = fmt.Sprintf("the block holds it as a transfer of contract %s from %s with receipt %s", t.Contract, t.From, cmp.Or(string(t.Receipt), "unknown"))
			}
		}
		a.chainSide(wa, Violation, "confirmed txid %s (block %d) is not among the successful USDT transfers out of the hot wallets in block %d: %s", txid, c.BlockNumber, c.BlockNumber, what)
	}
	if sum.UnreadBlocks > 0 {
		sum.ChainSideNote = fmt.Sprintf("chain side incomplete: %d of %d block(s) could not be read (%s)", sum.UnreadBlocks, n, strings.Join(unread, "; "))
		a.add(Finding{Severity: Note, Check: "chain_side", What: sum.ChainSideNote})
		return
	}
	sum.TwoSided = true
}

// judgeUnknown files the transfers no withdrawal in the log's cut names:
// in flight when an event appended since writes the txid ahead, otherwise
// "paid outside weir or log lost events".
func (a *auditor) judgeUnknown(ctx context.Context, unknown []ChainTransferRecord, later func(context.Context) (afterCut, error), sum *ChainSummary) {
	if len(unknown) == 0 {
		return
	}
	var since map[string]txidOwner
	if later != nil {
		after, err := later(ctx)
		if since = after.txids; err != nil {
			a.add(Finding{Severity: Note, Check: "chain_side", What: fmt.Sprintf("could not read the events appended since the audit read the log: %v", err)})
		}
	}
	for _, rec := range unknown {
		if o, ok := since[rec.TxID]; ok {
			sum.InFlight++
			a.add(Finding{Severity: Note, Check: "chain_side", Withdrawal: o.ID, Version: o.Version, Sequence: o.Sequence, What: fmt.Sprintf(
				"txid %s (block %d) was written ahead after the audit read the log (stream sequence %d): in flight; the next audit checks it", rec.TxID, rec.Block, o.Sequence)})
			continue
		}
		sum.UnmatchedTransfers = append(sum.UnmatchedTransfers, rec)
		a.add(Finding{Severity: Violation, Check: "chain_side", What: fmt.Sprintf(
			"paid outside weir or log lost events: txid %s in block %d moved %s USDT from hot wallet %s to %s, and no withdrawal in the log names it",
			rec.TxID, rec.Block, rec.Amount, rec.From, rec.To)})
	}
}

// afterCut is what the withdrawal events appended after the audit's cut
// say of txids: those they write ahead and those they record a send
// intent for (txid -> writer).
type afterCut struct {
	txids, intents map[string]txidOwner
}

// writtenAfter reads the withdrawal events appended after stream sequence
// end, once however often it is called. Events the store cannot hand over
// are skipped: the next audit judges them.
func writtenAfter(store *eventstore.Store, end uint64) func(context.Context) (afterCut, error) {
	var once sync.Once
	var got afterCut
	var err error
	return func(ctx context.Context) (afterCut, error) {
		once.Do(func() {
			c := &logCut{others: map[string]txidOwner{}, intents: map[string]txidOwner{}}
			_, err = store.ReadAll(ctx, end+1, "", func(r eventstore.Record) error {
				if r.Key.Type == eventlog.TypeWithdrawal {
					c.noteTxID(r)
				}
				return nil
			}, eventstore.OnViolation(func(*eventstore.IntegrityError) error { return nil }))
			got = afterCut{txids: c.others, intents: c.intents}
		})
		return got, err
	}
}

// chainSide files a chain-side finding under a withdrawal.
func (a *auditor) chainSide(wa *Replay, sev Severity, format string, args ...any) {
	f := Finding{Severity: sev, Check: "chain_side", Withdrawal: wa.ID, Version: wa.w.Version, What: fmt.Sprintf(format, args...)}
	wa.Checks = append(wa.Checks, f)
	a.add(f)
}

// scanBlock reads solid block num's TRC-20 transfers (one call) and keeps
// the USDT ones out of a hot wallet. A transfer whose receipt the block
// did not carry gets it from the block's receipts (one more call).
func scanBlock(ctx context.Context, cr tron.ChainReader, node tron.Node, timeout time.Duration, num int64, isHot map[tron.Address]bool) blockScan {
	bctx, cancel := context.WithTimeout(ctx, timeout)
	txs, err := cr.SolidBlockTransfers(bctx, num)
	cancel()
	if err != nil {
		return blockScan{err: err}
	}
	sc := blockScan{all: make(map[[32]byte]tron.ChainTransfer, len(txs))}
	unknown := false
	for _, t := range txs {
		sc.all[t.TxID] = t
		if t.Contract != tron.USDTContract || !isHot[t.From] {
			continue
		}
		unknown = unknown || t.Receipt == ""
		sc.transfers = append(sc.transfers, t)
	}
	if !unknown {
		return sc
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	infos, err := node.SolidTxInfosByBlockNum(ictx, num)
	cancel()
	if err != nil {
		return blockScan{err: fmt.Errorf("receipts: %w", err)}
	}
	receipts := map[[32]byte]tron.ReceiptResult{}
	for _, in := range infos {
		receipts[in.TxID] = in.Receipt
	}
	for i, t := range sc.transfers {
		if t.Receipt != "" {
			continue
		}
		r, ok := receipts[t.TxID]
		if !ok {
			return blockScan{err: fmt.Errorf("no receipt for transfer %s", tron.HexID(t.TxID))}
		}
		sc.transfers[i].Receipt = r
	}
	return sc
}

func transferRecord(t tron.ChainTransfer) ChainTransferRecord {
	return ChainTransferRecord{
		TxID: tron.HexID(t.TxID), Block: t.BlockNumber, BlockTime: time.UnixMilli(t.BlockTime).UTC(),
		From: t.From.String(), To: t.To.String(), AmountUnits: t.Amount.String(), Amount: tron.FormatUnits(t.Amount, tron.USDTDecimals),
	}
}
