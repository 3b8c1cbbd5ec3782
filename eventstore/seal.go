package eventstore

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Headers carrying an event's authentication tag. The tag is an HMAC over
// everything a reader relies on (see sealInput); the key id names the key
// that made it, so keys can be rotated while old events keep verifying.
const (
	HeaderKeyID = "Weir-Key-Id"
	HeaderTag   = "Weir-Tag" // hex HMAC-SHA256
)

// Sealer authenticates what the store writes and checks what it reads.
// The store hands it opaque bytes (sealInput's encoding of an event); the
// Sealer knows nothing about events either, so the same Sealer can
// authenticate other derived data (checkpoints) under its own domain tag.
//
// msg is the caller's only for the call (the store builds it in a reused
// buffer): an implementation must not keep it.
type Sealer interface {
	// Seal returns the id of the signing key and the tag over msg.
	Seal(msg []byte) (keyID string, tag []byte)
	// Verify reports whether tag is the tag of msg under the key keyID.
	Verify(keyID string, tag, msg []byte) error
}

// ErrBadTag: a tag that is missing, made with an unknown key, or wrong.
var ErrBadTag = errors.New("eventstore: authentication tag does not verify")

// MinKeyBytes is the shortest secret a Keyring accepts.
const MinKeyBytes = 32

// Keyring is an HMAC-SHA256 Sealer: the current key signs, every key
// (current and older ones) verifies, so a key can be rotated by putting the
// new one first and keeping the old ones until nothing signed with them is
// left to read (in an append-only log, that is forever).
type Keyring struct {
	current string
	keys    map[string][]byte

	// macs holds, per key id, HMACs keyed with that key for reuse: every
	// event read or written is tagged or checked, and a new HMAC hashes
	// the key twice before the first byte of the message.
	macs map[string]*sync.Pool
}

// NewKeyring returns a keyring signing with the key currentID. keys maps
// key ids to secrets (at least MinKeyBytes each).
func NewKeyring(currentID string, keys map[string][]byte) (*Keyring, error) {
	if _, ok := keys[currentID]; !ok {
		return nil, fmt.Errorf("eventstore: keyring: current key %q is not in the ring", currentID)
	}
	kr := &Keyring{current: currentID, keys: make(map[string][]byte, len(keys)), macs: make(map[string]*sync.Pool, len(keys))}
	for id, k := range keys {
		if err := validHeaderValue(id); err != nil {
			return nil, fmt.Errorf("eventstore: keyring: key id %q: %v", id, err)
		}
		if len(k) < MinKeyBytes {
			return nil, fmt.Errorf("eventstore: keyring: key %q is %d bytes, need at least %d", id, len(k), MinKeyBytes)
		}
		key := bytes.Clone(k)
		kr.keys[id] = key
		kr.macs[id] = &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
	}
	return kr, nil
}

// ParseKeyring reads a key file: one key per line, "<key-id> <hex secret>",
// blank lines and lines starting with '#' ignored. The first key signs; the
// others only verify.
func ParseKeyring(data []byte) (*Keyring, error) {
	keys := map[string][]byte{}
	current := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("eventstore: key file line %d: want \"<key-id> <hex secret>\"", n)
		}
		secret, err := hex.DecodeString(fields[1])
		if err != nil {
			return nil, fmt.Errorf("eventstore: key file line %d: secret is not hex", n)
		}
		if _, dup := keys[fields[0]]; dup {
			return nil, fmt.Errorf("eventstore: key file line %d: key id %q repeated", n, fields[0])
		}
		keys[fields[0]] = secret
		if current == "" {
			current = fields[0]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eventstore: key file: %w", err)
	}
	if current == "" {
		return nil, errors.New("eventstore: key file holds no key")
	}
	return NewKeyring(current, keys)
}

// CurrentKeyID is the id of the signing key.
func (k *Keyring) CurrentKeyID() string { return k.current }

// Seal implements Sealer.
func (k *Keyring) Seal(msg []byte) (string, []byte) {
	return k.current, k.mac(k.current, msg)
}

// Verify implements Sealer.
func (k *Keyring) Verify(keyID string, tag, msg []byte) error {
	if _, ok := k.keys[keyID]; !ok {
		return fmt.Errorf("%w: unknown key id %q", ErrBadTag, keyID)
	}
	if !hmac.Equal(tag, k.mac(keyID, msg)) {
		return fmt.Errorf("%w: key %q", ErrBadTag, keyID)
	}
	return nil
}

func (k *Keyring) mac(keyID string, msg []byte) []byte {
	pool := k.macs[keyID]
	h := pool.Get().(hash.Hash)
	defer pool.Put(h)
	h.Reset()
	h.Write(msg)
	return h.Sum(nil)
}

// SealInput encodes parts unambiguously (each length-prefixed) behind a
// domain label, so that a tag made for one kind of data can never verify
// as another's.
func SealInput(domain string, parts ...[]byte) []byte {
	n := len(domain) + binary.MaxVarintLen64
	for _, p := range parts {
		n += len(p) + binary.MaxVarintLen64
	}
	return appendSealInput(make([]byte, 0, n), domain, parts...)
}

// appendSealInput appends SealInput's bytes to out.
func appendSealInput(out []byte, domain string, parts ...[]byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(domain)))
	out = append(out, domain...)
	for _, p := range parts {
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

// sealDomainEvent labels the tag input of stored events.
const sealDomainEvent = "weir-event-v1"

// eventSealInput is what an event's tag covers: its subject (so it cannot
// be moved to another aggregate), version and back pointer (so it cannot be
// moved within one), id, type, schema and payload, as the headers carry
// them.
//
// It appends to buf (a pooled buffer, see sealBufs): every event read or
// written builds one, and the buffer is dropped as soon as the tag is made
// or checked.
func eventSealInput(buf []byte, subject string, h interface{ Get(string) string }, data []byte) []byte {
	return appendSealInput(buf[:0], sealDomainEvent,
		[]byte(subject),
		[]byte(h.Get(HeaderVersion)),
		[]byte(h.Get(HeaderPrevSeq)),
		[]byte(h.Get(HeaderEventID)),
		[]byte(h.Get(HeaderEventType)),
		[]byte(h.Get(HeaderSchema)),
		data)
}

// verifyTag checks a stored event's tag. With no Sealer configured, every
// event passes (tests and tools that do not hold the key).
func (s *Store) verifyTag(m *storedMsg) error {
	if s.cfg.Sealer == nil {
		return nil
	}
	keyID, tagHex := m.Header.Get(HeaderKeyID), m.Header.Get(HeaderTag)
	if keyID == "" || tagHex == "" {
		return fmt.Errorf("%w: no %s/%s headers", ErrBadTag, HeaderKeyID, HeaderTag)
	}
	tag, err := hex.DecodeString(tagHex)
	if err != nil {
		return fmt.Errorf("%w: %s is not hex", ErrBadTag, HeaderTag)
	}
	// Our appends carry the expectation the server checked at write time
	// next to the back pointer; a copy of a genuine event replayed at the
	// end of its subject would have had to pass the same check, which the
	// server refuses, so a mismatch means the message was not written by
	// Append.
	if p := m.Header.Get(HeaderPrevSeq); p != "" && m.Header.Get(jetstream.ExpectedLastSubjSeqHeader) != p {
		return fmt.Errorf("%w: %s does not match the server-checked expectation", ErrBadTag, HeaderPrevSeq)
	}
	buf := sealBufs.Get().(*[]byte)
	defer sealBufs.Put(buf)
	*buf = eventSealInput(*buf, m.Subject, m.Header, m.Data)
	return s.cfg.Sealer.Verify(keyID, tag, *buf)
}

// sealBufs holds the buffers eventSealInput builds tag inputs in.
var sealBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
