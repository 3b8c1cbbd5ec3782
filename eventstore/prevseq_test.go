package eventstore

import "testing"

// TestRecordsCarryTheirBackPointer: every record read, forward or by Load,
// says where its aggregate's previous event is, so a forward reader (the
// audit) can check the chain it did not walk.
func TestRecordsCarryTheirBackPointer(t *testing.T) {
	_, s := newMemStore(t)
	things, others := seedMixed(t, s, 3)
	got, _ := collect(t, s, 1, "")
	prev := map[string]uint64{}
	for _, r := range got {
		if r.PrevSequence != prev[r.Key.ID] {
			t.Fatalf("%s seq %d points back to %d, want %d", r.Key.ID, r.Sequence, r.PrevSequence, prev[r.Key.ID])
		}
		prev[r.Key.ID] = r.Sequence
	}
	recs, _ := mustLoad(t, s, Key{Type: "thing", ID: "t"})
	for i, r := range recs {
		want := uint64(0)
		if i > 0 {
			want = things[i-1]
		}
		if r.PrevSequence != want {
			t.Fatalf("Load: version %d points back to %d, want %d", r.AggregateVersion, r.PrevSequence, want)
		}
	}
	if len(others) != 3 || prev["o"] != others[2] {
		t.Fatalf("others %v, last seen %d", others, prev["o"])
	}
}
