package sagas

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// SnapshotBucket is the KV bucket (stream KV_WEIR_SNAPSHOTS) of durable
// account snapshots. Only weir reads or writes it.
const SnapshotBucket = "WEIR_SNAPSHOTS"

// DefaultSnapshotEvery is how many account events pass between two
// durable snapshots of one account: a process that starts (or a second
// one) folds at most that many events of a busy account, and an account
// with fewer is simply folded from its log.
const DefaultSnapshotEvery = 128

// snapshotQueue bounds the snapshots waiting to be written; past it a
// snapshot is skipped (the next one due is written instead).
const snapshotQueue = 256

// DurableSnapshots keeps account snapshots in a JetStream KV bucket so that
// a restarted process, or another one, folds a busy account from its last
// snapshot instead of its first event. A snapshot is derived from the log
// and never trusted over it:
//   - it is tagged under the event key (HMAC over its key, schema,
//     position and state): one that does not verify is ignored;
//   - the state must decode and keep the account's invariants;
//   - the log must pass through the position it claims
//     (eventstore.LoadSince): one behind a different history or ahead of
//     the stream is ignored.
//
// An ignored snapshot is logged, counted (Rejected) and the account folded
// from its first event. Snapshots are written off the request path, every
// Every events of an account, by one goroutine (Run).
type DurableSnapshots struct {
	kv     jetstream.KeyValue
	sealer eventstore.Sealer
	every  uint64
	log    *slog.Logger

	queue chan snapshotJob

	rejected atomic.Int64
	written  atomic.Int64

	mu     sync.Mutex
	reject map[string]int64 // reason → count
}

type snapshotJob struct {
	typ, id string
	state   aggregate.Account
	pos     eventstore.Position
}

// snapshotDoc is what the bucket holds under account.<id>.
type snapshotDoc struct {
	Schema   int             `json:"schema"`
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Sequence uint64          `json:"seq"`
	Version  uint64          `json:"version"`
	State    json.RawMessage `json:"state"`
	KeyID    string          `json:"key_id"`
	Tag      string          `json:"tag"` // hex HMAC-SHA256, see sealInput
}

func (d snapshotDoc) sealInput() []byte {
	return eventstore.SealInput("weir-snapshot-v1", []byte(strconv.Itoa(d.Schema)), []byte(d.Type), []byte(d.ID),
		[]byte(strconv.FormatUint(d.Sequence, 10)), []byte(strconv.FormatUint(d.Version, 10)), d.State)
}

// marshal is json.Marshal(d) without its pass over State (a busy
// account's state is most of the document and already compact JSON, as
// aggregate.Account.MarshalSnapshot writes it).
func (d snapshotDoc) marshal() ([]byte, error) {
	head, err := json.Marshal(struct {
		Schema   int    `json:"schema"`
		Type     string `json:"type"`
		ID       string `json:"id"`
		Sequence uint64 `json:"seq"`
		Version  uint64 `json:"version"`
	}{d.Schema, d.Type, d.ID, d.Sequence, d.Version})
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(struct {
		KeyID string `json:"key_id"`
		Tag   string `json:"tag"`
	}{d.KeyID, d.Tag})
	if err != nil {
		return nil, err
	}
	if len(d.State) == 0 {
		return nil, errors.New("snapshot without a state")
	}
	out := make([]byte, 0, len(head)+len(d.State)+len(tail)+16)
	out = append(out, head[:len(head)-1]...)
	out = append(out, `,"state":`...)
	out = append(out, d.State...)
	out = append(out, ',')
	return append(out, tail[1:]...), nil
}

// OpenDurableSnapshots opens (creating if needed) the snapshot bucket, with
// the storage kind and replica count of the store's stream. The store must
// have a Sealer (the event key): without one nothing could tell a snapshot
// weir wrote from one anybody else did. every ≤ 0 means
// DefaultSnapshotEvery.
func OpenDurableSnapshots(ctx context.Context, js jetstream.JetStream, store *eventstore.Store, every int, log *slog.Logger) (*DurableSnapshots, error) {
	if store.Sealer() == nil {
		return nil, errors.New("sagas: durable snapshots need the event key (the store has no Sealer)")
	}
	if every <= 0 {
		every = DefaultSnapshotEvery
	}
	if log == nil {
		log = slog.Default()
	}
	kv, err := store.KeyValue(ctx, js, SnapshotBucket, "weir account snapshots (derived from the log, verified against it)")
	if err != nil {
		return nil, fmt.Errorf("sagas: snapshot bucket: %w", err)
	}
	return &DurableSnapshots{
		kv: kv, sealer: store.Sealer(), every: uint64(every), log: log,
		queue: make(chan snapshotJob, snapshotQueue), reject: map[string]int64{},
	}, nil
}

// Every is how many events of an account pass between two snapshots.
func (d *DurableSnapshots) Every() int { return int(d.every) }

// Rejected counts stored snapshots that were ignored (bad tag, bad state,
// not on the log); Written those written.
func (d *DurableSnapshots) Rejected() int64 { return d.rejected.Load() }

// Written counts snapshots written to the bucket.
func (d *DurableSnapshots) Written() int64 { return d.written.Load() }

// RejectedBy returns the ignored snapshots counted by reason.
func (d *DurableSnapshots) RejectedBy() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int64, len(d.reject))
	for k, v := range d.reject {
		out[k] = v
	}
	return out
}

// Run writes queued snapshots until ctx is done.
func (d *DurableSnapshots) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-d.queue:
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := d.write(wctx, j); err != nil && ctx.Err() == nil {
				d.log.Warn("snapshot not written (the account is folded from the previous one)", "type", j.typ, "id", j.id, "version", j.pos.Version, "err", err)
			}
			cancel()
		}
	}
}

// due reports whether a snapshot at version should be written, the last
// one written (or read) being at since.
func (d *DurableSnapshots) due(since, version uint64) bool {
	return d != nil && version >= since+d.every
}

// enqueue hands a snapshot to the writer; a full queue skips it.
func (d *DurableSnapshots) enqueue(typ, id string, state aggregate.Account, pos eventstore.Position) bool {
	select {
	case d.queue <- snapshotJob{typ: typ, id: id, state: state, pos: pos}:
		return true
	default:
		return false
	}
}

func snapshotKVKey(typ, id string) string { return typ + "." + id }

func (d *DurableSnapshots) write(ctx context.Context, j snapshotJob) error {
	state, err := j.state.MarshalSnapshot()
	if err != nil {
		return err
	}
	doc := snapshotDoc{Schema: aggregate.AccountSnapshotSchema, Type: j.typ, ID: j.id, Sequence: j.pos.Sequence, Version: j.pos.Version, State: state}
	keyID, tag := d.sealer.Seal(doc.sealInput())
	doc.KeyID, doc.Tag = keyID, hex.EncodeToString(tag)
	data, err := doc.marshal()
	if err != nil {
		return err
	}
	if _, err := d.kv.Put(ctx, snapshotKVKey(j.typ, j.id), data); err != nil {
		return fmt.Errorf("put %s: %w", snapshotKVKey(j.typ, j.id), err)
	}
	d.written.Add(1)
	return nil
}

// read returns the stored snapshot of an account if there is one weir
// wrote: tagged under the event key, of this schema, for this key, with a
// state that decodes and keeps the invariants. Anything else is ignored
// (counted and logged, except a snapshot of another schema, which an
// upgrade leaves behind).
func (d *DurableSnapshots) read(ctx context.Context, typ, id string) (aggregate.Account, eventstore.Position, bool) {
	entry, err := d.kv.Get(ctx, snapshotKVKey(typ, id))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			d.log.Warn("snapshot not read; folding from the log", "type", typ, "id", id, "err", err)
		}
		return aggregate.Account{}, eventstore.Position{}, false
	}
	var doc snapshotDoc
	if err := json.Unmarshal(entry.Value(), &doc); err != nil {
		d.ignore(typ, id, "undecodable", err)
		return aggregate.Account{}, eventstore.Position{}, false
	}
	tag, err := hex.DecodeString(doc.Tag)
	if err == nil {
		err = d.sealer.Verify(doc.KeyID, tag, doc.sealInput())
	}
	if err != nil {
		d.ignore(typ, id, "tag", err)
		return aggregate.Account{}, eventstore.Position{}, false
	}
	if doc.Schema != aggregate.AccountSnapshotSchema {
		d.log.Info("snapshot of another schema ignored; folding from the log", "type", typ, "id", id, "schema", doc.Schema)
		return aggregate.Account{}, eventstore.Position{}, false
	}
	if doc.Type != typ || doc.ID != id || doc.Sequence == 0 || doc.Version == 0 || doc.Version > doc.Sequence {
		d.ignore(typ, id, "position", fmt.Errorf("snapshot of %s %s at seq %d version %d", doc.Type, doc.ID, doc.Sequence, doc.Version))
		return aggregate.Account{}, eventstore.Position{}, false
	}
	a, err := aggregate.UnmarshalAccountSnapshot(doc.State)
	if err == nil && (a.Version != doc.Version || (a.ID != "" && a.ID != id)) {
		err = fmt.Errorf("state of %s version %d, snapshot says %s version %d", a.ID, a.Version, id, doc.Version)
	}
	if err != nil {
		d.ignore(typ, id, "state", err)
		return aggregate.Account{}, eventstore.Position{}, false
	}
	return a, eventstore.Position{Sequence: doc.Sequence, Version: doc.Version}, true
}

// ignore counts and logs a stored snapshot that is not used.
func (d *DurableSnapshots) ignore(typ, id, reason string, err error) {
	d.rejected.Add(1)
	d.mu.Lock()
	d.reject[reason]++
	d.mu.Unlock()
	d.log.Warn("stored snapshot ignored; the account is folded from its log", "type", typ, "id", id, "reason", reason, "err", err)
}

// durableKind reports whether a kind's snapshots go to the bucket.
func durableKind(typ string) bool { return typ == eventlog.TypeAccount }
