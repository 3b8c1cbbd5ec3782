package projections

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

// rawPublish is what a full-access NATS identity (a leaked admin
// credential) can do: publish anything to the event stream, bypassing
// weir. It returns the stream sequence.
func (w *world) rawPublish(m *nats.Msg) uint64 {
	w.t.Helper()
	ack, err := w.js.PublishMsg(testCtx(w.t), m)
	if err != nil {
		w.t.Fatalf("raw publish on %s: %v", m.Subject, err)
	}
	return ack.Sequence
}

// forgedCredit is a well-formed account.credited with every header weir
// writes — expected sequence, back pointer, version, id, type, schema — and
// a tag the forger had to make up.
func (w *world) forgedCredit(account string, at eventstore.Position, amount, tag string) *nats.Msg {
	data := []byte(`{"account":"` + account + `","credit_id":"forged","amount":"` + amount + `","at":"2025-03-01T12:00:00Z"}`)
	subj := w.store.Subject(eventstore.Key{Type: eventlog.TypeAccount, ID: account})
	return eventstoretest.WithTag(eventstoretest.Forged(subj, at, aggregate.EventAccountCredited, aggregate.EventSchemaVersion, data), tag)
}

// A 7-byte publish with an unknown type used to stop the projector for
// good (and with it every queue). It is quarantined instead: the views
// go on folding everything else.
func TestUnknownTypePublishIsQuarantinedAndTheProjectorGoesOn(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	p := w.start(Options{})
	m := nats.NewMsg(w.store.Subject(eventstore.Key{Type: eventlog.TypeAccount, ID: "junk"}))
	m.Data = []byte("garbage")
	m.Header.Set(eventstore.HeaderEventType, "no.such")
	bad := w.rawPublish(m)
	good := w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("50"), At: minutes(0)})

	if err := p.WaitFor(ctx, good); err != nil {
		t.Fatalf("projector after the junk publish: %v", err)
	}
	if p.Err() != nil {
		t.Fatalf("projector stopped: %v", p.Err())
	}
	if v, ok := p.Balance("acct-a"); !ok || v.Available != "50" {
		t.Fatalf("acct-a after the junk: %+v %v, want 50 available", v, ok)
	}
	q := p.Quarantined()
	if len(q) != 1 || q[0].Sequence != bad || q[0].ID != "junk" {
		t.Fatalf("quarantined %+v, want junk at seq %d", q, bad)
	}
	if vs, n := w.store.Violations(); n != 1 || vs[0].Sequence != bad {
		t.Fatalf("store violations %+v (%d), want seq %d", vs, n, bad)
	}
}

// A leaked admin credential publishes a credit with every header right
// but without the key. The views never show it: a new account stays
// absent, an existing one leaves the views, and the rest goes on — live,
// after a restart from the checkpoint, and after a rebuild.
func TestForgedCreditIsNeverShownAsABalance(t *testing.T) {
	for _, tc := range []struct{ name, tag string }{
		{"no tag", ""},
		{"made-up tag", strings.Repeat("0f", 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			ctx := testCtx(t)
			cp := w.checkpoints()
			p := w.start(Options{Checkpoints: cp})
			w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("100"), At: minutes(0)})
			_, apos := w.loadAccount("acct-a")

			onNew := w.rawPublish(w.forgedCredit("mallory", eventstore.Position{}, "5000000", tc.tag))
			onOld := w.rawPublish(w.forgedCredit("acct-a", apos, "5000000", tc.tag))
			good := w.acct("acct-b", aggregate.Credit{Account: "acct-b", CreditID: "c1", Amount: usdt("7"), At: minutes(1)})
			waitFor(t, p, good)

			check := func(p *Projector, when string) {
				t.Helper()
				if v, ok := p.Balance("mallory"); ok {
					t.Fatalf("%s: mallory shows %+v", when, v)
				}
				if v, ok := p.Balance("acct-a"); ok {
					t.Fatalf("%s: acct-a (forged onto) still shows %+v", when, v)
				}
				if v, ok := p.Balance("acct-b"); !ok || v.Available != "7" {
					t.Fatalf("%s: acct-b %+v %v, want 7", when, v, ok)
				}
				q := p.Quarantined()
				if len(q) != 2 || q[0].Sequence != onNew || q[1].Sequence != onOld {
					t.Fatalf("%s: quarantined %+v, want seqs %d and %d", when, q, onNew, onOld)
				}
				if _, ok := p.IsQuarantined(eventstore.Key{Type: eventlog.TypeAccount, ID: "acct-a"}); !ok {
					t.Fatalf("%s: acct-a not reported quarantined", when)
				}
			}
			check(p, "live")
			live := p.Snapshot()
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			restarted := w.start(Options{Checkpoints: cp})
			check(restarted, "restarted from the checkpoint")
			sameSnapshot(t, "restarted", live, restarted.Snapshot())
			rebuilt := w.rebuilt()
			check(rebuilt, "rebuilt")
			sameSnapshot(t, "rebuilt", live, rebuilt.Snapshot())

			// The loads the deciders use refuse the forged aggregates.
			for _, id := range []string{"mallory", "acct-a"} {
				if _, _, err := w.store.Load(ctx, eventstore.Key{Type: eventlog.TypeAccount, ID: id}); !errors.Is(err, eventstore.ErrIntegrity) {
					t.Fatalf("load %s: %v, want an integrity violation", id, err)
				}
			}
		})
	}
}

// A verified event whose payload the domain refuses quarantines its
// withdrawal (it leaves the queues) instead of stopping the projector.
func TestUndecodablePayloadQuarantinesItsWithdrawal(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	p := w.start(Options{})
	w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("5000"), At: minutes(0)})
	w.request(wSmall, "acct-a", "200", minutes(1))
	_, pos := w.loadWithdrawal(wSmall)
	bad := w.append(eventstore.Key{Type: eventlog.TypeWithdrawal, ID: wSmall}, pos,
		[]eventstore.Event{{ID: eventstore.NewEventID(), Type: aggregate.EventApproved, Data: map[string]any{"surprise": 1}}})
	good := w.request(wLarge, "acct-a", "300", minutes(2))
	if err := p.WaitFor(ctx, good); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Withdrawal(wSmall); ok {
		t.Fatal("the withdrawal with the undecodable event is still in the views")
	}
	if _, ok := p.Withdrawal(wLarge); !ok {
		t.Fatal("the next withdrawal was not folded")
	}
	if q := p.Quarantined(); len(q) != 1 || q[0].Sequence != bad || q[0].ID != wSmall {
		t.Fatalf("quarantined %+v, want %s at seq %d", q, wSmall, bad)
	}
	sameSnapshot(t, "rebuilt", p.Snapshot(), w.rebuilt().Snapshot())
	_ = p.Stop(context.Background())
}

// forgedCheckpoints writes the bucket as a full-access identity would: the
// same format, a consistent sha256, but no event key.
func forgedCheckpoints(cp *KVCheckpoints) *KVCheckpoints {
	return &KVCheckpoints{kv: cp.kv, partSize: cp.partSize, MaxSize: 1 << 40, slots: map[string]string{}}
}

// Rewriting the checkpoint (its sha256 has no key) used to make the
// approval queue show 9 USDT to another address while the withdrawal is
// 900 to the requested one. The head's tag refuses it: the views are
// rebuilt from the log.
func TestRewrittenCheckpointIsDiscardedAndRebuiltFromTheLog(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	cp := w.checkpoints()
	p := w.start(Options{Checkpoints: cp})
	w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("5000"), At: minutes(0)})
	waitFor(t, p, w.request(wLarge, "acct-a", "900", minutes(1)))
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	data, err := cp.Load(ctx, "views")
	if err != nil {
		t.Fatal(err)
	}
	const elsewhere = "TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL"
	doc, err := decodeCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range doc.Snapshot.Withdrawals {
		doc.Snapshot.Withdrawals[i].Withdrawal.Amount = usdt("9")
		doc.Snapshot.Withdrawals[i].Withdrawal.ToAddress = elsewhere
	}
	forged, err := encodeCheckpoint(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := forgedCheckpoints(cp).Save(ctx, "views", forged); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Load(ctx, "views"); !errors.Is(err, ErrCheckpointCorrupt) {
		t.Fatalf("load of the rewritten checkpoint: %v, want ErrCheckpointCorrupt", err)
	}

	var logs logRecorder
	restarted := New(w.store, Options{Checkpoints: cp, Logger: logs.logger()})
	if err := restarted.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer restarted.Stop(context.Background())
	if err := restarted.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	q := restarted.PendingApprovals()
	if len(q) != 1 || q[0].Amount.String() != "900" || q[0].ToAddress != toAddr {
		t.Fatalf("approval queue after the rewrite: %+v, want 900 to %s", q, toAddr)
	}
	if !logs.has("discarding checkpoint") {
		t.Fatalf("no warning about the discarded checkpoint:\n%s", logs.String())
	}
}

// A 300 KB gzip bomb used to take start-up to 823 MB. Unauthenticated, it
// is refused before it is inflated; authenticated (a key holder's bug), it
// is inflated only up to the cap.
func TestGzipBombCheckpointIsRefused(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	cp := w.checkpoints()
	bomb := bytes.Repeat([]byte{' '}, 4<<20) // gzips to a few KB
	if err := forgedCheckpoints(cp).Save(ctx, "views", bomb); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Load(ctx, "views"); !errors.Is(err, ErrCheckpointCorrupt) || !strings.Contains(err.Error(), "not authentic") {
		t.Fatalf("unauthenticated bomb: %v, want refused as not authentic", err)
	}
	cp.MaxSize = 1 << 20
	signed := &KVCheckpoints{kv: cp.kv, partSize: cp.partSize, sealer: cp.sealer, MaxSize: 1 << 40, slots: map[string]string{}}
	if err := signed.Save(ctx, "views", bomb); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Load(ctx, "views"); !errors.Is(err, ErrCheckpointCorrupt) || !strings.Contains(err.Error(), "cap") {
		t.Fatalf("authenticated bomb over the cap: %v, want refused at the cap", err)
	}
	if err := cp.Save(ctx, "views", bomb); err == nil {
		t.Fatal("a save over the cap was accepted")
	}
	// A projector meeting it replays from the log and works.
	p := w.start(Options{Checkpoints: cp})
	waitFor(t, p, w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: "c1", Amount: usdt("1"), At: minutes(0)}))
}
