package eventstore

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures an in-process nats-server with JetStream.
type EmbeddedConfig struct {
	StoreDir     string // file storage dir; ignored when Memory
	Memory       bool   // memory storage (tests): the store dir is a private temp dir removed on Shutdown
	SyncAlways   bool   // fsync every write (JetStream sync_interval "always")
	ClientListen string // "" = no TCP listener (in-process only); "127.0.0.1:0" picks a free port; "host:port"
	ServerName   string // default "weir-embedded"

	// ClientAuth decides every connection except the embedding process's
	// own (Connect): it checks the credentials a client presents and
	// registers the user, with its permissions, that the client becomes.
	// Nil refuses every other connection: the listener never lets an
	// anonymous client in.
	ClientAuth server.Authentication

	// MaxConns bounds the client connections open at once, the embedding
	// process's own included; beyond it the server refuses a connection
	// ("maximum connections exceeded"). Keep it well below the open-file
	// limit: a connection flood that takes every descriptor leaves
	// JetStream's writes failing until restart. 0: the server's default.
	MaxConns int

	// Logger receives the server's log lines; nil keeps the server silent.
	Logger *slog.Logger
	// ReadyTimeout bounds the wait for the server to accept connections; default 10s.
	ReadyTimeout time.Duration
}

// Embedded is a running in-process nats-server with JetStream enabled.
type Embedded struct {
	srv     *server.Server
	tempDir string // removed on Shutdown (memory mode only)
	listens bool
	// internalToken authenticates the embedding process's own connections.
	// It is random per start, exists only in this process's memory, and
	// is accepted only on in-process (pipe) connections, so knowing it is
	// not enough to use it over TCP.
	internalToken string
}

// InternalInboxPrefix is the inbox prefix of weir's own connections. Its
// JetStream replies (event reads, consumer deliveries) travel on inboxes;
// under a prefix of their own, a principal allowed to subscribe _INBOX.>
// cannot read them.
const InternalInboxPrefix = "_WEIR_INBOX"

// InternalUser is the user name weir's own in-process connections are
// registered as (visible in the server's connection list).
const InternalUser = "weir-internal"

// internalAuth lets the embedding process's in-process connections in with
// full permissions and hands every other connection to next.
type internalAuth struct {
	token []byte
	next  server.Authentication
}

func (a internalAuth) Check(c server.ClientAuthentication) bool {
	opts := c.GetOpts()
	if opts != nil && opts.Token != "" && subtle.ConstantTimeCompare([]byte(opts.Token), a.token) == 1 {
		if !inProcess(c) {
			return false
		}
		c.RegisterUser(&server.User{Username: InternalUser})
		return true
	}
	if a.next == nil || c.Kind() != server.CLIENT {
		return false
	}
	return a.next.Check(c)
}

// inProcess reports whether c came through Server.InProcessConn (a
// net.Pipe), not a network listener.
func inProcess(c server.ClientAuthentication) bool {
	addr := c.RemoteAddress()
	return addr != nil && addr.Network() == "pipe"
}

// ErrServerNotReady is returned when the embedded server did not come up in time.
var ErrServerNotReady = errors.New("eventstore: embedded nats-server not ready")

// StartEmbedded starts the server, waits until it accepts connections and
// JetStream is enabled, and returns it.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	opts := &server.Options{
		ServerName: cfg.ServerName,
		JetStream:  true,
		SyncAlways: cfg.SyncAlways,
		// The embedding process owns signals; the server must not install handlers.
		NoSigs:  true,
		NoLog:   cfg.Logger == nil,
		MaxConn: cfg.MaxConns,
	}
	if opts.ServerName == "" {
		opts.ServerName = "weir-embedded"
	}

	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("eventstore: internal token: %w", err)
	}
	e := &Embedded{internalToken: hex.EncodeToString(tok[:])}
	opts.CustomClientAuthentication = internalAuth{token: []byte(e.internalToken), next: cfg.ClientAuth}
	if cfg.Memory {
		// JetStream always wants a store directory even if every stream is in
		// memory; a private one keeps tests from sharing the server's default
		// (os.TempDir()/nats) directory with each other.
		dir, err := os.MkdirTemp("", "weir-js-mem-")
		if err != nil {
			return nil, fmt.Errorf("eventstore: memory store dir: %w", err)
		}
		e.tempDir = dir
		opts.StoreDir = dir
	} else {
		if cfg.StoreDir == "" {
			return nil, errors.New("eventstore: EmbeddedConfig.StoreDir is required for file storage")
		}
		opts.StoreDir = cfg.StoreDir
	}

	if cfg.ClientListen == "" {
		opts.DontListen = true
	} else {
		host, portStr, err := net.SplitHostPort(cfg.ClientListen)
		if err != nil {
			e.cleanup()
			return nil, fmt.Errorf("eventstore: client listen %q: %w", cfg.ClientListen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 0 || port > 65535 {
			e.cleanup()
			return nil, fmt.Errorf("eventstore: client listen %q: bad port", cfg.ClientListen)
		}
		if port == 0 {
			// nats-server reads 0 as "default port 4222"; -1 asks for a free one.
			port = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, port
		e.listens = true
	}

	srv, err := server.NewServer(opts)
	if err != nil {
		e.cleanup()
		return nil, fmt.Errorf("eventstore: new nats-server: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(slogAdapter{cfg.Logger}, false, false, false)
	}
	srv.Start()

	wait := cfg.ReadyTimeout
	if wait <= 0 {
		wait = 10 * time.Second
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		srv.WaitForShutdown()
		e.cleanup()
		return nil, ErrServerNotReady
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		e.cleanup()
		return nil, fmt.Errorf("%w: JetStream did not start", ErrServerNotReady)
	}
	e.srv = srv
	return e, nil
}

// Connect returns a new in-process client connection with weir's internal
// identity (every permission). Each call is a new connection so that
// components (and tests) can be cut independently.
func (e *Embedded) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.InProcessServer(e.srv),
		nats.Name("weir-inprocess"),
		nats.Token(e.internalToken),
		nats.CustomInboxPrefix(InternalInboxPrefix),
		// An in-process connection cannot outlive its server; reconnecting
		// would only hide a shutdown.
		nats.NoReconnect(),
	}, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		return nil, fmt.Errorf("eventstore: in-process connect: %w", err)
	}
	return nc, nil
}

// ClientURL is the TCP URL clients can dial, or "" when there is no listener.
func (e *Embedded) ClientURL() string {
	if !e.listens {
		return ""
	}
	return e.srv.ClientURL()
}

// Server exposes the underlying server for wiring that needs it (monitoring, tests).
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until it is fully down, so that a new
// server can be started on the same store directory right after.
func (e *Embedded) Shutdown() {
	if e == nil || e.srv == nil {
		return
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.cleanup()
}

func (e *Embedded) cleanup() {
	if e.tempDir != "" {
		_ = os.RemoveAll(e.tempDir)
		e.tempDir = ""
	}
}

// ConnectURL dials an external server or cluster (comma-separated URLs) with
// reconnect settings suited to a long-running writer: never give up
// reconnecting, and keep a reconnect buffer so that an append published during
// a blip is still delivered (the append protocol tolerates late delivery).
// Options given by the caller win.
func ConnectURL(urls string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.Name("weir"),
		nats.CustomInboxPrefix(InternalInboxPrefix),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.Timeout(5 * time.Second),
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(3),
	}, opts...)
	nc, err := nats.Connect(urls, all...)
	if err != nil {
		return nil, fmt.Errorf("eventstore: connect %s: %w", RedactURL(urls), err)
	}
	return nc, nil
}

// slogAdapter routes nats-server log lines to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(format string, v ...any) { a.l.Info(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.l.Warn(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Fatalf(format string, v ...any)  { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Errorf(format string, v ...any)  { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Debugf(format string, v ...any)  { a.l.Debug(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Tracef(format string, v ...any)  { a.l.Debug(fmt.Sprintf(format, v...)) }

// RedactURL returns a NATS URL list (comma-separated) fit for a log line
// or an error: passwords and tokens in the user part are replaced.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			if strings.Contains(p, "@") {
				parts[i] = "(unparsable URL with credentials)"
			}
			continue
		}
		if u.User == nil {
			continue
		}
		if _, hasPass := u.User.Password(); hasPass {
			u.User = url.UserPassword(u.User.Username(), "REDACTED")
		} else {
			u.User = url.User("REDACTED") // nats://TOKEN@host
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
