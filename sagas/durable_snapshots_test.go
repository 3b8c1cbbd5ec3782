package sagas_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
)

// durableRig is one embedded server and a way to start "processes" on it:
// a store and a Repo of their own, with durable snapshots every 4 events.
type durableRig struct {
	t   *testing.T
	ctx context.Context
	emb *eventstoretest.Server
	js  jetstream.JetStream
}

func newDurableRig(t *testing.T) *durableRig {
	emb := eventstoretest.Start(t)
	js, err := jetstream.New(emb.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &durableRig{t: t, ctx: ctx, emb: emb, js: js}
}

// process opens a store and a Repo reading and writing snapshots, the
// writer running until the test ends.
func (d *durableRig) process() (*sagas.Repo, *sagas.DurableSnapshots) {
	d.t.Helper()
	store := d.emb.Store(d.ctx, eventlog.NewRegistry())
	snaps, err := sagas.OpenDurableSnapshots(d.ctx, d.js, store, 4, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(d.ctx)
	done := make(chan struct{})
	go func() { defer close(done); snaps.Run(ctx) }()
	d.t.Cleanup(func() { stop(); <-done })
	repo := sagas.NewRepo(store)
	repo.UseDurableSnapshots(snaps)
	return repo, snaps
}

func (d *durableRig) credits(repo *sagas.Repo, account, prefix string, n int) {
	d.t.Helper()
	for i := range n {
		if _, _, err := repo.UpdateAccount(d.ctx, account, aggregate.Credit{
			Account: account, CreditID: prefix + strconv.Itoa(i),
			Amount: aggregate.MustParseAmount(aggregate.USDT, "1"), At: time.Now().UTC(),
		}); err != nil {
			d.t.Fatal(err)
		}
	}
}

// waitWritten polls (with a deadline) until snaps has written n snapshots.
func (d *durableRig) waitWritten(snaps *sagas.DurableSnapshots, n int64) {
	d.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for snaps.Written() < n {
		if time.Now().After(deadline) {
			d.t.Fatalf("%d snapshots written, want %d", snaps.Written(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (d *durableRig) kv() jetstream.KeyValue {
	d.t.Helper()
	kv, err := d.js.KeyValue(d.ctx, sagas.SnapshotBucket)
	if err != nil {
		d.t.Fatal(err)
	}
	return kv
}

// A second process (or a restart) folds a busy account from the snapshot
// the first one wrote: it reads only the events after it, and ends with the
// state a fold of the whole log gives.
func TestASecondProcessFoldsABusyAccountFromTheStoredSnapshot(t *testing.T) {
	d := newDurableRig(t)
	first, snaps := d.process()
	d.credits(first, "hot", "dep-", 10) // snapshots due at versions 4 and 8
	d.waitWritten(snaps, 2)
	d.credits(first, "hot", "more-", 1) // version 11: 3 events after the last snapshot

	second, _ := d.process()
	reads := sagas.CountReads(second)
	a, pos, err := second.Account(d.ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("the second process read %d events, want the 3 after the snapshot at version 8", n)
	}
	full, fpos, err := second.AccountWithHistory(d.ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	if pos != fpos || a.Version != 11 || a.Available().String() != full.Available().String() || a.Credited().String() != "11" {
		t.Fatalf("from the snapshot: v%d %s at %+v; from the log: %s at %+v", a.Version, a.Available(), pos, full.Available(), fpos)
	}
	// And it decides on it: a credit id already recorded is a replay.
	if _, events, err := second.UpdateAccount(d.ctx, "hot", aggregate.Credit{
		Account: "hot", CreditID: "dep-3", Amount: aggregate.MustParseAmount(aggregate.USDT, "1"), At: time.Now().UTC(),
	}); err != nil || len(events) != 0 {
		t.Fatalf("replayed credit: %v %v", events, err)
	}
}

// Snapshots written behind weir's back are never folded on: one whose tag
// does not verify (a balance of a million, "signed" with another key),
// one correctly tagged but claiming a position the log does not hold, and
// one garbled — each is ignored, counted, and the account is folded from
// its log; the fold is then stored in its place.
func TestForgedOrStaleStoredSnapshotsAreIgnored(t *testing.T) {
	d := newDurableRig(t)
	first, snaps := d.process()
	d.credits(first, "acct", "dep-", 8)
	d.waitWritten(snaps, 2)
	kv := d.kv()
	entry, err := kv.Get(d.ctx, "account.acct")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(entry.Value(), &doc); err != nil {
		t.Fatal(err)
	}
	state, _ := json.Marshal(doc["state"])
	rich := strings.NewReplacer(`"available":"8.000000"`, `"available":"1000008.000000"`, `"credited":"8.000000"`, `"credited":"1000008.000000"`).Replace(string(state))
	if rich == string(state) {
		t.Fatalf("state %s", state)
	}
	forged := func(mut func(map[string]any)) []byte {
		m := map[string]any{}
		for k, v := range doc {
			m[k] = v
		}
		mut(m)
		b, _ := json.Marshal(m)
		return b
	}
	// A tag made with a key weir does not hold.
	other, _ := eventstore.NewKeyring("test", map[string][]byte{"test": []byte(strings.Repeat("k", 32))})
	cases := []struct {
		name, reason string
		value        []byte
	}{
		{"rich state, old tag", "tag", forged(func(m map[string]any) { m["state"] = json.RawMessage(rich) })},
		{"rich state, tagged with another key", "tag", forged(func(m map[string]any) {
			m["state"] = json.RawMessage(rich)
			m["tag"] = resealSnapshot(t, other, m)
		})},
		{"ahead of the log, correctly tagged", "log", forged(func(m map[string]any) {
			m["seq"], m["version"] = float64(10_000), float64(100)
			m["state"] = json.RawMessage(strings.Replace(string(state), `"version":8`, `"version":100`, 1))
			m["tag"] = resealSnapshot(t, eventstoretest.Keyring(), m)
		})},
		{"garbled", "undecodable", []byte(`{"schema":`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := kv.Put(d.ctx, "account.acct", c.value); err != nil {
				t.Fatal(err)
			}
			repo, snaps := d.process()
			a, _, err := repo.Account(d.ctx, "acct")
			if err != nil {
				t.Fatal(err)
			}
			if a.Available().String() != "8" || a.Version != 8 {
				t.Fatalf("folded %s at v%d, want 8 at v8", a.Available(), a.Version)
			}
			if got := snaps.RejectedBy(); got[c.reason] != 1 || snaps.Rejected() != 1 {
				t.Fatalf("rejected %v, want one for %s", got, c.reason)
			}
			// The fold from the log is written back in its place.
			d.waitWritten(snaps, 1)
			if _, spos, ok := sagas.ReadSnapshotForTest(d.ctx, snaps, "acct"); !ok || spos.Version != 8 {
				t.Fatalf("stored snapshot after the fold: %+v %v", spos, ok)
			}
		})
	}
}

// resealSnapshot tags a snapshot document as weir does, with key.
func resealSnapshot(t *testing.T, key eventstore.Sealer, m map[string]any) string {
	t.Helper()
	return sagas.SealSnapshotForTest(key, m)
}

// A stored snapshot becomes this process's own only once the log passes
// through it: a load that fails to read the log leaves nothing held, and
// one that succeeds holds the fold, marked as stored, so that it is not
// written back.
func TestAStoredSnapshotIsHeldOnlyOnceTheLogPassesThroughIt(t *testing.T) {
	d := newDurableRig(t)
	first, snaps := d.process()
	d.credits(first, "hot", "dep-", 8) // snapshots due at versions 4 and 8
	d.waitWritten(snaps, 2)
	d.credits(first, "hot", "more-", 3)

	second, _ := d.process()
	restore := sagas.FailReads(second, errors.New("replica unreachable"))
	if _, _, err := second.Account(d.ctx, "hot"); err == nil {
		t.Fatal("the account loaded without its log")
	}
	if pos, _, ok := sagas.HeldSnapshot(second, eventlog.TypeAccount, "hot"); ok {
		t.Fatalf("the stored snapshot is held at %+v though the log was never read", pos)
	}
	restore()
	a, _, err := second.Account(d.ctx, "hot")
	if err != nil || a.Version != 11 {
		t.Fatalf("account at v%d: %v", a.Version, err)
	}
	if pos, durable, ok := sagas.HeldSnapshot(second, eventlog.TypeAccount, "hot"); !ok || pos.Version != 11 || durable != 8 {
		t.Fatalf("held %v at %+v, stored at v%d; want the fold at v11, stored at v8", ok, pos, durable)
	}
}
