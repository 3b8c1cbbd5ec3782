package eventstore

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// cutProxy is a TCP proxy between a client and the embedded server that can
// black-hole one direction and then cut every connection, like a network
// failure. It tells the test (by channel, not by timing) when the bytes it
// was asked to watch for have been swallowed.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	hole  *blackHole // nil: forward everything
}

type blackHole struct {
	upstream bool   // true: client->server bytes are dropped; false: server->client
	needle   []byte // signal once these bytes have been dropped
	seen     chan struct{}
	once     sync.Once
	tail     []byte // end of previously dropped bytes, for needles split across reads
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	return p
}

func (p *cutProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(c, s, true)
		go p.pipe(s, c, false)
	}
}

func (p *cutProxy) pipe(src, dst net.Conn, upstream bool) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			h := p.hole
			p.mu.Unlock()
			if h != nil && h.upstream == upstream {
				h.swallow(buf[:n])
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (h *blackHole) swallow(b []byte) {
	window := append(h.tail, b...)
	if bytes.Contains(window, h.needle) {
		h.once.Do(func() { close(h.seen) })
	}
	if keep := len(h.needle) - 1; len(window) > keep {
		window = window[len(window)-keep:]
	}
	h.tail = append(h.tail[:0], window...)
}

// drop starts black-holing one direction and returns a channel closed once
// needle has been swallowed.
func (p *cutProxy) drop(upstream bool, needle string) <-chan struct{} {
	h := &blackHole{upstream: upstream, needle: []byte(needle), seen: make(chan struct{})}
	p.mu.Lock()
	p.hole = h
	p.mu.Unlock()
	return h.seen
}

// cut closes every proxied connection and stops black-holing, so the client
// reconnects to a healthy path.
func (p *cutProxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.hole = nil, nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// cutDuring runs the real send, waits until the proxy has swallowed the
// watched bytes, cuts the network, waits for the client to reconnect (so the
// read-back does not race the cut) and gives up on the ack.
func cutDuring(t *testing.T, p *cutProxy, reconnected <-chan struct{}, upstream bool, needle func(msgs []*nats.Msg) string) func(context.Context, []*nats.Msg, sendFn) (pubAck, error) {
	return func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		seen := p.drop(upstream, needle(msgs))
		type result struct {
			ack pubAck
			err error
		}
		done := make(chan result, 1)
		go func() {
			ack, err := real(sctx, msgs)
			done <- result{ack, err}
		}()
		select {
		case <-seen:
		case r := <-done:
			t.Errorf("send finished before the proxy swallowed anything: %+v", r)
			return r.ack, r.err
		case <-ctx.Done():
			t.Error("proxy never saw the watched bytes")
		}
		p.cut()
		select {
		case <-reconnected:
		case <-ctx.Done():
			t.Error("client never reconnected")
		}
		cancel()
		r := <-done
		return r.ack, r.err
	}
}

func TestAppendOverACutConnectionIsResolvedByReadBack(t *testing.T) {
	e, err := StartEmbedded(EmbeddedConfig{Memory: true, ClientListen: "127.0.0.1:0", ClientAuth: testClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	target := strings.TrimPrefix(e.ClientURL(), "nats://")

	newClient := func(t *testing.T, stream string) (*cutProxy, <-chan struct{}, *Store) {
		p := newCutProxy(t, target)
		reconnected := make(chan struct{}, 8)
		nc, err := ConnectURL(p.url(), nats.Token(testClientToken),
			nats.ReconnectWait(10*time.Millisecond), nats.ReconnectJitter(0, 0),
			nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return p, reconnected, openStore(t, nc, Config{Stream: stream, SubjectPrefix: strings.ToLower(stream), Memory: true}, testRegistry())
	}
	k := Key{Type: "thing", ID: "cut"}

	t.Run("ack cut off after the event landed", func(t *testing.T) {
		p, reconnected, s := newClient(t, "CUT_LANDED")
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		// The ack is the only JSON from the server naming our stream.
		calls := scripted(s, cutDuring(t, p, reconnected, false, func([]*nats.Msg) string { return `{"stream":"CUT_LANDED"` }))
		pos, err := s.Append(testCtx(t), k, at, noteEv("across the cut", 1))
		if err != nil {
			t.Fatalf("append across a cut: %v", err)
		}
		assertAggregate(t, s, k, pos, 2)
		if calls.Load() != 1 {
			t.Fatalf("%d sends, want 1: the read-back should have found the event", calls.Load())
		}
	})

	t.Run("publish cut off before reaching the server", func(t *testing.T) {
		p, reconnected, s := newClient(t, "CUT_LOST")
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		calls := scripted(s, cutDuring(t, p, reconnected, true, func(msgs []*nats.Msg) string { return msgs[0].Header.Get(HeaderEventID) }))
		pos, err := s.Append(testCtx(t), k, at, noteEv("lost then resent", 1))
		if err != nil {
			t.Fatalf("append across a cut: %v", err)
		}
		assertAggregate(t, s, k, pos, 2)
		if calls.Load() != 2 {
			t.Fatalf("%d sends, want 2: the read-back found nothing, so one resend", calls.Load())
		}
	})
}
