package eventstore

import (
	"errors"
	"testing"
)

// LoadSince returns exactly the events after the snapshot's position, with
// the same current position Load gives, whether the newer events are zero,
// one or several (including a batch, whose members carry no back pointer).
func TestLoadSinceReturnsOnlyTheEventsAfterTheSnapshot(t *testing.T) {
	_, s := newMemStore(t)
	k := Key{Type: "thing", ID: "t"}
	seedMixed(t, s, 4) // other aggregates interleaved, and thing/t's first 4
	full, pos, err := s.Load(testCtx(t), k)
	if err != nil {
		t.Fatal(err)
	}
	for v := 0; v <= len(full); v++ {
		var since Position
		if v > 0 {
			since = Position{Sequence: full[v-1].Sequence, Version: uint64(v)}
		}
		for _, latest := range []bool{false, true} {
			recs, got, err := s.LoadSince(testCtx(t), k, since, latest)
			if err != nil {
				t.Fatalf("since %+v latest %v: %v", since, latest, err)
			}
			if got != pos || len(recs) != len(full)-v {
				t.Fatalf("since %+v: %d records at %+v, want %d at %+v", since, len(recs), got, len(full)-v, pos)
			}
			for i, r := range recs {
				if r.EventID != full[v+i].EventID {
					t.Fatalf("since %+v: record %d is %s, want %s", since, i, r.EventID, full[v+i].EventID)
				}
			}
		}
	}
	// A batch after the snapshot: its later member has no back pointer.
	pos2 := mustAppend(t, s, k, pos, noteEv("a", 1), noteEv("b", 2))
	recs, got, err := s.LoadSince(testCtx(t), k, pos, false)
	if err != nil || got != pos2 || len(recs) != 2 || payloadNote(t, recs[1]).Text != "b" {
		t.Fatalf("after a batch: %d records at %+v, %v; want 2 at %+v", len(recs), got, err, pos2)
	}
}

// A snapshot that does not describe the log — a position the aggregate's
// chain does not pass through, one beyond its end, or one of an aggregate
// that has no events — is refused with ErrSnapshotMismatch, never folded.
func TestLoadSinceRefusesASnapshotTheLogDoesNotPassThrough(t *testing.T) {
	_, s := newMemStore(t)
	k := Key{Type: "thing", ID: "t"}
	things, others := seedMixed(t, s, 3)
	for name, since := range map[string]Position{
		"wrong sequence for the version": {Sequence: others[1], Version: 2},
		"version beyond the end":         {Sequence: things[2] + 10, Version: 7},
		"last version at another seq":    {Sequence: others[2], Version: 3},
	} {
		if _, _, err := s.LoadSince(testCtx(t), k, since, false); !errors.Is(err, ErrSnapshotMismatch) {
			t.Errorf("%s: err %v, want ErrSnapshotMismatch", name, err)
		}
	}
	if _, _, err := s.LoadSince(testCtx(t), Key{Type: "thing", ID: "none"}, Position{Sequence: 1, Version: 1}, false); !errors.Is(err, ErrSnapshotMismatch) {
		t.Errorf("empty aggregate: err %v, want ErrSnapshotMismatch", err)
	}
}
