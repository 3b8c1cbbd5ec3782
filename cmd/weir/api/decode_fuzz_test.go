package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
)

// FuzzDecodeRequest feeds arbitrary bodies to every request decoder of both
// transports and to the withdrawal request command on a real store. It
// checks that no decoder panics, that a body a decoder accepts uses only
// the schema's exact keys, and that a refused command appends nothing.
// `make fuzz` runs it for 5 s.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"operation_id":"f0220000-0000-4000-8000-000000000001","account":"acme","to_address":"TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC","amount":"1","asset":"USDT-TRC20"}`,
		`{"operation_id":"f0220000-0000-4000-8000-000000000002","account":"acme","to_address":"TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC","amount":"1","amount":"3"}`,
		`{"operation_id":"f0220000-0000-4000-8000-000000000003","account":"acme","to_address":"TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC","AMOUNT":"3"}`,
		`{"aſſet":"USDT-TRC20"}`,
		`{"id":"x"}`, `{"limit":10,"cursor":"abc"}`, `{"account":"a","credit_id":"c","amount":"1"}`,
		`{"amount":{"a":[1,{"b":null}]}}`, `[[[[{}]]]]`, `{"a":}`, ``, `{} {}`, `{"\u0061mount":"1"}`,
	} {
		f.Add([]byte(seed))
	}
	srv := eventstoretest.Start(f)
	ctx := context.Background()
	store := srv.Store(ctx, eventlog.NewRegistry())
	repo := sagas.NewRepo(store)
	ledger := sagas.NewLedger(repo, aggregate.Amount{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	o := &ops{intake: sagas.NewIntake(repo, ledger, nil)}
	if _, _, err := o.intake.Credit(ctx, sagas.CreditInput{Account: "acme", CreditID: "fuzz", Amount: []byte(`"1000000"`)}); err != nil {
		f.Fatal(err)
	}
	alice := Principal{Name: "alice", Roles: []Role{RoleRequester}}

	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []any{&requestBody{}, &creditBody{}, &idBody{}, &Page{}} {
			if decodeStrict(body, v) != nil {
				continue
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(body, &top); err != nil {
				t.Fatalf("accepted into %T, yet not a JSON object: %v", v, err)
			}
			names := jsonNames(reflect.TypeOf(v))
			for k := range top {
				if !names[k] {
					t.Fatalf("accepted into %T with key %q, not one of the schema's", v, k)
				}
			}
		}
		if trimmed := bytes.TrimSpace(body); json.Valid(trimmed) {
			_ = checkKeys(trimmed, jsonNames(reflect.TypeFor[PolicyView]()))
		}

		before, err := store.LastSequence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.request(ctx, alice, body); err != nil {
			after, err2 := store.LastSequence(ctx)
			if err2 != nil {
				t.Fatal(err2)
			}
			if after != before {
				t.Fatalf("refused (%v), yet the log grew from %d to %d", err, before, after)
			}
		}
	})
}
