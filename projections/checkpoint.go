package projections

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/eventstore"
)

// Checkpoints persists projection snapshots by name. A checkpoint only saves
// time: losing one costs a replay from zero, never correctness, so a
// projector treats every checkpoint it cannot trust as absent.
type Checkpoints interface {
	// Load returns the bytes last saved under name; ErrNoCheckpoint when
	// there are none, an error wrapping ErrCheckpointCorrupt when what is
	// stored cannot be read back as saved.
	Load(ctx context.Context, name string) ([]byte, error)
	// Save replaces what is stored under name. A Save that fails part-way
	// leaves the previous checkpoint readable.
	Save(ctx context.Context, name string, data []byte) error
}

var (
	// ErrNoCheckpoint: nothing was saved under the name.
	ErrNoCheckpoint = errors.New("projections: no checkpoint")
	// ErrCheckpointCorrupt: a checkpoint exists but cannot be used (garbled,
	// incomplete, unknown schema, or from another log). It is discarded and
	// the projection replays from zero.
	ErrCheckpointCorrupt = errors.New("projections: checkpoint unusable")
)

// CheckpointSchema is the version of the checkpoint document. Bump it when
// the Snapshot's shape changes, or when the fold changes what it computes
// from the same events (aggregate.Evolve gaining a field): an old snapshot
// would then differ from a replay, and an unknown version is replayed.
const CheckpointSchema = 1

// checkpointDoc is what a projector saves: its snapshot, tagged with the
// schema and the stream it was folded from.
type checkpointDoc struct {
	Schema   int       `json:"schema"`
	Name     string    `json:"name"`
	Stream   string    `json:"stream"`
	SavedAt  time.Time `json:"saved_at"`
	Snapshot Snapshot  `json:"snapshot"`
}

func encodeCheckpoint(doc checkpointDoc) ([]byte, error) {
	doc.Schema = CheckpointSchema
	return json.Marshal(doc)
}

func decodeCheckpoint(data []byte) (checkpointDoc, error) {
	var head struct {
		Schema int `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return checkpointDoc{}, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
	}
	if head.Schema != CheckpointSchema {
		return checkpointDoc{}, fmt.Errorf("%w: schema %d, this build reads %d", ErrCheckpointCorrupt, head.Schema, CheckpointSchema)
	}
	var doc checkpointDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	// Same schema, unknown members: written by a build that changed the
	// format without bumping the schema. Replaying is the safe reading.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return checkpointDoc{}, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
	}
	if dec.More() {
		return checkpointDoc{}, fmt.Errorf("%w: trailing data", ErrCheckpointCorrupt)
	}
	return doc, nil
}

// DefaultCheckpointBucket is the KeyValue bucket projections checkpoint to.
const DefaultCheckpointBucket = "weir_projections"

// KVCheckpoints stores checkpoints in a JetStream KeyValue bucket.
//
// A snapshot grows with the number of open withdrawals and can outgrow the
// server's maximum message size (1 MiB by default), so each one is gzipped
// and split into parts. Per name there is one head key, <name>, and two
// slots of part keys, <name>.a.<i> and <name>.b.<i>. A Save writes the slot
// the head does not point to, then the head (slot, parts, length, sha256):
// until the head is written the previous checkpoint stays whole, and the
// keys are overwritten in place, so the bucket does not grow with saves.
// Load checks the hash and returns ErrCheckpointCorrupt on any mismatch.
//
// One writer per name: two processes saving the same name may interleave
// their parts, which Load then detects and refuses (costing a replay).
// Give each process's projector its own Options.Name.
//
// With the store's Sealer (the event key), the head also carries a tag over
// its fields, so a checkpoint rewritten by anyone without the key is
// refused like a torn one: discarded, and the views rebuilt from the log.
// The decompressed size is capped (MaxSize), so a small compressed part
// cannot inflate into gigabytes at start-up.
type KVCheckpoints struct {
	kv       jetstream.KeyValue
	partSize int
	sealer   eventstore.Sealer
	// MaxSize bounds a checkpoint's decompressed size; default
	// DefaultMaxCheckpointBytes. A larger one is refused on Save and
	// discarded on Load.
	MaxSize int

	mu    sync.Mutex
	slots map[string]string // name → slot the head points to, as last seen
}

// NewKVCheckpoints opens (creating if needed) the bucket, with the storage
// kind and replica count of the store's stream: checkpoints of a memory log
// must not outlive it on disk, and a replicated log deserves replicated
// checkpoints.
func NewKVCheckpoints(ctx context.Context, js jetstream.JetStream, store *eventstore.Store, bucket string) (*KVCheckpoints, error) {
	if bucket == "" {
		bucket = DefaultCheckpointBucket
	}
	kv, err := store.KeyValue(ctx, js, bucket, "weir projection checkpoints")
	if err != nil {
		return nil, fmt.Errorf("projections: checkpoint bucket: %w", err)
	}
	return &KVCheckpoints{kv: kv, partSize: 256 << 10, sealer: store.Sealer(), MaxSize: DefaultMaxCheckpointBytes, slots: map[string]string{}}, nil
}

type kvHead struct {
	Format   int    `json:"format"`
	Slot     string `json:"slot"`
	Parts    int    `json:"parts"`
	Size     int    `json:"size"` // compressed bytes
	SHA256   string `json:"sha256"`
	Encoding string `json:"encoding"`
	KeyID    string `json:"key_id,omitempty"`
	Tag      string `json:"tag,omitempty"` // hex; see sealInput
}

// sealInput is what a head's tag covers: the name it is stored under and
// every field that locates and checks the body (whose sha256 it holds).
func (h kvHead) sealInput(name string) []byte {
	return eventstore.SealInput("weir-checkpoint-v1", []byte(name), []byte(strconv.Itoa(h.Format)), []byte(h.Slot),
		[]byte(strconv.Itoa(h.Parts)), []byte(strconv.Itoa(h.Size)), []byte(h.SHA256), []byte(h.Encoding))
}

// DefaultMaxCheckpointBytes is KVCheckpoints.MaxSize by default.
const DefaultMaxCheckpointBytes = 128 << 20

const (
	kvHeadFormat = 1
	kvEncoding   = "gzip"
	maxKVParts   = 4096
)

var kvName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func checkKVName(name string) error {
	if !kvName.MatchString(name) {
		return fmt.Errorf("projections: checkpoint name %q: only letters, digits, '_' and '-'", name)
	}
	return nil
}

func partKey(name, slot string, i int) string { return name + "." + slot + "." + strconv.Itoa(i) }

// Save implements Checkpoints.
func (c *KVCheckpoints) Save(ctx context.Context, name string, data []byte) error {
	if err := checkKVName(name); err != nil {
		return err
	}
	if len(data) > c.maxSize() {
		return fmt.Errorf("projections: checkpoint %s is %d bytes, over the %d-byte cap", name, len(data), c.maxSize())
	}
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestSpeed)
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	body := zipped.Bytes()
	parts := (len(body) + c.partSize - 1) / c.partSize
	if parts > maxKVParts {
		return fmt.Errorf("projections: checkpoint %s is %d bytes compressed, over %d parts", name, len(body), maxKVParts)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.slots[name]
	if !ok {
		h, err := c.head(ctx, name)
		switch {
		case err == nil:
			cur = h.Slot
		case errors.Is(err, ErrNoCheckpoint), errors.Is(err, ErrCheckpointCorrupt):
		default:
			return err
		}
	}
	slot := "a"
	if cur == "a" {
		slot = "b"
	}
	for i := range parts {
		end := min((i+1)*c.partSize, len(body))
		if _, err := c.kv.Put(ctx, partKey(name, slot, i), body[i*c.partSize:end]); err != nil {
			return fmt.Errorf("projections: checkpoint %s part %d: %w", name, i, err)
		}
	}
	sum := sha256.Sum256(body)
	h := kvHead{Format: kvHeadFormat, Slot: slot, Parts: parts, Size: len(body), SHA256: hex.EncodeToString(sum[:]), Encoding: kvEncoding}
	if c.sealer != nil {
		keyID, tag := c.sealer.Seal(h.sealInput(name))
		h.KeyID, h.Tag = keyID, hex.EncodeToString(tag)
	}
	head, _ := json.Marshal(h)
	if _, err := c.kv.Put(ctx, name, head); err != nil {
		return fmt.Errorf("projections: checkpoint %s head: %w", name, err)
	}
	c.slots[name] = slot
	return nil
}

func (c *KVCheckpoints) head(ctx context.Context, name string) (kvHead, error) {
	e, err := c.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return kvHead{}, ErrNoCheckpoint
	}
	if err != nil {
		return kvHead{}, fmt.Errorf("projections: checkpoint %s: %w", name, err)
	}
	var h kvHead
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return kvHead{}, fmt.Errorf("%w: %s head: %v", ErrCheckpointCorrupt, name, err)
	}
	if h.Format != kvHeadFormat || h.Encoding != kvEncoding || (h.Slot != "a" && h.Slot != "b") ||
		h.Parts < 0 || h.Parts > maxKVParts || h.Size < 0 {
		return kvHead{}, fmt.Errorf("%w: %s head %+v", ErrCheckpointCorrupt, name, h)
	}
	if c.sealer != nil {
		tag, err := hex.DecodeString(h.Tag)
		if err == nil {
			err = c.sealer.Verify(h.KeyID, tag, h.sealInput(name))
		}
		if err != nil {
			return kvHead{}, fmt.Errorf("%w: %s head is not authentic (rewritten without the event key?): %v", ErrCheckpointCorrupt, name, err)
		}
	}
	return h, nil
}

// Load implements Checkpoints.
func (c *KVCheckpoints) Load(ctx context.Context, name string) ([]byte, error) {
	if err := checkKVName(name); err != nil {
		return nil, err
	}
	h, err := c.head(ctx, name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.slots[name] = h.Slot
	c.mu.Unlock()
	body := make([]byte, 0, min(h.Size, c.maxSize())) // Size is checked against the parts below
	for i := range h.Parts {
		e, err := c.kv.Get(ctx, partKey(name, h.Slot, i))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("%w: %s part %d is missing", ErrCheckpointCorrupt, name, i)
		}
		if err != nil {
			return nil, fmt.Errorf("projections: checkpoint %s part %d: %w", name, i, err)
		}
		body = append(body, e.Value()...)
	}
	sum := sha256.Sum256(body)
	if len(body) != h.Size || hex.EncodeToString(sum[:]) != h.SHA256 {
		return nil, fmt.Errorf("%w: %s parts do not match their head (another writer, or a torn save)", ErrCheckpointCorrupt, name)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckpointCorrupt, name, err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, int64(c.maxSize())+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckpointCorrupt, name, err)
	}
	if len(data) > c.maxSize() {
		return nil, fmt.Errorf("%w: %s inflates past the %d-byte cap", ErrCheckpointCorrupt, name, c.maxSize())
	}
	return data, nil
}

func (c *KVCheckpoints) maxSize() int {
	if c.MaxSize <= 0 {
		return DefaultMaxCheckpointBytes
	}
	return c.MaxSize
}
