package projections

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func minutes(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// world is a real embedded nats-server with the event store on it, and a
// writer that goes through the deciders exactly as the application does:
// load the stream, fold it, decide, append at the loaded position.
type world struct {
	t      testing.TB
	store  *eventstore.Store
	js     jetstream.JetStream
	policy aggregate.Policy
}

func newWorld(t testing.TB) *world {
	t.Helper()
	srv := eventstoretest.Start(t)
	nc := srv.Conn()
	store := srv.StoreOn(testCtx(t), nc, eventlog.NewRegistry())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, store: store, js: js, policy: aggregate.DefaultPolicy().WithVersion(1)}
}

// loadWithdrawal folds a withdrawal's stream.
func (w *world) loadWithdrawal(id string) (aggregate.Withdrawal, eventstore.Position) {
	w.t.Helper()
	recs, pos, err := w.store.Load(testCtx(w.t), eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id})
	if err != nil {
		w.t.Fatalf("load withdrawal %s: %v", id, err)
	}
	evs, err := eventlog.WithdrawalEvents(recs)
	if err != nil {
		w.t.Fatal(err)
	}
	var wd aggregate.Withdrawal
	for i, e := range evs {
		wd = aggregate.EvolveRecorded(wd, e, recs[i].Time)
	}
	wd.Version = pos.Version
	return wd, pos
}

func (w *world) loadAccount(id string) (aggregate.Account, eventstore.Position) {
	w.t.Helper()
	recs, pos, err := w.store.Load(testCtx(w.t), eventstore.Key{Type: eventlog.TypeAccount, ID: id})
	if err != nil {
		w.t.Fatalf("load account %s: %v", id, err)
	}
	evs, err := eventlog.AccountEvents(recs)
	if err != nil {
		w.t.Fatal(err)
	}
	a := aggregate.FoldAccount(evs)
	a.Version = pos.Version
	return a, pos
}

// do decides cmd on withdrawal id and appends the result; it returns the
// stream sequence the withdrawal stands at afterwards.
func (w *world) do(id string, cmd aggregate.Command) uint64 {
	w.t.Helper()
	seq, err := w.try(id, cmd)
	if err != nil {
		w.t.Fatalf("withdrawal %s: %T: %v", id, cmd, err)
	}
	return seq
}

func (w *world) try(id string, cmd aggregate.Command) (uint64, error) {
	w.t.Helper()
	wd, pos := w.loadWithdrawal(id)
	evs, err := aggregate.Decide(wd, cmd)
	if err != nil {
		return 0, err
	}
	return w.append(eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}, pos, toStore(evs)), nil
}

// acct decides an account command and appends the result.
func (w *world) acct(id string, cmd aggregate.AccountCommand) uint64 {
	w.t.Helper()
	seq, err := w.tryAcct(id, cmd)
	if err != nil {
		w.t.Fatalf("account %s: %T: %v", id, cmd, err)
	}
	return seq
}

func (w *world) tryAcct(id string, cmd aggregate.AccountCommand) (uint64, error) {
	w.t.Helper()
	a, pos := w.loadAccount(id)
	evs, err := aggregate.DecideAccount(a, cmd)
	if err != nil {
		return 0, err
	}
	return w.append(eventstore.Key{Type: eventlog.TypeAccount, ID: id}, pos, toStore(evs)), nil
}

func (w *world) append(k eventstore.Key, pos eventstore.Position, evs []eventstore.Event) uint64 {
	w.t.Helper()
	if len(evs) == 0 {
		return pos.Sequence
	}
	np, err := w.store.Append(testCtx(w.t), k, pos, evs...)
	if err != nil {
		w.t.Fatalf("append %s/%s: %v", k.Type, k.ID, err)
	}
	return np.Sequence
}

func toStore[E interface{ EventType() string }](evs []E) []eventstore.Event {
	out := make([]eventstore.Event, len(evs))
	for i, e := range evs {
		out[i] = eventstore.Event{ID: eventstore.NewEventID(), Type: e.EventType(), Data: e}
	}
	return out
}

func (w *world) last() uint64 {
	w.t.Helper()
	seq, err := w.store.LastSequence(testCtx(w.t))
	if err != nil {
		w.t.Fatal(err)
	}
	return seq
}

func (w *world) checkpoints() *KVCheckpoints {
	w.t.Helper()
	cp, err := NewKVCheckpoints(testCtx(w.t), w.js, w.store, "")
	if err != nil {
		w.t.Fatalf("checkpoints: %v", err)
	}
	return cp
}

// start returns a running projector, stopped at the end of the test.
func (w *world) start(opts Options) *Projector {
	w.t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	p := New(w.store, opts)
	if err := p.Start(testCtx(w.t)); err != nil {
		w.t.Fatalf("start: %v", err)
	}
	w.t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

// rebuilt returns a projector that folded the whole log from zero.
func (w *world) rebuilt() *Projector {
	w.t.Helper()
	p := New(w.store, Options{Logger: quietLogger()})
	if err := p.Rebuild(testCtx(w.t)); err != nil {
		w.t.Fatalf("rebuild: %v", err)
	}
	return p
}

func waitFor(t testing.TB, p *Projector, seq uint64) {
	t.Helper()
	if err := p.WaitFor(testCtx(t), seq); err != nil {
		t.Fatalf("WaitFor(%d): %v (applied %d)", seq, err, p.Applied())
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// logRecorder keeps log messages so tests can see what a projector said
// (a discarded checkpoint must be loud).
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logRecorder) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *logRecorder) has(s string) bool { return strings.Contains(l.String(), s) }

func snapshotJSON(t testing.TB, s Snapshot) string {
	t.Helper()
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameSnapshot fails with the first differing line when two projections
// disagree.
func sameSnapshot(t testing.TB, what string, want, got Snapshot) {
	t.Helper()
	a, b := snapshotJSON(t, want), snapshotJSON(t, got)
	if a == b {
		return
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			lo := max(0, i-8)
			t.Fatalf("%s: snapshots differ at line %d:\nwant: %s\ngot:  %s\ncontext (want):\n%s", what, i+1, al[i], bl[i], strings.Join(al[lo:min(len(al), i+3)], "\n"))
		}
	}
	t.Fatalf("%s: snapshots differ in length (%d vs %d lines)", what, len(al), len(bl))
}

func usdt(s string) aggregate.Amount { return aggregate.MustParseAmount(aggregate.USDT, s) }

// envelope is a self-consistent envelope (txid = sha256(raw)) from a seed.
func envelope(seed string, expiration int64) aggregate.Envelope {
	raw := []byte("raw-data:" + seed)
	sum := sha256.Sum256(raw)
	ref := blockID(refBlock)
	return aggregate.Envelope{TxID: hex.EncodeToString(sum[:]), RawDataHex: hex.EncodeToString(raw), Expiration: expiration, FeeLimit: 30_000_000,
		RefBlockNum: refBlock, RefBlockHash: hex.EncodeToString(ref[8:16])}
}

// refBlock is every test envelope's TAPoS reference block.
const refBlock = int64(70_000_000)

// blockID is a TRON-shaped block id: the 8-byte block number, then a hash.
func blockID(n int64) [32]byte {
	id := sha256.Sum256(fmt.Appendf(nil, "block %d", n))
	binary.BigEndian.PutUint64(id[:8], uint64(n))
	return id
}

func signature(b byte) string { return strings.Repeat(hex.EncodeToString([]byte{b}), 64) + "01" }

// proof is chain-time evidence that an envelope expiring at exp is dead.
func proof(exp int64) aggregate.Evidence {
	to := refBlock + 123
	from, last := blockID(refBlock), blockID(to)
	return aggregate.Evidence{
		SolidBlockNumber: to, SolidBlockTime: exp + 60_000, Expiration: exp, Margin: 30_000, Lookup: aggregate.LookupNotFound,
		Scan: aggregate.BlockScan{
			From: refBlock, FromID: hex.EncodeToString(from[:]), FromTime: exp - 120_000,
			To: to, ToID: hex.EncodeToString(last[:]), ToTime: exp + 60_000, IDsSHA256: strings.Repeat("ab", 32),
		},
	}
}

const toAddr = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy"

func externalRoute(t testing.TB) aggregate.Route {
	r, err := aggregate.ExternalRoute("not custodied")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ids(ws []aggregate.Withdrawal) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}
