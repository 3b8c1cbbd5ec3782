package eventstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startTail puts a Tail of size records in use on s and runs it until the
// test ends (or cancel is called).
func startTail(t *testing.T, s *Store, size int) (tail *Tail, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	tail, err := NewTail(ctx, s, size, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.UseTail(tail)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tail.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return tail, func() { cancel(); <-done }
}

// follower subscribes from `from` until it has handled the record at
// `until`, and reports what it was handed.
type follower struct {
	from, until uint64
	gate        chan struct{} // when set, the first record waits for it
	got         []Record
	quarantined []uint64
	done        chan error
}

func follow(ctx context.Context, s *Store, f *follower, opts ...ReadOption) {
	f.done = make(chan error, 1)
	stop := errors.New("reached until")
	go func() {
		err := s.Subscribe(ctx, f.from, "", func(r Record) error {
			if f.gate != nil && len(f.got) == 0 {
				<-f.gate
			}
			f.got = append(f.got, r)
			if r.Sequence >= f.until {
				return stop
			}
			return nil
		}, opts...)
		if errors.Is(err, stop) {
			err = nil
		}
		f.done <- err
	}()
}

// Followers reading through a Tail — one behind the ring from the start,
// one inside it, one at the end, one held up until the ring has moved past
// it — are handed exactly what a read of their own hands them: every
// record from their position, in order, none twice, byte for byte.
func TestFollowersThroughATailAreHandedWhatTheirOwnReadHandsThem(t *testing.T) {
	_, s := newMemStore(t)
	seedMixed(t, s, 10) // 20 records before the Tail starts
	startTail(t, s, 8)
	start := lastSeq(t, s)

	ctx := testCtx(t)
	const live = 40
	until := start + live
	fs := []*follower{
		{from: 1, until: until},
		{from: start - 3, until: until},
		{from: start + 1, until: until},
		{from: start + 1, until: until, gate: make(chan struct{})},
	}
	for _, f := range fs {
		follow(ctx, s, f)
	}
	k := Key{Type: "thing", ID: "live"}
	var pos Position
	for i := range live {
		pos = mustAppend(t, s, k, pos, noteEv("live", i))
	}
	// The held follower has its first record in hand; the ring (8) has
	// moved 32 records past it by now, so the rest it reads itself.
	close(fs[3].gate)

	for i, f := range fs {
		if err := <-f.done; err != nil {
			t.Fatalf("follower %d: %v", i, err)
		}
		want, _ := collect(t, s, f.from, "")
		if !reflect.DeepEqual(f.got, want) {
			t.Fatalf("follower %d from %d was handed %v, its own read hands %v", i, f.from, seqs(f.got), seqs(want))
		}
	}
}

// The point of the Tail: followers at the end of the log share one
// consumer on the server instead of holding one each.
func TestFollowersThroughATailShareOneConsumer(t *testing.T) {
	_, s := newMemStore(t)
	seedMixed(t, s, 2)
	startTail(t, s, 0)
	end := lastSeq(t, s)

	// The followers stay subscribed (a finished read removes its consumer)
	// until the count is taken.
	ctx, cancel := context.WithCancel(testCtx(t))
	const followers = 3
	reached := make(chan struct{}, followers)
	done := make(chan error, followers)
	for range followers {
		go func() {
			done <- s.Subscribe(ctx, end+1, "", func(r Record) error {
				if r.Sequence == end+3 {
					reached <- struct{}{}
				}
				return nil
			})
		}()
	}
	var pos Position
	for i := range 3 {
		pos = mustAppend(t, s, Key{Type: "thing", ID: "x"}, pos, noteEv("x", i))
	}
	for range followers {
		<-reached
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range followers {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("follower: %v", err)
		}
	}
	if info.State.Consumers != 1 {
		t.Fatalf("%d consumers on the stream for %d followers and a Tail, want the Tail's 1", info.State.Consumers, followers)
	}
}

// A record that does not verify reaches a follower through the Tail as it
// would through its own consumer: to OnViolation when given (the follower
// goes on), as the *IntegrityError that stops the read when not.
func TestAQuarantinedRecordReachesFollowersThroughTheTailAsOnTheirOwnRead(t *testing.T) {
	nc, s := sealedStore(t, testKeyring(t, "k1"))
	mustAppend(t, s, Key{"thing", "a"}, Position{}, noteEv("before", 1))
	startTail(t, s, 0)
	end := lastSeq(t, s)

	ctx := testCtx(t)
	lenient := &follower{from: end + 1, until: end + 2}
	strict := &follower{from: end + 1, until: end + 2}
	follow(ctx, s, lenient, OnViolation(func(v *IntegrityError) error {
		lenient.quarantined = append(lenient.quarantined, v.Sequence)
		return nil
	}))
	follow(ctx, s, strict)

	m := nats.NewMsg(s.Subject(Key{"thing", "forged"}))
	m.Data = []byte(`{"text":"forged"}`)
	m.Header.Set(HeaderEventType, evNoted)
	js, _ := jetstream.New(nc)
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Key{"thing", "b"}, Position{}, noteEv("after", 1))

	if err := <-lenient.done; err != nil {
		t.Fatal(err)
	}
	if len(lenient.got) != 1 || lenient.got[0].Key.ID != "b" || fmt.Sprint(lenient.quarantined) != fmt.Sprint([]uint64{ack.Sequence}) {
		t.Fatalf("handled %v, quarantined %v; want b, and [%d]", seqs(lenient.got), lenient.quarantined, ack.Sequence)
	}
	var ie *IntegrityError
	if err := <-strict.done; !errors.As(err, &ie) || ie.Sequence != ack.Sequence || len(strict.got) != 0 {
		t.Fatalf("without OnViolation: %v after %d records, want the IntegrityError at seq %d", err, len(strict.got), ack.Sequence)
	}
}

// When the Tail stops, followers go on with a consumer of their own from
// where they were: nothing appended afterwards is missed.
func TestFollowersGoOnAloneWhenTheTailStops(t *testing.T) {
	_, s := newMemStore(t)
	_, stopTail := startTail(t, s, 0)
	ctx := testCtx(t)
	k := Key{Type: "thing", ID: "t"}
	pos := mustAppend(t, s, k, Position{}, noteEv("first", 0))
	f := &follower{from: 1, until: 4}
	follow(ctx, s, f)
	stopTail()
	for i := 1; i < 4; i++ {
		pos = mustAppend(t, s, k, pos, noteEv("after", i))
	}
	if err := <-f.done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs(f.got)) != "[1 2 3 4]" {
		t.Fatalf("handed %v, want [1 2 3 4]", seqs(f.got))
	}
}

// A Tail whose consumers keep failing — the stream is gone — stops after
// tailGiveUp of them, saying why, and a follower waiting on it is not left
// waiting: it reads on its own, and that read's failure ends its Subscribe
// as it would have without a Tail.
func TestATailWhoseConsumersKeepFailingStopsAndItsFollowersReadAlone(t *testing.T) {
	_, s := newMemStore(t)
	seedMixed(t, s, 1)
	ctx := testCtx(t)
	tail, err := NewTail(ctx, s, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.UseTail(tail)
	end := lastSeq(t, s)
	followed := make(chan error, 1)
	go func() {
		followed <- s.Subscribe(ctx, end+1, "", func(Record) error { return nil })
	}()
	if err := s.js.DeleteStream(ctx, s.StreamName()); err != nil {
		t.Fatal(err)
	}
	if err := tail.Run(ctx); err == nil || !strings.Contains(err.Error(), "in a row failed") {
		t.Fatalf("Run = %v, want it to give up after %d failed consumers", err, tailGiveUp)
	}
	select {
	case err := <-followed:
		if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the follower's Subscribe = %v, want its own read's failure", err)
		}
	case <-ctx.Done():
		t.Fatal("the follower is still waiting on a Tail that stopped")
	}
}
