package eventstore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Benchmarks put the store next to the raw JetStream calls it is built on,
// measured in the same run on the same kind of stream:
//
//	go test -run '^$' -bench . -benchtime 2000x ./eventstore
//
// Targets (read the figures, nothing here asserts timing): Append >= 70% of
// raw publish-with-expectation throughput; Load of a 10-event aggregate
// within 1.5x between 1k and 100k aggregates in the stream.

func TestMain(m *testing.M) {
	code := m.Run()
	closeLoadFixtures()
	os.Exit(code)
}

var benchPayload = note{Text: "withdraw 125.000000 to TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", N: 125000000}

func benchStore(b *testing.B, memory bool) (*Embedded, *Store) {
	b.Helper()
	cfg := EmbeddedConfig{Memory: memory}
	if !memory {
		cfg.StoreDir = b.TempDir()
	}
	e, err := StartEmbedded(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Shutdown)
	nc, err := e.Connect()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return e, openStore(b, nc, Config{Memory: memory}, testRegistry())
}

func storages() []struct {
	name   string
	memory bool
} {
	return []struct {
		name   string
		memory bool
	}{{"memory", true}, {"file", false}}
}

// BenchmarkAppend: one event per append, each at the position the previous
// one returned (the hot path of a decider loop).
func BenchmarkAppend(b *testing.B) {
	for _, st := range storages() {
		b.Run(st.name, func(b *testing.B) {
			_, s := benchStore(b, st.memory)
			ctx := context.Background()
			k := Key{Type: "bench", ID: "append"}
			var at Position
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pos, err := s.Append(ctx, k, at, Event{Type: evNoted, Data: benchPayload})
				if err != nil {
					b.Fatal(err)
				}
				at = pos
			}
		})
	}
}

// BenchmarkRawPublishExpected: what Append is built on — a JetStream publish
// with Nats-Expected-Last-Subject-Sequence and Nats-Msg-Id, payload already
// encoded, no registry, no headers of ours.
func BenchmarkRawPublishExpected(b *testing.B) {
	for _, st := range storages() {
		b.Run(st.name, func(b *testing.B) {
			_, s := benchStore(b, st.memory)
			ctx := context.Background()
			subj := s.Subject(Key{Type: "bench", ID: "raw"})
			data, err := encodePayload(benchPayload)
			if err != nil {
				b.Fatal(err)
			}
			var last uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ack, err := s.js.Publish(ctx, subj, data,
					jetstream.WithExpectLastSequencePerSubject(last),
					jetstream.WithMsgID(strconv.Itoa(i)))
				if err != nil {
					b.Fatal(err)
				}
				last = ack.Sequence
			}
		})
	}
}

// loadFixture is a memory stream with `aggregates` one-event aggregates and
// loadTargets ten-event aggregates whose events are spread evenly through
// the stream — the worst case for any read that scans forward by subject.
type loadFixture struct {
	e       *Embedded
	nc      *nats.Conn
	s       *Store
	targets []Key
}

const loadTargets = 16

var (
	loadFixturesMu sync.Mutex
	loadFixtures   = map[int]*loadFixture{}
)

func closeLoadFixtures() {
	loadFixturesMu.Lock()
	defer loadFixturesMu.Unlock()
	for n, f := range loadFixtures {
		f.nc.Close()
		f.e.Shutdown()
		delete(loadFixtures, n)
	}
}

// getLoadFixture keeps one fixture alive at a time. The embedded memory
// store lives in this process's heap, so a 100k-message stream left running
// would tax every later benchmark with garbage-collection work that has
// nothing to do with the code measured.
func getLoadFixture(b *testing.B, aggregates int) *loadFixture {
	b.Helper()
	loadFixturesMu.Lock()
	defer loadFixturesMu.Unlock()
	if f, ok := loadFixtures[aggregates]; ok {
		return f
	}
	for n, f := range loadFixtures {
		f.nc.Close()
		f.e.Shutdown()
		delete(loadFixtures, n)
	}
	began := time.Now()
	defer func() { b.Logf("seeded %d aggregates in %v", aggregates, time.Since(began)) }()
	e, err := StartEmbedded(EmbeddedConfig{Memory: true})
	if err != nil {
		b.Fatal(err)
	}
	nc, err := e.Connect()
	if err != nil {
		e.Shutdown()
		b.Fatal(err)
	}
	f := &loadFixture{e: e, nc: nc}
	loadFixtures[aggregates] = f
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if f.s, err = Open(ctx, nc, Config{Memory: true}, testRegistry()); err != nil {
		b.Fatal(err)
	}

	positions := make([]Position, loadTargets)
	for i := 0; i < loadTargets; i++ {
		f.targets = append(f.targets, Key{Type: "target", ID: fmt.Sprintf("t%02d", i)})
	}
	const perTarget = 10
	every := aggregates / perTarget
	for i := 0; i < aggregates; i++ {
		if i%every == 0 {
			// One more event for every target, appended through the store
			// so the chain headers are real.
			for t, k := range f.targets {
				if positions[t], err = f.s.Append(ctx, k, positions[t], Event{Type: evNoted, Data: benchPayload}); err != nil {
					b.Fatal(err)
				}
			}
		}
		msgs, _, _, err := f.s.prepare(Key{Type: "filler", ID: strconv.Itoa(i)}, Position{}, []Event{{Type: evNoted, Data: benchPayload}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.s.js.PublishMsgAsync(msgs[0]); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-f.s.js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("seeding did not complete")
	}
	for t, k := range f.targets {
		if positions[t].Version != perTarget {
			b.Fatalf("target %v has %d events", k, positions[t].Version)
		}
	}
	// Start the measurement from a settled heap, not from seeding garbage.
	runtime.GC()
	return f
}

var loadSizes = []int{1_000, 100_000}

// BenchmarkLoad: Load of a 10-event aggregate, with 1k and 100k other
// aggregates in the stream.
func BenchmarkLoad(b *testing.B) {
	for _, n := range loadSizes {
		b.Run(fmt.Sprintf("aggregates=%d", n), func(b *testing.B) {
			f := getLoadFixture(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				recs, _, err := f.s.Load(ctx, f.targets[i%loadTargets])
				if err != nil || len(recs) != 10 {
					b.Fatalf("load: %d records, %v", len(recs), err)
				}
			}
		})
	}
}

// BenchmarkRawGetChain: the same lookups Load makes (last by subject, then
// get by sequence along the back pointers) through the plain jetstream
// client, without decoding or checks: the floor for Load.
func BenchmarkRawGetChain(b *testing.B) {
	for _, n := range loadSizes {
		b.Run(fmt.Sprintf("aggregates=%d", n), func(b *testing.B) {
			f := getLoadFixture(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m, err := f.s.stream.GetLastMsgForSubject(ctx, f.s.Subject(f.targets[i%loadTargets]))
				if err != nil {
					b.Fatal(err)
				}
				got := 1
				for {
					prev, _ := strconv.ParseUint(m.Header.Get(HeaderPrevSeq), 10, 64)
					if prev == 0 {
						break
					}
					if m, err = f.s.stream.GetMsg(ctx, prev); err != nil {
						b.Fatal(err)
					}
					got++
				}
				if got != 10 {
					b.Fatalf("walked %d events", got)
				}
			}
		})
	}
}

// BenchmarkRawGetNextBySubject: the obvious forward read (GetMsg with
// next-by-subject from sequence 1 until not found). The server scans the
// stream between the aggregate's events, so it grows with the stream; it is
// here to show why Load walks backwards instead.
func BenchmarkRawGetNextBySubject(b *testing.B) {
	for _, n := range loadSizes {
		b.Run(fmt.Sprintf("aggregates=%d", n), func(b *testing.B) {
			f := getLoadFixture(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				subj := f.s.Subject(f.targets[i%loadTargets])
				got := 0
				for seq := uint64(1); ; got++ {
					m, err := f.s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
					if err != nil {
						break
					}
					seq = m.Sequence + 1
				}
				if got != 10 {
					b.Fatalf("read %d events", got)
				}
			}
		})
	}
}
