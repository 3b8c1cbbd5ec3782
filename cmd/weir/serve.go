package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/console"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/hotwallet"
)

func init() {
	register(command{name: "serve", summary: "run the engine: embedded NATS, HTTP API, NATS service, workers, simulated node", run: runServe})
}

// serveConfig is every `weir serve` flag (CONTRACT.md), each also read from
// WEIR_<FLAG>.
type serveConfig struct {
	Data     string
	HTTP     string
	NATSAddr string
	NATSURL  string
	Replicas int
	Sync     string
	Workers  int
	Inflight int // withdrawals each worker drives at once
	// SnapshotEvery is how many account events pass between two durable
	// snapshots (KV WEIR_SNAPSHOTS); 0: sagas.DefaultSnapshotEvery, -1: none.
	SnapshotEvery   int
	NodeRPS         float64 // node calls started per second, all workers together; 0: no cap
	NodeConcurrency int     // node calls at once, all workers together; 0: no cap
	Principals      string
	Policy          string
	PolicyQuorum    int // 0: 2, or 1 in dev mode
	Custody         string
	// DestinationBlocklist is a file of addresses no withdrawal may pay.
	DestinationBlocklist string
	TronNode             string
	TronSolidityNode     string
	TronAPIKey           string // never logged
	TronHTTP             string
	SimBlockInterval     time.Duration
	SimSolidityLag       int
	DailyLimit           string
	CreditReviewAbove    string // "0": no review
	// FeeLimit is every envelope's fee_limit, in TRX; SimWalletUSDT and
	// SimWalletTRX fund the hot wallet on the simulated node. Empty means
	// the default (tests build serveConfig without the flags).
	FeeLimit      string
	SimWalletUSDT string
	SimWalletTRX  string
	// WalletLowUSDT and WalletLowTRX are the hot wallet's low marks
	// (empty: none); WalletInterval how often it is read (0: default).
	WalletLowUSDT  string
	WalletLowTRX   string
	WalletInterval time.Duration
	SigningKey     string
	EventKey       string // file; the key itself is never logged
	// WebhookAllowPrivate lets webhooks target loopback, private and
	// link-local addresses (a receiver on this host or network).
	WebhookAllowPrivate bool
	// ConsoleTxLink is the console's link-out of a txid (a URL with one
	// %s); "-": none.
	ConsoleTxLink string
	// PublishConfig makes this process's files the configuration in force
	// when they disagree with the log (dev mode always does), and records
	// its node's chain over another one the log records (dev mode does not).
	PublishConfig bool
	LogLevel      string
	// The edges (api.LimitListener, api.RateLimiter); zero: no cap.
	MaxConns        int
	MaxConnsPerAddr int
	MaxInFlight     int
	RateLimit       float64
	// NATSCreds authenticate weir to an external --nats-url.
	NATSCreds natsCreds

	// StartupWait bounds how long start-up retries JetStream calls that
	// NATS answers with "not now" (a forming or busy cluster).
	StartupWait time.Duration
	// startupPause replaces the wait between those retries (tests).
	startupPause func(context.Context, time.Duration) error

	// webhookFirstRetry replaces the first retry's wait (tests).
	webhookFirstRetry time.Duration

	// configMaxAge is how long a process answers from the configuration it
	// last read from the log (sagas.ConfigSource); `weir serve` and the
	// bench use defaultConfigMaxAge, tests 0 (every question reads the log).
	configMaxAge time.Duration

	// memory runs the embedded server on memory storage (tests, demo,
	// bench); not a flag.
	memory bool
	// simEphemeral keeps the simulated chain in memory only (the bench:
	// its store is thrown away, and saving a chain of 100k payments every
	// tick would be most of what the scale series measures); not a flag.
	simEphemeral bool
	// natsLog receives the embedded server's own log (warnings and up by
	// default: its start-up banner is noise next to ours).
	natsLog *slog.Logger
}

// defaultConfigMaxAge: a configuration published by another process
// reaches a running one within this long.
const defaultConfigMaxAge = time.Second

// defaultNodeConcurrency bounds the node calls in flight from one process:
// as many as one worker drives at once (sagas.DefaultInflight), so a lone
// worker's pipeline is not cut short; --node-rps is what a rate-limited
// hosted endpoint needs.
const defaultNodeConcurrency = sagas.DefaultInflight

func serveFlags(stderr io.Writer) (*flag.FlagSet, *serveConfig) {
	c := &serveConfig{configMaxAge: defaultConfigMaxAge}
	fs := newFlagSet("serve", "serve [flags]", stderr)
	fs.StringVar(&c.Data, "data", "./weir-data", "embedded NATS store directory (file storage); dev mode also keeps the simulated chain there (simchain.json; to start a new chain delete it and start once with --publish-config)")
	fs.StringVar(&c.HTTP, "http", "127.0.0.1:8080", "HTTP API listen address")
	fs.StringVar(&c.NATSAddr, "nats-addr", "127.0.0.1:4222", "embedded server's client listener (producers, nats CLI)")
	fs.StringVar(&c.NATSURL, "nats-url", "", "use an external NATS server/cluster instead of the embedded one")
	fs.IntVar(&c.Replicas, "replicas", 1, "stream replicas (3 on a cluster)")
	fs.DurationVar(&c.StartupWait, "startup-wait", defaultStartupWait, "how long start-up waits for a slow or forming NATS cluster to answer its JetStream calls")
	fs.StringVar(&c.Sync, "sync", "always", "always: fsync every write; lazy: JetStream's default interval")
	fs.IntVar(&c.Workers, "workers", 2, "broadcast saga workers in this process")
	fs.IntVar(&c.SnapshotEvery, "snapshot-every", sagas.DefaultSnapshotEvery, "account events between two durable snapshots of an account in KV "+sagas.SnapshotBucket+" (tagged with the event key, verified against the log on load; -1 = none)")
	fs.IntVar(&c.Inflight, "inflight", sagas.DefaultInflight, "withdrawals each broadcast worker drives at once (node calls for different withdrawals overlap)")
	fs.Float64Var(&c.NodeRPS, "node-rps", 0, "TRON node calls started per second by this process, all workers together (0 = no limit; a hosted endpoint wants one)")
	fs.IntVar(&c.NodeConcurrency, "node-concurrency", defaultNodeConcurrency, "TRON node calls in flight at once from this process (0 = no limit)")
	fs.StringVar(&c.Principals, "principals", "", "JSON principals file [{name,token,roles}] (default: dev principals)")
	fs.StringVar(&c.Policy, "policy", "", "JSON approval policy file {name,rules:[{name,threshold,approvers}]} (default: four-eyes above 1000)")
	fs.IntVar(&c.PolicyQuorum, "policy-quorum", 0, "distinct operators a policy change needs before it takes effect, the proposer counting as one (0 = 2; 1 in dev mode)")
	fs.StringVar(&c.Custody, "custody", "", "JSON custody file [{address,account}]: destinations we custody (default: dev custody)")
	fs.StringVar(&c.TronNode, "tron-node", "", "a real java-tron HTTP endpoint; empty = built-in simulated node")
	fs.StringVar(&c.TronSolidityNode, "tron-solidity-node", "", "java-tron HTTP endpoint serving /walletsolidity/* (default: the --tron-node URL; a self-hosted node serves it on its own port, usually 8091)")
	fs.StringVar(&c.TronAPIKey, "tron-api-key", "", "API key sent to the node as TRON-PRO-API-KEY (TronGrid); never logged")
	fs.StringVar(&c.TronHTTP, "tron-http", "127.0.0.1:8090", "where the simulated node serves its java-tron-shaped HTTP API (empty: not served)")
	fs.DurationVar(&c.SimBlockInterval, "sim-block-interval", time.Second, "wall time per simulated block (chain time always advances 3 s a block)")
	fs.IntVar(&c.SimSolidityLag, "sim-solidity-lag", 19, "blocks until a block is solid on the simulated node")
	fs.StringVar(&c.CreditReviewAbove, "credit-review-above", "0", "credits above this amount wait for a second operator (weir credit approve); 0 = none")
	fs.StringVar(&c.DestinationBlocklist, "destination-blocklist", "", "file of TRON addresses (one a line, # comments) no withdrawal may pay; refused with 422 invalid_address, like the USDT contract, the burn address and the hot wallet always are")
	fs.StringVar(&c.WalletLowUSDT, "wallet-low-usdt", "", "warn (log line, weir_hot_wallet_low{asset=\"USDT\"}) when the hot wallet's USDT falls below this; empty: no mark")
	fs.StringVar(&c.WalletLowTRX, "wallet-low-trx", "", "warn (log line, weir_hot_wallet_low{asset=\"TRX\"}) when the hot wallet's TRX falls below this; empty: no mark")
	fs.DurationVar(&c.WalletInterval, "wallet-interval", hotwallet.DefaultInterval, "how often the hot wallet's balances, resources and transfer cost are read from the node")
	fs.StringVar(&c.FeeLimit, "fee-limit", defaultFeeLimitTRX, "most TRX one transfer may burn for energy (every envelope's fee_limit); at most 15000")
	fs.StringVar(&c.SimWalletUSDT, "sim-wallet-usdt", defaultSimWallet, "USDT the hot wallet holds on a new simulated chain (a chain kept in --data as simchain.json keeps its balances; refill: POST /sim/fund on --tron-http)")
	fs.StringVar(&c.SimWalletTRX, "sim-wallet-trx", defaultSimWallet, "TRX the hot wallet holds on a new simulated chain, for fees (a kept chain keeps its balances)")
	fs.StringVar(&c.DailyLimit, "daily-limit", "0", "per-account cap on amounts reserved per UTC day (0 = none)")
	fs.StringVar(&c.SigningKey, "signing-key", "", "file holding the hot wallet's secp256k1 private key (hex); empty = a dev key (simulated node only)")
	fs.StringVar(&c.EventKey, "event-key", "", "file of keys that authenticate every event and checkpoint (\"<key-id> <hex secret>\" lines, the first signs, the others only verify; mode 0600); empty: with the embedded store a key generated in --data, with --nats-url a key shared through the NATS KV bucket WEIR_KEYS")
	fs.BoolVar(&c.WebhookAllowPrivate, "webhook-allow-private", false, "let webhooks target loopback, private and link-local addresses (checked at registration and on every connection); off: such URLs are refused with 422 invalid_url")
	fs.BoolVar(&c.PublishConfig, "publish-config", false, "publish this process's principals (names and roles, never tokens), hot wallet, custody and limits as the configuration in force when they differ from the one in the log (without it such a start is refused; dev mode and an empty log publish anyway); also records a node of another chain (genesis) than the one the log records, which is refused otherwise, even in dev mode")
	fs.StringVar(&c.ConsoleTxLink, "console-tx-link", console.DefaultTxLink, "where the web console (/console/) links a txid: a URL with one %s for the txid (\"-\": no link)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.IntVar(&c.MaxConns, "http-max-conns", api.DefaultMaxConns, "HTTP connections open at once (at the cap the oldest idle one is closed); never above a quarter of the open-file limit")
	fs.IntVar(&c.MaxConnsPerAddr, "http-max-conns-per-addr", api.DefaultMaxConnsPerAddr, "HTTP connections open at once from one client IP address (0 = no cap)")
	fs.IntVar(&c.MaxInFlight, "http-max-in-flight", api.DefaultMaxInFlight, "HTTP requests handled at once; beyond: 503 with Retry-After")
	fs.Float64Var(&c.RateLimit, "rate-limit", api.DefaultRateLimit, "requests per second per principal over HTTP and NATS together, burst 2×; beyond: 429 rate_limited (0 = no limit)")
	c.NATSCreds.register(fs)
	return fs, c
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := serveFlags(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "serve: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.natsLog = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: max(level, slog.LevelWarn)})).With("room", "nats-server")
	eng, err := startEngine(ctx, *cfg, log, stdout)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := eng.Close(shutdownCtx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped cleanly")
	_ = os.Stdout.Sync()
	return nil
}
