package eventstore

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func testKeyring(t testing.TB, current string, ids ...string) *Keyring {
	t.Helper()
	keys := map[string][]byte{}
	for _, id := range append([]string{current}, ids...) {
		keys[id] = bytes.Repeat([]byte(id[:1]), MinKeyBytes)
	}
	kr, err := NewKeyring(current, keys)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// sealedStores opens two stores on one memory stream: one holding the
// keyring, one (the "attacker's" view) with no sealer.
func sealedStore(t testing.TB, kr Sealer) (*nats.Conn, *Store) {
	t.Helper()
	e := startMem(t)
	nc := connect(t, e)
	return nc, openStore(t, nc, Config{Memory: true, Sealer: kr}, testRegistry())
}

// forge publishes a well-formed event the way Append would, but without
// the key: every header right, the tag missing or made up.
func forge(t testing.TB, nc *nats.Conn, subj string, prevSeq uint64, version int, typ string, data string, tag string) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subj)
	m.Data = []byte(data)
	m.Header.Set(HeaderEventID, NewEventID())
	m.Header.Set(HeaderEventType, typ)
	m.Header.Set(HeaderSchema, "1")
	m.Header.Set(HeaderVersion, strconv.Itoa(version))
	m.Header.Set(HeaderPrevSeq, strconv.FormatUint(prevSeq, 10))
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(prevSeq, 10))
	if tag != "" {
		m.Header.Set(HeaderKeyID, "k1")
		m.Header.Set(HeaderTag, tag)
	}
	ack, err := js.PublishMsg(testCtx(t), m)
	if err != nil {
		t.Fatalf("forge on %s: %v", subj, err)
	}
	return ack.Sequence
}

func TestAppendedEventsCarryATagThatLoadVerifies(t *testing.T) {
	kr := testKeyring(t, "k1")
	nc, s := sealedStore(t, kr)
	k := Key{"thing", "a"}
	pos := mustAppend(t, s, k, Position{}, noteEv("one", 1))
	pos = mustAppend(t, s, k, pos, noteEv("two", 2), noteEv("three", 3)) // an atomic batch
	recs, got := mustLoad(t, s, k)
	if len(recs) != 3 || got != pos {
		t.Fatalf("loaded %d records at %+v, want 3 at %+v", len(recs), got, pos)
	}
	js, _ := jetstream.New(nc)
	st, _ := js.Stream(testCtx(t), s.StreamName())
	raw, err := st.GetMsg(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get(HeaderKeyID) != "k1" || len(raw.Header.Get(HeaderTag)) != 64 {
		t.Fatalf("stored headers %v: want key id k1 and a hex HMAC-SHA256", raw.Header)
	}
}

func TestForgedEventQuarantinesItsAggregateOnLoad(t *testing.T) {
	for _, tc := range []struct{ name, tag string }{
		{"no tag", ""},
		{"made-up tag", strings.Repeat("ab", 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, s := sealedStore(t, testKeyring(t, "k1"))
			k := Key{"thing", "a"}
			pos := mustAppend(t, s, k, Position{}, noteEv("genuine", 1))
			seq := forge(t, nc, s.Subject(k), pos.Sequence, 2, evNoted, `{"text":"forged","n":5000000}`, tc.tag)

			_, _, err := s.Load(testCtx(t), k)
			var ie *IntegrityError
			if !errors.As(err, &ie) || !errors.Is(err, ErrIntegrity) || !errors.Is(err, ErrBadTag) {
				t.Fatalf("load after forgery: %v, want an IntegrityError for a bad tag", err)
			}
			if ie.Sequence != seq || ie.Key != k {
				t.Fatalf("violation names seq %d key %v, want seq %d key %v", ie.Sequence, ie.Key, seq, k)
			}
			// The aggregate cannot be written past the forgery either.
			if _, err := s.Append(testCtx(t), k, pos, noteEv("after", 2)); !errors.Is(err, ErrConflict) {
				t.Fatalf("append at the genuine position: %v, want a conflict", err)
			}
			vs, n := s.Violations()
			if n != 1 || len(vs) != 1 || vs[0].Sequence != seq {
				t.Fatalf("violations %+v (%d), want seq %d once", vs, n, seq)
			}
			// Other aggregates are untouched.
			mustAppend(t, s, Key{"thing", "b"}, Position{}, noteEv("fine", 1))
			mustLoad(t, s, Key{"thing", "b"})
		})
	}
}

func TestEventSignedWithAnotherKeyDoesNotVerify(t *testing.T) {
	e := startMem(t)
	other := openStore(t, connect(t, e), Config{Memory: true, Sealer: testKeyring(t, "k1")}, testRegistry())
	// Same key id, different secret: what a guessed or stale key produces.
	mine, _ := NewKeyring("k1", map[string][]byte{"k1": bytes.Repeat([]byte("z"), MinKeyBytes)})
	s := openStore(t, connect(t, e), Config{Memory: true, Sealer: mine}, testRegistry())
	k := Key{"thing", "a"}
	mustAppend(t, other, k, Position{}, noteEv("x", 1))
	if _, _, err := s.Load(testCtx(t), k); !errors.Is(err, ErrBadTag) {
		t.Fatalf("load of an event tagged with another key: %v, want ErrBadTag", err)
	}
}

func TestRotatedKeyringVerifiesOldEventsAndSignsWithTheNewKey(t *testing.T) {
	e := startMem(t)
	old := openStore(t, connect(t, e), Config{Memory: true, Sealer: testKeyring(t, "k1")}, testRegistry())
	k := Key{"thing", "a"}
	pos := mustAppend(t, old, k, Position{}, noteEv("old", 1))

	rotated := testKeyring(t, "k2", "k1") // k2 signs, k1 still verifies
	s := openStore(t, connect(t, e), Config{Memory: true, Sealer: rotated}, testRegistry())
	pos = mustAppend(t, s, k, pos, noteEv("new", 2))
	if recs, _ := mustLoad(t, s, k); len(recs) != 2 {
		t.Fatalf("loaded %d records, want 2", len(recs))
	}
	msg, err := s.directGet(testCtx(t), msgGetRequest{Seq: pos.Sequence})
	if err != nil || msg.Header.Get(HeaderKeyID) != "k2" {
		t.Fatalf("new event key id %q (%v), want k2", msg.Header.Get(HeaderKeyID), err)
	}
	// The old ring does not know k2: events signed after rotation are
	// refused by a process that was not given the new key.
	if _, _, err := old.Load(testCtx(t), k); !errors.Is(err, ErrBadTag) {
		t.Fatalf("old ring loading a k2 event: %v, want ErrBadTag", err)
	}
}

// A publish of a few bytes with an unknown type used to stop every reader
// of the log for good. Now it is quarantined: a reader that asks for it
// goes on past it, and one that does not is stopped with its sequence.
func TestReadsGoOnPastAQuarantinedEventWhenAsked(t *testing.T) {
	nc, s := sealedStore(t, testKeyring(t, "k1"))
	mustAppend(t, s, Key{"thing", "a"}, Position{}, noteEv("before", 1))
	m := nats.NewMsg(s.Subject(Key{"junk", "x"}))
	m.Data = []byte("garbage")
	m.Header.Set(HeaderEventType, "no.such.type")
	js, _ := jetstream.New(nc)
	ack, err := js.PublishMsg(testCtx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	bad := ack.Sequence
	mustAppend(t, s, Key{"thing", "b"}, Position{}, noteEv("after", 1))

	_, err = s.ReadAll(testCtx(t), 1, "", func(Record) error { return nil })
	var ie *IntegrityError
	if !errors.As(err, &ie) || ie.Sequence != bad {
		t.Fatalf("ReadAll without OnViolation: %v, want an IntegrityError at seq %d", err, bad)
	}

	var got []string
	var quarantined []uint64
	end, err := s.ReadAll(testCtx(t), 1, "", func(r Record) error {
		got = append(got, r.Key.ID)
		return nil
	}, OnViolation(func(v *IntegrityError) error {
		quarantined = append(quarantined, v.Sequence)
		return nil
	}))
	if err != nil || end != bad+1 {
		t.Fatalf("ReadAll with OnViolation: end %d, %v; want end %d", end, err, bad+1)
	}
	if strings.Join(got, ",") != "a,b" || len(quarantined) != 1 || quarantined[0] != bad {
		t.Fatalf("handled %v, quarantined %v; want a,b and [%d]", got, quarantined, bad)
	}

	ctx, cancel := context.WithCancel(testCtx(t))
	var consumed []string
	var cq []uint64
	done := make(chan error, 1)
	go func() {
		done <- s.Consume(ctx, "test-consumer", "", func(r Record) error {
			consumed = append(consumed, r.Key.ID)
			if r.Key.ID == "b" {
				cancel()
			}
			return nil
		}, OnViolation(func(v *IntegrityError) error {
			cq = append(cq, v.Sequence)
			return nil
		}))
	}()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume: %v", err)
	}
	if strings.Join(consumed, ",") != "a,b" || len(cq) != 1 || cq[0] != bad {
		t.Fatalf("consumed %v, quarantined %v; want a,b and [%d]", consumed, cq, bad)
	}
}

// A genuine event copied to the end of its subject (a replay meant to roll
// the aggregate back) carries a back pointer that no longer matches what
// the server checked at write time.
func TestReplayedGenuineEventDoesNotVerify(t *testing.T) {
	_, s := sealedStore(t, testKeyring(t, "k1"))
	k := Key{"thing", "a"}
	pos := mustAppend(t, s, k, Position{}, noteEv("one", 1))
	mustAppend(t, s, k, pos, noteEv("two", 2))
	genuine, err := s.directGet(testCtx(t), msgGetRequest{Seq: pos.Sequence})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.verifyTag(genuine); err != nil {
		t.Fatalf("genuine event: %v", err)
	}
	// The server refuses the copy with its expectation; without it, the
	// copy is stored, and the check catches it.
	replay := *genuine
	replay.Header = nats.Header{}
	for h, v := range genuine.Header {
		replay.Header[h] = v
	}
	replay.Header.Del(jetstream.ExpectedLastSubjSeqHeader)
	if err := s.verifyTag(&replay); !errors.Is(err, ErrBadTag) {
		t.Fatalf("replayed copy without the server-checked expectation: %v, want ErrBadTag", err)
	}
}

func TestKeyFileParsing(t *testing.T) {
	hexKey := strings.Repeat("ab", MinKeyBytes)
	kr, err := ParseKeyring([]byte("# weir event keys\nk2 " + hexKey + "\n\nk1 " + strings.Repeat("cd", MinKeyBytes) + "\n"))
	if err != nil || kr.CurrentKeyID() != "k2" {
		t.Fatalf("parse: %v (current %q), want k2 current", err, kr.CurrentKeyID())
	}
	for name, text := range map[string]string{
		"empty":      "# nothing\n",
		"short key":  "k1 " + strings.Repeat("ab", MinKeyBytes-1),
		"not hex":    "k1 " + strings.Repeat("zz", MinKeyBytes),
		"repeated":   "k1 " + hexKey + "\nk1 " + hexKey,
		"one field":  hexKey,
		"bad key id": "k:1 " + hexKey,
	} {
		if _, err := ParseKeyring([]byte(text)); err == nil {
			t.Errorf("%s: parsed, want an error", name)
		}
	}
}

// A writer that sees an append in flight and stores its own event under the
// same id in that slot (a forgery racing the ack) must not make the append
// look landed when its ack is lost: the slot holder's tag is not ours.
func TestAForgeryUnderAnInFlightEventIDDoesNotLookLanded(t *testing.T) {
	_, s := sealedStore(t, testKeyring(t, "k1"))
	k := Key{"thing", "a"}
	scripted(s, func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
		forged := &nats.Msg{Subject: msgs[0].Subject, Data: []byte(`{"text":"forged","n":5000000}`), Header: nats.Header{}}
		for h, v := range msgs[0].Header {
			forged.Header[h] = v
		}
		forged.Header.Del(HeaderTag)
		if _, err := real(ctx, []*nats.Msg{forged}); err != nil {
			return pubAck{}, err
		}
		return pubAck{}, nats.ErrTimeout // our ack "lost"
	})
	_, err := s.Append(testCtx(t), k, Position{}, noteEv("genuine", 1))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("append whose slot a forgery took under our id: %v, want a conflict", err)
	}
	if _, _, err := s.Load(testCtx(t), k); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("load: %v, want the forgery quarantined", err)
	}
}
