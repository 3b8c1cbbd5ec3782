package eventstore

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// renamed is the test event whose schema evolves:
// v1 {"name": "..."} -> v2 {"first": "...", "last": "..."} -> v3 adds "display".
const evRenamed = "renamed"

func upV1toV2(p json.RawMessage) (json.RawMessage, error) {
	var v1 struct{ Name string }
	if err := json.Unmarshal(p, &v1); err != nil {
		return nil, err
	}
	first, last, _ := strings.Cut(v1.Name, " ")
	return json.Marshal(map[string]string{"first": first, "last": last})
}

func upV2toV3(p json.RawMessage) (json.RawMessage, error) {
	var v2 map[string]string
	if err := json.Unmarshal(p, &v2); err != nil {
		return nil, err
	}
	v2["display"] = v2["first"] + " " + v2["last"]
	return json.Marshal(v2)
}

func registryAt(schema int, upcasters bool) *Registry {
	r := testRegistry()
	r.Register(evRenamed, schema)
	if upcasters && schema >= 2 {
		r.Upcaster(evRenamed, 1, upV1toV2)
	}
	if upcasters && schema >= 3 {
		r.Upcaster(evRenamed, 2, upV2toV3)
	}
	return r
}

func TestOldSchemasAreUpcastOnRead(t *testing.T) {
	e := startMem(t)
	nc := connect(t, e)
	k := Key{Type: "person", ID: "p1"}

	// Written by an old binary at schema 1, then by a newer one at schema 2.
	v1 := openStore(t, nc, Config{Memory: true}, registryAt(1, false))
	at := mustAppend(t, v1, k, Position{}, Event{Type: evRenamed, Data: map[string]string{"name": "Ada Lovelace"}})
	v2 := openStore(t, nc, Config{Memory: true}, registryAt(2, true))
	mustAppend(t, v2, k, at, Event{Type: evRenamed, Data: map[string]string{"first": "Grace", "last": "Hopper"}})

	// The current binary (schema 3) reads both at schema 3.
	v3 := openStore(t, nc, Config{Memory: true}, registryAt(3, true))
	recs, _ := mustLoad(t, v3, k)
	want := []struct {
		stored  int
		display string
	}{{1, "Ada Lovelace"}, {2, "Grace Hopper"}}
	for i, r := range recs {
		var p map[string]string
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if r.SchemaVersion != 3 || r.StoredSchema != want[i].stored || p["display"] != want[i].display {
			t.Errorf("record %d: schema %d (stored %d), payload %s", i, r.SchemaVersion, r.StoredSchema, r.Payload)
		}
	}

	// Subscriptions upcast the same way.
	var seen []int
	if _, err := v3.ReadAll(testCtx(t), 0, "person", func(r Record) error {
		if r.SchemaVersion != 3 {
			t.Errorf("ReadAll record at schema %d", r.SchemaVersion)
		}
		seen = append(seen, r.StoredSchema)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("ReadAll saw %v", seen)
	}
}

func TestUnreadableEventsStopReadsLoudly(t *testing.T) {
	e := startMem(t)
	nc := connect(t, e)
	k := Key{Type: "person", ID: "p1"}
	newer := openStore(t, nc, Config{Memory: true}, registryAt(3, true))
	mustAppend(t, newer, k, Position{}, Event{Type: evRenamed, Data: map[string]string{"first": "a", "last": "b", "display": "a b"}})

	for _, tc := range []struct {
		name string
		reg  *Registry
		want error
	}{
		{"schema newer than known", registryAt(2, true), ErrUnknownSchema},
		{"type not registered", testRegistry(), ErrUnknownEventType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, nc, Config{Memory: true}, tc.reg)
			if _, _, err := s.Load(testCtx(t), k); !errors.Is(err, tc.want) {
				t.Errorf("Load: %v, want %v", err, tc.want)
			}
			called := false
			_, err := s.ReadAll(testCtx(t), 0, "", func(Record) error { called = true; return nil })
			if !errors.Is(err, tc.want) || called {
				t.Errorf("ReadAll: %v (handler called %v), want %v and no delivery", err, called, tc.want)
			}
			err = s.Subscribe(testCtx(t), 0, "", func(Record) error { called = true; return nil })
			if !errors.Is(err, tc.want) || called {
				t.Errorf("Subscribe: %v (handler called %v), want %v and no delivery", err, called, tc.want)
			}
		})
	}

	t.Run("missing upcaster step", func(t *testing.T) {
		old := openStore(t, nc, Config{Memory: true}, registryAt(1, false))
		k2 := Key{Type: "person", ID: "p2"}
		mustAppend(t, old, k2, Position{}, Event{Type: evRenamed, Data: map[string]string{"name": "x y"}})
		gap := testRegistry()
		gap.Register(evRenamed, 3)
		gap.Upcaster(evRenamed, 2, upV2toV3) // 1 -> 2 missing
		s := openStore(t, nc, Config{Memory: true}, gap)
		if _, _, err := s.Load(testCtx(t), k2); !errors.Is(err, ErrUnknownSchema) {
			t.Errorf("Load: %v, want ErrUnknownSchema", err)
		}
	})

	t.Run("failing upcaster", func(t *testing.T) {
		old := openStore(t, nc, Config{Memory: true}, registryAt(1, false))
		k3 := Key{Type: "person", ID: "p3"}
		mustAppend(t, old, k3, Position{}, Event{Type: evRenamed, Data: "not an object"})
		s := openStore(t, nc, Config{Memory: true}, registryAt(2, true))
		if _, _, err := s.Load(testCtx(t), k3); err == nil {
			t.Error("Load succeeded although the upcaster failed")
		}
	})
}

func TestUnknownTypeIsRefusedOnAppendWithNothingAppended(t *testing.T) {
	_, s := newMemStore(t)
	k := Key{Type: "thing", ID: "u"}
	at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
	before := lastSeq(t, s)
	for _, evs := range [][]Event{
		{{Type: "never-registered"}},
		{noteEv("fine", 1), {Type: "never-registered"}, noteEv("fine", 2)},
	} {
		if _, err := s.Append(testCtx(t), k, at, evs...); !errors.Is(err, ErrUnknownEventType) {
			t.Fatalf("append %d events with an unknown type: %v", len(evs), err)
		}
	}
	if after := lastSeq(t, s); after != before {
		t.Fatalf("stream moved from %d to %d", before, after)
	}
}

func TestRegistryWiringMistakesPanic(t *testing.T) {
	for name, f := range map[string]func(r *Registry){
		"duplicate type":            func(r *Registry) { r.Register(evOpened, 2) },
		"schema zero":               func(r *Registry) { r.Register("z", 0) },
		"type with space":           func(r *Registry) { r.Register("a b", 1) },
		"empty type":                func(r *Registry) { r.Register("", 1) },
		"upcaster for unknown type": func(r *Registry) { r.Upcaster("nope", 1, upV1toV2) },
		"upcaster from current":     func(r *Registry) { r.Upcaster(evOpened, 1, upV1toV2) },
		"duplicate upcaster": func(r *Registry) {
			r.Register("x", 3)
			r.Upcaster("x", 1, upV1toV2)
			r.Upcaster("x", 1, upV1toV2)
		},
		"nil upcaster": func(r *Registry) { r.Register("y", 2); r.Upcaster("y", 1, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f(testRegistry())
		})
	}
}
