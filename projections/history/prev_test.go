package history_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/projections/history"
)

// runIndexer runs x until the log is indexed up to its current end, and
// leaves it running until stop is called.
func (r *rig) runIndexer(t *testing.T, x *history.Indexer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("indexer: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (r *rig) caughtUp(t *testing.T, xs ...*history.Indexer) {
	t.Helper()
	last, err := r.store.LastSequence(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, x := range xs {
		if err := x.WaitFor(ctx, last); err != nil {
			t.Fatalf("indexer did not reach %d: %v", last, err)
		}
	}
}

// An account's entries after the first this indexer wrote are chained
// without reading the stream for the account's last entry; a restarted
// indexer reads it once again.
func TestIndexerChainsAnAccountWithoutRereadingItsLastEntry(t *testing.T) {
	r := newRig(t)
	x := history.NewIndexer(r.store, r.js, r.stream, quiet())
	reads := history.CountLastReads(x)
	stop := r.runIndexer(t, x)
	var acme []string
	for range 5 {
		acme = append([]string{r.request(t, "acme", "alice")}, acme...)
		r.caughtUp(t, x)
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads of acme's last entry for 5 entries, want 1", n)
	}
	stop()
	y := history.NewIndexer(r.store, r.js, r.stream, quiet())
	yreads := history.CountLastReads(y)
	r.runIndexer(t, y)
	for range 2 {
		acme = append([]string{r.request(t, "acme", "alice")}, acme...)
	}
	r.caughtUp(t, y)
	if n := yreads.Load(); n != 1 {
		t.Fatalf("%d reads after a restart for 2 entries, want 1", n)
	}
	if got := ids(walk(t, history.NewReader(r.stream), "acme", 0, 0)); fmt.Sprint(got) != fmt.Sprint(acme) {
		t.Fatalf("acme, newest first:\n got %v\nwant %v", got, acme)
	}
}

// Another process indexes while this indexer waits: this one's next publish
// finds the index moved, and it starts again from the stream, forgetting
// the last entries it knew — acme's next entry names the other process's
// entry as its previous one, not the one this indexer wrote.
func TestIndexerForgetsWhatItKnewWhenTheIndexMoved(t *testing.T) {
	r := newRig(t)
	x := history.NewIndexer(r.store, r.js, r.stream, quiet())
	history.SetPause(x, 10*time.Millisecond)
	held, release := make(chan struct{}), make(chan struct{})
	var hold sync.Once
	history.WrapLastFor(x, func(ctx context.Context, subject string, read func(context.Context, string) (uint64, error)) (uint64, error) {
		if subject == history.Subject("zeta") {
			hold.Do(func() { close(held); <-release }) // the first time only
		}
		return read(ctx, subject)
	})
	r.runIndexer(t, x)
	a1 := r.request(t, "acme", "alice")
	r.caughtUp(t, x) // x knows acme's last entry
	z1 := r.request(t, "zeta", "alice")
	select {
	case <-held: // x is about to index z1
	case <-time.After(10 * time.Second):
		t.Fatal("the indexer never reached z1")
	}
	y := history.NewIndexer(r.store, r.js, r.stream, quiet())
	stopY := r.runIndexer(t, y)
	a2 := r.request(t, "acme", "alice")
	r.caughtUp(t, y) // y indexed z1 and a2
	stopY()
	close(release)
	a3 := r.request(t, "acme", "alice")
	r.caughtUp(t, x)
	rd := history.NewReader(r.stream)
	if got, want := ids(walk(t, rd, "acme", 0, 0)), []string{a3, a2, a1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("acme, newest first:\n got %v\nwant %v", got, want)
	}
	if got, want := ids(walk(t, rd, "", 0, 0)), []string{a3, a2, z1, a1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("all, newest first:\n got %v\nwant %v", got, want)
	}
}
