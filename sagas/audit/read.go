package audit

import (
	"context"
	"fmt"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// logCut is what one ordered pass over the log (a consistent prefix of the
// stream, up to end) collected for the audit.
type logCut struct {
	end     uint64
	order   []string // withdrawals kept, in order of first appearance
	byW     map[string][]eventstore.Record
	byA     map[string][]eventstore.Record
	policy  []eventstore.Record
	config  []eventstore.Record
	foreign []eventstore.Record
	// faults are the events the store could not hand over (tag, headers,
	// type, schema) and the broken back-pointers, by aggregate key ("" for
	// a subject that names none), in stream order.
	faults map[eventstore.Key][]Finding
	// others: with a focus, the txids written ahead by every other
	// withdrawal (txid -> owner), for the cross-stream check.
	others map[string]txidOwner
	// intents, when not nil: the txids a send intent is recorded for (a
	// broadcasting event, or a signature carrying the first send's).
	intents map[string]txidOwner
	events  int
}

// txidOwner is the withdrawal that wrote a txid ahead, and where.
type txidOwner struct {
	ID       string
	Version  uint64
	Sequence uint64
}

// readLog reads the log once, in stream order, up to its last sequence as
// of the call. With focus "" it keeps every stream; with a withdrawal id it
// keeps that withdrawal's stream, the policy and configuration, every account stream, and
// only the txids of the other withdrawals. An event the store cannot decode
// or verify, and an event whose back-pointer is not its stream's previous
// event, become findings; the read goes on. The error is for a log that
// could not be read at all.
func readLog(ctx context.Context, store *eventstore.Store, focus string, prog Progress) (*logCut, error) {
	end, err := store.LastSequence(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	c := &logCut{
		byW: map[string][]eventstore.Record{}, byA: map[string][]eventstore.Record{},
		faults: map[eventstore.Key][]Finding{}, others: map[string]txidOwner{},
	}
	last := map[eventstore.Key]uint64{} // each aggregate's last event seen
	fault := func(k eventstore.Key, f Finding) {
		switch k.Type {
		case eventlog.TypeWithdrawal:
			f.Withdrawal = k.ID
		case eventlog.TypeAccount:
			f.Account = k.ID
		}
		c.faults[k] = append(c.faults[k], f)
	}
	prog.Start("reading log", int(end))
	cut, err := store.ReadAll(ctx, 1, "", func(r eventstore.Record) error {
		c.events++
		if prev := last[r.Key]; r.PrevSequence != prev {
			fault(r.Key, Finding{Severity: Violation, Check: "stream", Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type,
				What: fmt.Sprintf("its back-pointer (%s) names stream sequence %d; the stream's previous event is at %d", eventstore.HeaderPrevSeq, r.PrevSequence, prev)})
		}
		last[r.Key] = r.Sequence
		switch r.Key.Type {
		case eventlog.TypeWithdrawal:
			if focus != "" && r.Key.ID != focus {
				c.noteTxID(r)
				break
			}
			if _, ok := c.byW[r.Key.ID]; !ok {
				c.order = append(c.order, r.Key.ID)
			}
			c.byW[r.Key.ID] = append(c.byW[r.Key.ID], r)
		case eventlog.TypeAccount:
			c.byA[r.Key.ID] = append(c.byA[r.Key.ID], r)
		case eventlog.TypeWebhook:
			// Webhook registrations move no money; nothing to judge.
		case eventlog.TypePolicy:
			if r.Key.ID == eventlog.PolicyStreamID {
				c.policy = append(c.policy, r)
			} else {
				c.foreign = append(c.foreign, r)
			}
		case eventlog.TypeConfig:
			if r.Key.ID == eventlog.ConfigStreamID {
				c.config = append(c.config, r)
			} else {
				c.foreign = append(c.foreign, r)
			}
		default:
			c.foreign = append(c.foreign, r)
		}
		prog.Set(int(r.Sequence))
		return nil
	}, eventstore.OnViolation(func(v *eventstore.IntegrityError) error {
		// Quarantined by the store (tag, headers, type, schema): a finding
		// named by its stream sequence, never folded into any replay.
		c.events++
		if v.Key != (eventstore.Key{}) {
			last[v.Key] = v.Sequence // the stream's next event points back to it
		}
		fault(v.Key, Finding{Severity: Violation, Check: "integrity", Sequence: v.Sequence, Event: v.Type,
			What: "quarantined, not replayed: " + v.Err.Error()})
		prog.Set(int(v.Sequence))
		return nil
	}))
	prog.Done()
	if err != nil {
		return nil, fmt.Errorf("audit: reading the event log: %w", err)
	}
	c.end = cut
	return c, nil
}

// noteTxID remembers the txid an envelope event of another withdrawal
// writes ahead (focus mode: nothing else of it is kept).
func (c *logCut) noteTxID(r eventstore.Record) {
	if c.intents != nil && (r.Type == aggregate.EventBroadcasting || r.Type == aggregate.EventSigned) {
		c.noteIntent(r)
		return
	}
	if r.Type != aggregate.EventEnvelopeBuilt && r.Type != aggregate.EventRebuilt {
		return
	}
	e, err := aggregate.DecodeWithdrawalEvent(r.Type, r.Payload)
	if err != nil {
		return // that withdrawal's own audit reports it
	}
	var txid string
	switch ev := e.(type) {
	case aggregate.EnvelopeBuilt:
		txid = ev.Envelope.TxID
	case aggregate.Rebuilt:
		txid = ev.Envelope.TxID
	}
	if _, seen := c.others[txid]; txid != "" && !seen {
		c.others[txid] = txidOwner{ID: r.Key.ID, Version: r.AggregateVersion, Sequence: r.Sequence}
	}
}

// noteIntent remembers the txid a send intent is recorded for.
func (c *logCut) noteIntent(r eventstore.Record) {
	e, err := aggregate.DecodeWithdrawalEvent(r.Type, r.Payload)
	if err != nil {
		return
	}
	var txid string
	switch ev := e.(type) {
	case aggregate.Broadcasting:
		txid = ev.TxID
	case aggregate.Signed:
		if ev.Send != 0 {
			txid = ev.TxID
		}
	}
	if _, seen := c.intents[txid]; txid != "" && !seen {
		c.intents[txid] = txidOwner{ID: r.Key.ID, Version: r.AggregateVersion, Sequence: r.Sequence}
	}
}

// faultsOf lists the faults of one aggregate.
func (c *logCut) faultsOf(typ, id string) []Finding {
	return c.faults[eventstore.Key{Type: typ, ID: id}]
}
