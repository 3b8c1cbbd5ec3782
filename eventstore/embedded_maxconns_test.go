package eventstore

import (
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A flood of TCP connections on the client listener takes at most
// MaxConns of the server's connections (descriptors); the rest are
// refused at once, and the store keeps writing on its own connection.
func TestClientListenerFloodIsCappedAndWritesGoOn(t *testing.T) {
	const maxConns = 8
	e, err := StartEmbedded(EmbeddedConfig{Memory: true, ClientListen: "127.0.0.1:0", MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	s := openStore(t, connect(t, e), Config{Memory: true}, testRegistry())
	u, err := url.Parse(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	// Each flood connection reads what the server says until it closes
	// the connection (a refused one at once, an accepted one when its
	// authentication times out) or the deadline passes.
	said := make(chan string, 30)
	for range 30 {
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			said <- "dial: " + err.Error()
			continue
		}
		t.Cleanup(func() { _ = c.Close() })
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, _ := io.ReadAll(c)
			said <- string(b)
		}()
	}
	if n := e.Server().NumClients(); n > maxConns {
		t.Fatalf("%d clients on the server, cap %d", n, maxConns)
	}
	mustAppend(t, s, Key{Type: "thing", ID: "flooded"}, Position{}, noteEv("x", 1))
	refused := 0
	for range 30 {
		if strings.Contains(<-said, "maximum connections exceeded") {
			refused++
		}
	}
	if refused < 30-maxConns {
		t.Fatalf("%d of 30 flood connections refused, want at least %d", refused, 30-maxConns)
	}
}
