package history_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/projections/history"
	"github.com/weir-payouts/weir/sagas"
)

const addr = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"

type rig struct {
	store  *eventstore.Store
	js     jetstream.JetStream
	stream jetstream.Stream
	intake *sagas.Intake
}

func newRig(t *testing.T) *rig {
	t.Helper()
	emb := eventstoretest.Start(t)
	nc := emb.Conn()
	store := emb.StoreOn(t.Context(), nc, eventlog.NewRegistry())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := history.EnsureStream(t.Context(), js, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	repo := sagas.NewRepo(store)
	ledger := sagas.NewLedger(repo, aggregate.Amount{}, nil, quiet())
	return &rig{store: store, js: js, stream: stream, intake: sagas.NewIntake(repo, ledger, nil)}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// request appends a withdrawal request (rejected for want of funds: the
// index lists ended withdrawals too).
func (r *rig) request(t *testing.T, account, by string) string {
	t.Helper()
	id := uuid.NewString()
	if _, _, err := r.intake.Request(t.Context(), sagas.RequestInput{OperationID: id, Account: account, ToAddress: addr,
		Amount: []byte(`"5"`), Asset: "USDT-TRC20", By: by}); err != nil {
		t.Fatal(err)
	}
	return id
}

// index runs an indexer until it has handled the whole log, then stops it.
func (r *rig) index(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	x := history.NewIndexer(r.store, r.js, r.stream, quiet())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	last, err := r.store.LastSequence(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if err := x.WaitFor(wctx, last); err != nil {
		t.Fatalf("indexer did not reach %d: %v", last, err)
	}
	cancel()
	<-done
}

func walk(t *testing.T, r *history.Reader, account string, before uint64, n int) []history.Entry {
	t.Helper()
	var out []history.Entry
	err := r.Walk(t.Context(), account, before, func(e history.Entry) (bool, error) {
		out = append(out, e)
		return n > 0 && len(out) == n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ids(es []history.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestIndexListsEveryWithdrawalOnceNewestFirstAcrossRestarts(t *testing.T) {
	r := newRig(t)
	var all, acme []string
	for i := range 6 {
		acct := "acme"
		if i%2 == 1 {
			acct = "zeta"
		}
		id := r.request(t, acct, "alice")
		all = append([]string{id}, all...)
		if acct == "acme" {
			acme = append([]string{id}, acme...)
		}
	}
	r.index(t)
	// A restarted indexer resumes after the last entry: nothing twice.
	more := r.request(t, "acme", "dave")
	all, acme = append([]string{more}, all...), append([]string{more}, acme...)
	r.index(t)
	r.index(t)

	rd := history.NewReader(r.stream)
	if got := ids(walk(t, rd, "", 0, 0)); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("all, newest first:\n got %v\nwant %v", got, all)
	}
	if got := ids(walk(t, rd, "acme", 0, 0)); fmt.Sprint(got) != fmt.Sprint(acme) {
		t.Fatalf("acme, newest first:\n got %v\nwant %v", got, acme)
	}
	// Paging: strictly before the last entry seen.
	first := walk(t, rd, "acme", 0, 2)
	rest := walk(t, rd, "acme", first[1].Seq, 0)
	if got := ids(append(first, rest...)); fmt.Sprint(got) != fmt.Sprint(acme) {
		t.Fatalf("acme in pages: %v, want %v", got, acme)
	}
	firstAll := walk(t, rd, "", 0, 3)
	if got := ids(append(firstAll, walk(t, rd, "", firstAll[2].Seq, 0)...)); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("all in pages: %v, want %v", got, all)
	}
	if e := walk(t, rd, "", 0, 1)[0]; e.Account != "acme" || e.RequestedBy != "dave" || e.RequestedAt.IsZero() {
		t.Fatalf("newest entry %+v", e)
	}
	// A cursor of another account's entry is refused for this account.
	zeta := walk(t, rd, "zeta", 0, 1)
	if err := rd.Walk(t.Context(), "acme", zeta[0].Seq, func(history.Entry) (bool, error) { return false, nil }); err == nil {
		t.Fatal("a zeta cursor was accepted for acme")
	}
}
