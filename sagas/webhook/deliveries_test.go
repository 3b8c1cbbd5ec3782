package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/sagas/webhook"
)

// watchedKV records what a listing reads of the deliveries bucket.
type watchedKV struct {
	jetstream.KeyValue
	t       *testing.T
	mu      sync.Mutex
	gets    []string
	filters [][]string
}

func (w *watchedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	w.mu.Lock()
	w.gets = append(w.gets, key)
	w.mu.Unlock()
	return w.KeyValue.Get(ctx, key)
}

func (w *watchedKV) ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error) {
	w.mu.Lock()
	w.filters = append(w.filters, append([]string(nil), filters...)) // the bucket rewrites them in place
	w.mu.Unlock()
	return w.KeyValue.ListKeysFiltered(ctx, filters...)
}

func (w *watchedKV) ListKeys(context.Context, ...jetstream.WatchOpt) (jetstream.KeyLister, error) {
	w.t.Error("the listing lists every key of the bucket")
	return nil, fmt.Errorf("refused")
}

func (w *watchedKV) Keys(context.Context, ...jetstream.WatchOpt) ([]string, error) {
	w.t.Error("the listing lists every key of the bucket")
	return nil, fmt.Errorf("refused")
}

func (w *watchedKV) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	w.t.Error("the listing watches the whole bucket")
	return nil, fmt.Errorf("refused")
}

func (w *watchedKV) reset() ([]string, [][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g, f := w.gets, w.filters
	w.gets, w.filters = nil, nil
	return g, f
}

// TestDeliveriesPageThroughOneWebhookReadingOnlyItsRecords: three
// webhooks with 250, 600 and 0 delivery records stored as weir has always
// stored them (key "<id>.<20-digit WEIR_NOTIFY sequence>", interleaved
// sequences). Paging one webhook with limit 100 gives its 250 newest
// first in pages of 100, 100 and 50, each cursor continuing exactly where
// the last page ended, the last page's cursor empty; the listing names
// only that webhook's keys (one filtered key listing) and reads the values
// of the page's records alone, never another webhook's. A cursor in the
// middle, a limit larger than what is left, and the empty webhook work;
// a limit below 1 is refused.
func TestDeliveriesPageThroughOneWebhookReadingOnlyItsRecords(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	var ids []string
	for i := range 3 {
		h, err := w.svc.Register(ctx, webhook.RegisterInput{URL: fmt.Sprintf("http://127.0.0.1:9/hook%d", i), Events: []string{"withdrawal.state_changed"}, By: "olivia"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID)
	}
	kv, err := w.js.KeyValue(ctx, webhook.DeliveriesBucket)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{ids[0]: 250, ids[1]: 600}
	want := map[string][]uint64{}
	for seq := uint64(1); counts[ids[0]]+counts[ids[1]] > 0; seq++ {
		id := ids[seq%2]
		if counts[id] == 0 {
			id = ids[1-seq%2]
		}
		counts[id]--
		d := webhook.Delivery{WebhookID: id, EventID: fmt.Sprintf("ev%d", seq), NotifySeq: seq, Status: webhook.StatusDelivered, Attempts: 1}
		b, _ := json.Marshal(d)
		if _, err := kv.Put(ctx, fmt.Sprintf("%s.%020d", id, seq), b); err != nil {
			t.Fatal(err)
		}
		want[id] = append([]uint64{seq}, want[id]...) // newest first
	}
	watched := &watchedKV{t: t}
	webhook.WrapDeliveries(w.svc, func(kv jetstream.KeyValue) jetstream.KeyValue { watched.KeyValue = kv; return watched })

	for _, id := range ids[:2] {
		var got []uint64
		var before uint64
		for page := 0; ; page++ {
			ds, next, err := w.svc.Deliveries(ctx, id, 100, before)
			if err != nil {
				t.Fatal(err)
			}
			gets, filters := watched.reset()
			if len(filters) != 1 || len(filters[0]) != 1 || filters[0][0] != id+".*" {
				t.Fatalf("page %d listed keys with %q, want only %s.*", page, filters, id)
			}
			if len(gets) != len(ds) {
				t.Fatalf("page %d of %d deliveries read %d values", page, len(ds), len(gets))
			}
			for _, k := range gets {
				if !strings.HasPrefix(k, id+".") {
					t.Fatalf("listing %s read %s", id, k)
				}
			}
			for _, d := range ds {
				if d.WebhookID != id {
					t.Fatalf("listing %s gave %+v", id, d)
				}
				got = append(got, d.NotifySeq)
			}
			if next == 0 {
				break
			}
			if page == 10 {
				t.Fatalf("%s: still paging after %d pages", id, page)
			}
			if len(ds) != 100 || next != ds[len(ds)-1].NotifySeq {
				t.Fatalf("page %d: %d deliveries, next cursor %d", page, len(ds), next)
			}
			before = next
		}
		if fmt.Sprint(got) != fmt.Sprint(want[id]) {
			t.Fatalf("%s paged %d deliveries, want its %d newest first:\n got %v\nwant %v", id, len(got), len(want[id]), got, want[id])
		}
	}

	// From the middle, with room to spare: the rest, and no next page.
	mid := want[ids[0]][200]
	ds, next, err := w.svc.Deliveries(ctx, ids[0], 1000, mid)
	if err != nil || len(ds) != 49 || next != 0 || ds[0].NotifySeq != want[ids[0]][201] {
		t.Fatalf("after %d: %d deliveries, next %d, %v", mid, len(ds), next, err)
	}
	if ds, next, err := w.svc.Deliveries(ctx, ids[2], 100, 0); err != nil || len(ds) != 0 || next != 0 || ds == nil {
		t.Fatalf("the empty webhook: %v %d %v", ds, next, err)
	}
	if _, _, err := w.svc.Deliveries(ctx, ids[0], 0, 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
}
