package eventstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// seedMixed appends to two aggregate types, interleaved, and returns the
// sequences of each type's events in stream order.
func seedMixed(t *testing.T, s *Store, rounds int) (things, others []uint64) {
	t.Helper()
	var thingPos, otherPos Position
	tk, ok := Key{Type: "thing", ID: "t"}, Key{Type: "other", ID: "o"}
	for i := 0; i < rounds; i++ {
		thingPos = mustAppend(t, s, tk, thingPos, noteEv("thing", i))
		things = append(things, thingPos.Sequence)
		otherPos = mustAppend(t, s, ok, otherPos, noteEv("other", i))
		others = append(others, otherPos.Sequence)
	}
	return things, others
}

func collect(t *testing.T, s *Store, from uint64, filter string) ([]Record, uint64) {
	t.Helper()
	var got []Record
	last, err := s.ReadAll(testCtx(t), from, filter, func(r Record) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadAll(%d, %q): %v", from, filter, err)
	}
	return got, last
}

func seqs(recs []Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Sequence
	}
	return out
}

func TestReadAllFromAPositionWithTypeFilter(t *testing.T) {
	_, s := newMemStore(t)
	things, others := seedMixed(t, s, 5)
	end := lastSeq(t, s)

	for _, tc := range []struct {
		name   string
		from   uint64
		filter string
		want   []uint64
	}{
		{"everything from 0", 0, "", interleave(things, others)},
		{"everything from 1", 1, "", interleave(things, others)},
		{"things only", 0, "thing", things},
		{"others from the middle", things[2], "other", others[2:]},
		{"from the last sequence", end, "", []uint64{end}},
		{"filter with nothing after from", others[4], "thing", nil},
		{"type that never occurs", 0, "absent", nil},
		{"past the end", end + 1, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, last := collect(t, s, tc.from, tc.filter)
			if fmt.Sprint(seqs(got)) != fmt.Sprint(tc.want) {
				t.Fatalf("read %v, want %v", seqs(got), tc.want)
			}
			wantLast := end
			if tc.from > end {
				wantLast = tc.from - 1
			}
			if last != wantLast {
				t.Fatalf("lastSeq %d, want %d", last, wantLast)
			}
			for _, r := range got {
				if tc.filter != "" && r.Key.Type != tc.filter {
					t.Fatalf("filter %q delivered %+v", tc.filter, r.Key)
				}
				if r.EventID == "" || r.AggregateVersion == 0 || r.Time.IsZero() {
					t.Fatalf("incomplete record %+v", r)
				}
			}
		})
	}

	t.Run("handler error stops and reports the last handled sequence", func(t *testing.T) {
		boom := errors.New("boom")
		n := 0
		last, err := s.ReadAll(testCtx(t), 0, "thing", func(Record) error {
			n++
			if n == 3 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) || last != things[1] {
			t.Fatalf("ReadAll = %d, %v; want %d, boom", last, err, things[1])
		}
	})
}

func interleave(a, b []uint64) []uint64 {
	var out []uint64
	for i := range a {
		out = append(out, a[i], b[i])
	}
	return out
}

func TestSubscribeDeliversBacklogThenLiveEventsInOrder(t *testing.T) {
	_, s := newMemStore(t)
	things, _ := seedMixed(t, s, 3)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()

	// The handler appends the live events itself once the backlog is in, so
	// the test needs no timing: it ends when the last expected record
	// arrives.
	tk := Key{Type: "thing", ID: "t"}
	_, pos := mustLoad(t, s, tk)
	var got []uint64
	var live []uint64
	stop := errors.New("enough")
	err := s.Subscribe(ctx, things[1], "thing", func(r Record) error {
		got = append(got, r.Sequence)
		if r.Key != tk {
			return fmt.Errorf("filter leaked %+v", r.Key)
		}
		if len(got) == 2 { // backlog: things[1], things[2]
			for i := 0; i < 2; i++ {
				var err error
				if pos, err = s.Append(ctx, tk, pos, noteEv("live", i)); err != nil {
					return err
				}
				live = append(live, pos.Sequence)
				// Noise of another type must not be delivered.
				if _, err := s.Append(ctx, Key{Type: "other", ID: fmt.Sprint("live", i)}, Position{}, noteEv("noise", i)); err != nil {
					return err
				}
			}
		}
		if len(got) == 4 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Subscribe returned %v, want the handler's error", err)
	}
	want := append([]uint64{things[1], things[2]}, live...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// Subscribe returns when its context is done, while it waits for the next
// record: on a consumer of its own and through a Tail (tail_test.go).
func TestSubscribeStopsWhenContextIsDone(t *testing.T) {
	for _, viaTail := range []bool{false, true} {
		t.Run(fmt.Sprintf("through a Tail %v", viaTail), func(t *testing.T) {
			_, s := newMemStore(t)
			seedMixed(t, s, 1)
			if viaTail {
				startTail(t, s, 0)
			}
			ctx, cancel := context.WithCancel(testCtx(t))
			n := 0
			err := s.Subscribe(ctx, 0, "", func(Record) error {
				if n++; n == 2 {
					cancel() // caught up
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) || n != 2 {
				t.Fatalf("Subscribe = %v after %d records, want context.Canceled after 2", err, n)
			}
		})
	}
}

func TestReadsLeaveNoConsumersBehind(t *testing.T) {
	_, s := newMemStore(t)
	seedMixed(t, s, 2)
	for _, filter := range []string{"", "thing", "absent"} {
		collect(t, s, 0, filter)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	_ = s.Subscribe(ctx, 0, "", func(Record) error { cancel(); return nil })

	info, err := s.stream.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Fatalf("%d consumers left on the stream", info.State.Consumers)
	}
}

func TestSubscribeFromPastTheEndWaitsForTheNextEvent(t *testing.T) {
	_, s := newMemStore(t)
	seedMixed(t, s, 2)
	end := lastSeq(t, s)
	ctx := testCtx(t)
	done := make(chan error, 1)
	var got Record
	go func() {
		stop := errors.New("got it")
		err := s.Subscribe(ctx, end+1, "", func(r Record) error { got = r; return stop })
		if errors.Is(err, stop) {
			err = nil
		}
		done <- err
	}()
	// Whether the consumer exists yet or not, this event gets sequence
	// end+1, so it is the one delivered.
	pos := mustAppend(t, s, Key{Type: "thing", ID: "new"}, Position{}, Event{Type: evOpened})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.Sequence != pos.Sequence || pos.Sequence != end+1 {
		t.Fatalf("delivered seq %d, appended %d, end was %d", got.Sequence, pos.Sequence, end)
	}
}

// LoadLatest reads the subject's last event through the stream leader and
// answers exactly what Load answers on an up-to-date server, including for
// an aggregate with no events.
func TestLoadLatestEqualsLoadThroughTheLeader(t *testing.T) {
	_, s := newMemStore(t)
	seedMixed(t, s, 4)
	for _, k := range []Key{{Type: "thing", ID: "t"}, {Type: "other", ID: "o"}, {Type: "thing", ID: "none"}} {
		recs, pos, err := s.Load(testCtx(t), k)
		if err != nil {
			t.Fatal(err)
		}
		latest, lpos, err := s.LoadLatest(testCtx(t), k)
		if err != nil {
			t.Fatal(err)
		}
		if pos != lpos || fmt.Sprint(seqs(recs)) != fmt.Sprint(seqs(latest)) {
			t.Fatalf("%v: Load %v %v, LoadLatest %v %v", k, pos, seqs(recs), lpos, seqs(latest))
		}
		for i := range recs {
			if string(recs[i].Payload) != string(latest[i].Payload) || !recs[i].Time.Equal(latest[i].Time) {
				t.Fatalf("%v event %d differs", k, i+1)
			}
		}
	}
}
