package notify_test

import (
	"strconv"
	"testing"

	"github.com/weir-payouts/weir/sagas/notify"
)

// Whether a backlog goes out in batches depends on how far the log is
// ahead of the sender (TestAQueuedBacklogGoesOutAsOneBatch pins that);
// whatever it is, each state change is announced once, in log order.
func TestRacingBatchingPublishersAnnounceEachStateChangeOnceInLogOrder(t *testing.T) {
	h := newHarness(t)
	h.credit("acme", "1000")
	const n = 60
	for range n {
		h.request("acme", "1")
	}
	// Two publishers race over the backlog: each batch expects the end of
	// the stream it read, so one of them stores it and the other re-reads.
	pa, stopA := h.run((*notify.Publisher).UseBatches)
	pb, stopB := h.run((*notify.Publisher).UseBatches)
	h.caughtUp(pa)
	h.caughtUp(pb)
	stopA()
	stopB()

	msgs := h.all()
	if len(msgs) != n {
		t.Fatalf("%d notifications for %d requests", len(msgs), n)
	}
	var last uint64
	ids := map[string]bool{}
	for _, m := range msgs {
		src, err := strconv.ParseUint(m.Header.Get(notify.HeaderSourceSeq), 10, 64)
		if err != nil || src <= last {
			t.Fatalf("message %d announces log seq %d after %d (%v)", m.Sequence, src, last, err)
		}
		last = src
		id := m.Header.Get("Nats-Msg-Id")
		if ids[id] {
			t.Fatalf("event %s announced twice", id)
		}
		ids[id] = true
	}
	if got := pa.Published() + pb.Published(); got != n {
		t.Errorf("the publishers count %d published, want %d", got, n)
	}
}
