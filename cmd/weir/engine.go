package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/projections/history"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/sagas/notify"
	"github.com/weir-payouts/weir/sagas/webhook"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// engine is one running weir process: everything `weir serve` starts, in
// the order it must stop.
type engine struct {
	log *slog.Logger
	// snapshots keeps account snapshots in KV (nil with --snapshot-every -1).
	snapshots *sagas.DurableSnapshots
	feeLimit  int64              // sun, from --fee-limit
	wallet    *hotwallet.Monitor // the hot wallet's readings and the send gate
	// walletNotes announces the wallet's changes on WEIR_NOTIFY.
	walletNotes *notify.WalletAnnouncer
	emb         *eventstore.Embedded // nil with --nats-url
	conns       []*nats.Conn
	store       *eventstore.Store
	storeCfg    eventstore.Config
	// tail reads the log's end once for the followers of the whole log
	// (projector, notifications, history); each store they read through
	// uses it (Store.UseTail).
	tail      *eventstore.Tail
	repo      *sagas.Repo
	intake    *sagas.Intake
	projector *projections.Projector
	// publisher derives WEIR_NOTIFY from the log.
	publisher    *notify.Publisher
	notifyStream jetstream.Stream
	// historyIndex derives WEIR_HISTORY from the log.
	historyIndex *history.Indexer
	// webhooks keeps registrations; webhookOutcomes counts deliveries.
	webhooks        *webhook.Service
	webhookOutcomes *prometheus.CounterVec
	sim             *tron.SimNode // nil with --tron-node
	simPath         string        // where sim is kept ("" when not kept)
	node            tron.Node
	nodeMetrics     *nodeMetrics
	httpSrv         *http.Server
	httpLimit       *api.LimitListener
	tronSrv         *http.Server
	service         micro.Service
	httpAddr        string
	natsURL         string
	tronURL         string
	cancel          context.CancelFunc
	up              *startup // retries start-up's calls on a slow cluster (and the node's genesis)
	wg              sync.WaitGroup
	closeOnce       sync.Once
	// died records the first background loop (ledger saga, a worker, the
	// simulated chain) that stopped on its own: money would stop moving,
	// so /healthz must say so.
	died atomic.Pointer[error]
	// verified caches the store checks /healthz runs.
	verified cachedCheck
	// stops run (in reverse) after the workers and sagas have stopped.
	stops []func(context.Context) error
}

// devFundingAccount is credited by the dev defaults so a newcomer can pay
// out at once.
const (
	devFundingAccount = "dev"
	devFundingAmount  = "1000000"
)

// devSigningKey is the dev hot wallet's key: public, deterministic, and only
// ever used against the simulated node.
var devSigningKey = sha256.Sum256([]byte("weir dev hot wallet — never use on a real chain"))

func startEngine(parent context.Context, cfg serveConfig, log *slog.Logger, out io.Writer) (_ *engine, err error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	e := &engine{log: log, cancel: cancel, up: newStartup(log, cfg.StartupWait, cfg.startupPause)}
	defer func() {
		if err != nil {
			_ = e.Close(context.Background())
		}
	}()

	if cfg.Sync != "always" && cfg.Sync != "lazy" {
		return nil, fmt.Errorf("--sync must be always or lazy, not %q", cfg.Sync)
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("--workers must be ≥ 0")
	}
	if cfg.SnapshotEvery < -1 {
		return nil, fmt.Errorf("--snapshot-every must be ≥ -1 (-1: no durable snapshots, 0: the default %d)", sagas.DefaultSnapshotEvery)
	}
	if cfg.Inflight < 0 || cfg.NodeRPS < 0 || cfg.NodeConcurrency < 0 {
		return nil, fmt.Errorf("--inflight, --node-rps and --node-concurrency must be ≥ 0")
	}
	reviewAbove := aggregate.Amount{}
	if cfg.CreditReviewAbove != "" && cfg.CreditReviewAbove != "0" {
		if reviewAbove, err = aggregate.ParseAmount(aggregate.AccountAsset, cfg.CreditReviewAbove); err != nil {
			return nil, fmt.Errorf("--credit-review-above: %w", err)
		}
	}
	if e.feeLimit, err = feeLimitSun(cfg.FeeLimit); err != nil {
		return nil, err
	}
	dailyLimit := aggregate.Amount{}
	if cfg.DailyLimit != "" && cfg.DailyLimit != "0" {
		if dailyLimit, err = aggregate.ParseAmount(aggregate.USDT, cfg.DailyLimit); err != nil {
			return nil, fmt.Errorf("--daily-limit: %w", err)
		}
	}
	if err := refuseDevDefaults(cfg); err != nil {
		return nil, err
	}
	if err := checkListeners(cfg); err != nil {
		return nil, err
	}
	principals := api.DevPrincipals()
	devMode := cfg.Principals == ""
	if !devMode {
		if err := checkPrivateFile("--principals", cfg.Principals); err != nil {
			return nil, err
		}
		if principals, err = api.LoadPrincipals(cfg.Principals); err != nil {
			return nil, err
		}
		if names := principals.Plaintext(); len(names) > 0 {
			log.Warn("the principals file holds plaintext tokens; store their hashes instead (token_sha256, see `weir principals add`)",
				"file", cfg.Principals, "principals", names)
		}
	}
	quorum, err := policyQuorum(cfg.PolicyQuorum, devMode)
	if err != nil {
		return nil, err
	}
	var policy *aggregate.Policy
	if cfg.Policy != "" {
		b, err := os.ReadFile(cfg.Policy)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		if err := api.CheckKeys(b, api.PolicyView{}); err != nil {
			return nil, fmt.Errorf("--policy %s: %w", cfg.Policy, err)
		}
		p, err := aggregate.ParsePolicyJSON(b)
		if err == nil {
			err = sagas.CheckPolicy(p) // the allow-lists' addresses, which only the rail can check
		}
		if err != nil {
			return nil, fmt.Errorf("--policy %s: %w", cfg.Policy, err)
		}
		policy = &p
	}
	cust := devCustody()
	if cfg.Custody != "" {
		if cust, err = loadCustody(cfg.Custody); err != nil {
			return nil, err
		}
	}
	var blocklist []tron.Address
	if cfg.DestinationBlocklist != "" {
		if blocklist, err = loadBlocklist(cfg.DestinationBlocklist); err != nil {
			return nil, err
		}
		log.Info("destination blocklist", "file", cfg.DestinationBlocklist, "addresses", len(blocklist))
	}

	// The hot wallet's signer (its address is part of the configuration).
	var signer tron.Signer
	if cfg.SigningKey != "" {
		if err := checkPrivateFile("--signing-key", cfg.SigningKey); err != nil {
			return nil, err
		}
		if signer, err = tron.LoadKeySigner(cfg.SigningKey); err != nil {
			return nil, fmt.Errorf("--signing-key: %w", err)
		}
	} else if cfg.TronNode != "" {
		return nil, errors.New("--tron-node needs --signing-key: the dev key is for the simulated node only")
	} else if signer, err = tron.NewKeySigner(devSigningKey[:]); err != nil {
		return nil, err
	}

	sealer, err := eventKey(cfg, devMode, log)
	if err != nil {
		return nil, err
	}

	// NATS: embedded by default, or an external server/cluster.
	var extAuth []nats.Option
	if cfg.NATSURL != "" {
		if extAuth, err = cfg.NATSCreds.options(""); err != nil {
			return nil, err
		}
	} else if cfg.NATSCreds.identity() || cfg.NATSCreds.tlsCA != "" || cfg.NATSCreds.tlsCert != "" {
		return nil, errors.New("--nats-creds, --nats-user, --nats-nkey and --nats-tls-* are for an external --nats-url; the embedded server admits principals by their tokens")
	}
	connect := func(name string) (*nats.Conn, error) {
		var nc *nats.Conn
		var err error
		if e.emb != nil {
			nc, err = e.emb.Connect(nats.Name(name))
		} else {
			err = e.up.do(ctx, "NATS at "+eventstore.RedactURL(cfg.NATSURL), func(context.Context) (err error) {
				nc, err = eventstore.ConnectURL(cfg.NATSURL, append([]nats.Option{nats.Name(name)}, extAuth...)...)
				return err
			})
		}
		if err == nil {
			e.conns = append(e.conns, nc)
		}
		return nc, err
	}
	if cfg.NATSURL == "" {
		e.emb, err = eventstore.StartEmbedded(eventstore.EmbeddedConfig{
			StoreDir: cfg.Data, Memory: cfg.memory, SyncAlways: cfg.Sync == "always",
			ClientListen: cfg.NATSAddr, ServerName: "weir", Logger: cfg.natsLog,
			MaxConns:   connCap(0, log), // a quarter of the open-file limit, as HTTP
			ClientAuth: natsauth.New(principals, log.With("room", "nats-auth")),
		})
		if err != nil {
			return nil, err
		}
		e.natsURL = e.emb.ClientURL()
		log.Info("embedded NATS listening", "url", e.natsURL, "store", cfg.Data, "sync", cfg.Sync)
	} else {
		e.natsURL = cfg.NATSURL
		log.Info("using external NATS", "url", eventstore.RedactURL(cfg.NATSURL), "replicas", cfg.Replicas)
	}
	nc, err := connect("weir-api")
	if err != nil {
		return nil, err
	}
	if sealer == nil { // --nats-url without --event-key
		if err := e.up.do(ctx, "event key bucket", func(ctx context.Context) (err error) {
			sealer, err = sharedEventKey(ctx, nc, cfg)
			return err
		}); err != nil {
			return nil, err
		}
		log.Warn("no --event-key with --nats-url: events are authenticated with the key weir keeps in the NATS KV bucket "+natsauth.KeyBucket+
			", shared by every weir process on this NATS; anyone with weir's NATS identity or an admin credential can read it. In production give every process the same --event-key FILE",
			"signing_key_id", sealer.CurrentKeyID())
	}
	e.storeCfg = eventstore.Config{Replicas: cfg.Replicas, Memory: cfg.memory, Sealer: sealer,
		// The embedded one-node server fsyncs every write: appends that
		// arrive while one is stored go out together, synced once.
		GroupCommit: e.emb != nil && cfg.Sync == "always" && !cfg.memory}
	if err := e.up.do(ctx, "event stream", func(ctx context.Context) (err error) {
		e.store, err = eventstore.Open(ctx, nc, e.storeCfg, eventlog.NewRegistry())
		return err
	}); err != nil {
		return nil, err
	}
	// What the guarantees rest on (limits, deny-delete/purge, not sealed,
	// a leader that takes writes): a stream edited behind weir's back is a
	// refusal naming what is wrong, never a silent start.
	if err := e.up.do(ctx, "event stream check", e.store.Verify); err != nil {
		return nil, fmt.Errorf("refusing to start: %w (inspect it with `nats stream info %s`; weir never loosens it back itself)", err, e.store.StreamName())
	}
	e.repo = sagas.NewRepo(e.store)
	if cfg.SnapshotEvery >= 0 {
		if err := e.up.do(ctx, "account snapshots (KV "+sagas.SnapshotBucket+")", func(ctx context.Context) error {
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			e.snapshots, err = sagas.OpenDurableSnapshots(ctx, js, e.store, cfg.SnapshotEvery, log.With("room", "snapshots"))
			return err
		}); err != nil {
			return nil, err
		}
		e.repo.UseDurableSnapshots(e.snapshots)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.snapshots.Run(ctx)
		}()
	}
	// The chain: the simulated node (also served over java-tron's HTTP
	// API) unless --tron-node names a real one.
	if cfg.TronNode == "" && (cfg.TronSolidityNode != "" || cfg.TronAPIKey != "") {
		return nil, errors.New("--tron-solidity-node and --tron-api-key need --tron-node (the simulated node takes neither)")
	}
	if cfg.TronNode != "" {
		e.node = tronhttp.New(tronhttp.Config{
			URL: cfg.TronNode, SolidityURL: cfg.TronSolidityNode, APIKey: cfg.TronAPIKey,
			HTTPClient: &http.Client{Timeout: 10 * time.Second},
		})
		e.tronURL = cfg.TronNode
		log.Info("using TRON node", "url", cfg.TronNode, "solidity_url", cmp.Or(cfg.TronSolidityNode, cfg.TronNode),
			"api_key", cfg.TronAPIKey != "")
	} else {
		simCfg := tron.SimConfig{Start: time.Now().UTC(), SolidityLag: cfg.SimSolidityLag}
		if cfg.SimSolidityLag == 0 {
			simCfg.Instant = true
		}
		if err := simCfg.Validate(); err != nil {
			return nil, err
		}
		e.simPath = simChainPath(cfg)
		if e.simPath != "" {
			// A new chain kept in --data gets a random seed: it is its own
			// chain (its block ids, genesis included, derive from the
			// seed), so a log written on one is never taken for a log of
			// another (simchain.json deleted); the file keeps the seed,
			// hence the genesis, across restarts. A chain kept in memory
			// only (tests, demo, --nats-url) is seed 0's, the one every
			// such process shares, as processes sharing a log over
			// --nats-url must.
			simCfg.Seed = mrand.Int64()
		}
		if e.sim, err = openSimChain(e.simPath, simCfg, signer.Address(), func(sim *tron.SimNode) error {
			return fundSimWallet(sim, signer.Address(), cfg.SimWalletUSDT, cfg.SimWalletTRX)
		}, log); err != nil {
			return nil, err
		}
		e.node = e.sim
		if e.simPath != "" {
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				runSimSaver(ctx, e.sim, e.simPath, 0, simSaveTick, log)
			}()
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := e.sim.Run(ctx, cfg.SimBlockInterval); err != nil && ctx.Err() == nil {
				e.fail("simulated node", err)
			}
		}()
		if cfg.TronHTTP != "" {
			ln, err := net.Listen("tcp", cfg.TronHTTP)
			if err != nil {
				return nil, fmt.Errorf("--tron-http: %w", err)
			}
			e.tronSrv = &http.Server{Handler: tronhttp.NewHandler(e.sim), ReadHeaderTimeout: 5 * time.Second}
			e.tronURL = "http://" + ln.Addr().String()
			go func() { _ = e.tronSrv.Serve(ln) }()
			log.Info("simulated TRON node serving java-tron HTTP API", "url", e.tronURL, "block_interval", cfg.SimBlockInterval)
		}
	}
	log.Info("hot wallet", "address", signer.Address().String())
	// Every call the sagas make to the node is counted and timed.
	e.nodeMetrics = newNodeMetrics()
	observed := e.nodeMetrics.observe(e.node)
	e.node = observed
	if cfg.NodeRPS > 0 || cfg.NodeConcurrency > 0 {
		// One budget for every worker of this process: the node sees the
		// process, not its workers.
		e.node = tron.NewLimited(e.node, cfg.NodeRPS, cfg.NodeConcurrency)
	}

	// Which chain the node serves (its genesis block id): the configuration
	// records it, and a start against another chain than the one the log
	// records is refused.
	genesis, err := e.chainGenesis(ctx, cfg, log)
	if err != nil {
		return nil, err
	}

	// The configuration in force is the one in the log: these files become
	// it on an empty log (or with --publish-config / dev mode) and are
	// refused when they disagree with it otherwise.
	conf, err := e.startConfig(ctx, cfg, fileConfig(principals, signer.Address(), cust, dailyLimit, reviewAbove, quorum, genesis), devMode, log)
	if err != nil {
		return nil, err
	}
	ledger := sagas.NewLedger(e.repo, dailyLimit, time.Now, log.With("saga", "ledger"))
	ledger.UseConfig(conf)
	e.intake = sagas.NewIntake(e.repo, ledger, time.Now)
	e.intake.UseConfig(conf)
	e.intake.SetDestinationBlocklist(blocklist)

	// The policy in force: --policy becomes the next version when it says
	// something new; with no flag the stored policy stays, and a fresh store
	// starts with the default.
	var current aggregate.Policy
	if err := e.up.do(ctx, "policy", func(ctx context.Context) (err error) {
		current, err = e.intake.Policy(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	if policy == nil && current.Version == 0 {
		p := aggregate.DefaultPolicy()
		policy = &p
	}
	if policy != nil {
		if err := e.up.do(ctx, "storing policy", func(ctx context.Context) (err error) {
			current, err = e.intake.SetPolicy(ctx, *policy, "weir-serve")
			return err
		}); err != nil {
			return nil, fmt.Errorf("storing policy: %w", err)
		}
	}
	log.Info("policy in force", "name", current.Name, "version", current.Version, "quorum", quorum)
	// Requests read the policy in force from memory between policy events.
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = e.intake.WatchPolicy(ctx, log.With("saga", "intake"))
	}()

	// Read models and sagas.
	if err := e.startTail(ctx, connect, log); err != nil {
		return nil, err
	}
	e.store.UseTail(e.tail)
	if e.projector, err = startProjector(ctx, e, nc, cfg, log); err != nil {
		return nil, err
	}
	// The ledger's durable consumer exists before anything reports healthy.
	if err := e.up.do(ctx, "ledger consumer", func(ctx context.Context) error {
		_, err := e.store.EnsureConsumer(ctx, sagas.LedgerConsumer, "")
		return err
	}); err != nil {
		return nil, err
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.up.do(ctx, "ledger consumer", ledger.Run); err != nil && ctx.Err() == nil {
			e.fail("ledger saga", err)
		}
	}()
	if err := e.startNotifications(ctx, connect, cfg, log); err != nil {
		return nil, err
	}
	// After the projector (transfers in flight) and the notifications (the
	// wallet's are announced), before the workers (it is their gate).
	if err := e.startWalletMonitor(ctx, observed, cfg, signer.Address(), log); err != nil {
		return nil, err
	}
	hist, err := e.startHistory(ctx, connect, cfg, log)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Workers {
		if err := e.startWorker(ctx, i, cfg.Inflight, connect, signer, conf, log); err != nil {
			return nil, err
		}
	}

	// Transports.
	metrics := api.NewMetrics()
	metrics.Registry.MustRegister(e.projectionCollectors()...)
	metrics.Registry.MustRegister(e.notifyCollectors()...)
	metrics.Registry.MustRegister(newOpsCollector(e.projector, time.Now))
	metrics.Registry.MustRegister(e.nodeMetrics.collectors()...)
	metrics.Registry.MustRegister(newWalletCollector(e.wallet))
	limiter := api.NewRateLimiter(cfg.RateLimit, nil)
	httpHandler := api.NewHTTPHandler(api.HTTPConfig{
		Intake: e.intake, Principals: principals, Queues: readYourWrites{e.projector}, History: hist, Logger: log,
		Health: e.health, Degraded: e.degraded, Metrics: metrics, Webhooks: e.webhooks, RateLimit: limiter, MaxInFlight: cfg.MaxInFlight,
		Wallet: e.wallet,
	})
	app := api.NewApp(api.AppConfig{
		Intake: e.intake, Principals: principals, Queues: readYourWrites{e.projector}, History: hist,
		Wallet: e.wallet, Webhooks: e.webhooks, RateLimit: limiter,
	})
	httpHandler, closeConsoleStreams, err := e.withConsole(ctx, httpHandler, connect, cfg, app, log)
	if err != nil {
		return nil, err
	}
	tcpLn, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	ln := api.NewLimitListener(tcpLn, connCap(cfg.MaxConns, log), cfg.MaxConnsPerAddr, log)
	e.httpLimit = ln
	metrics.Registry.MustRegister(ln.Collectors()...)
	e.httpAddr = ln.Addr().String()
	e.httpSrv = api.NewHTTPServer(httpHandler, log)
	e.httpSrv.RegisterOnShutdown(closeConsoleStreams)
	e.httpSrv.ConnState = ln.ConnState
	go func() {
		if err := e.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server stopped", "err", err)
		}
	}()
	log.Info("HTTP API listening", "url", "http://"+e.httpAddr)
	svcConn, err := connect("weir-service")
	if err != nil {
		return nil, err
	}
	if e.service, err = api.StartService(svcConn, api.ServiceConfig{Intake: e.intake, Principals: principals, Queues: readYourWrites{e.projector}, History: hist, Logger: log, Metrics: metrics, RateLimit: limiter}); err != nil {
		return nil, err
	}
	log.Info("NATS command service started", "name", "weir", "subjects", "weir.cmd.>")

	if devMode {
		if err := e.up.do(ctx, "funding dev account", func(ctx context.Context) error {
			_, _, err := e.intake.Credit(ctx, sagas.CreditInput{Account: devFundingAccount, CreditID: "dev-funding", Amount: []byte(`"` + devFundingAmount + `"`), By: "weir-serve"})
			return err
		}); err != nil {
			return nil, fmt.Errorf("funding dev account: %w", err)
		}
		fmt.Fprintln(out, "weir dev mode — these tokens are public; use --principals in production:")
		for _, p := range principals.All() {
			fmt.Fprintf(out, "  %-8s %-18s roles=%v\n", p.Name, p.Token, p.Roles)
		}
		fmt.Fprintf(out, "  account %q funded with %s USDT; withdrawals to %s are internal transfers to account \"treasury\"\n",
			devFundingAccount, devFundingAmount, devCustodyAddress)
		if e.emb != nil && e.natsURL != "" {
			fmt.Fprintf(out, "  NATS logs in with the token too: nats --server %s --token dev-alice-token micro ls\n", e.natsURL)
		}
	}
	return e, nil
}

// health reports whether the store answers, the read models follow the
// log and the workers run.
func (e *engine) health(ctx context.Context) error {
	if err := e.verified.check(ctx, e.verifyStore); err != nil {
		return err
	}
	if err := e.projector.Err(); err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	if err := e.died.Load(); err != nil {
		return *err
	}
	return integrityHealth(e.store)
}

// verifyStore checks the stream (config and a write probe) and the
// ledger's durable consumer: an edit, a seal, a deleted stream or consumer
// is a 503 naming it.
func (e *engine) verifyStore(ctx context.Context) error {
	if err := e.store.Verify(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := e.store.VerifyConsumer(ctx, sagas.LedgerConsumer, ""); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// cachedCheck runs a check at most once per second: /healthz is
// unauthenticated, and a flood of it must not become a flood of JetStream
// API calls.
type cachedCheck struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

func (c *cachedCheck) check(ctx context.Context, run func(context.Context) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < time.Second {
		return c.err
	}
	c.err = run(ctx)
	c.at = time.Now()
	return c.err
}

// fail records that a background loop stopped on its own.
func (e *engine) fail(what string, err error) {
	e.log.Error(what+" stopped", "err", err)
	wrapped := fmt.Errorf("%s stopped: %w", what, err)
	e.died.CompareAndSwap(nil, &wrapped)
}

// Close stops everything in reverse order of start: transports first so
// nothing new is accepted, then workers and sagas, then the store. Work in
// flight is safe to abandon: every step is in the log before its effect.
func (e *engine) Close(ctx context.Context) error {
	var err error
	e.closeOnce.Do(func() {
		if e.httpSrv != nil {
			err = errors.Join(err, e.httpSrv.Shutdown(ctx))
		}
		if e.service != nil {
			err = errors.Join(err, e.service.Stop())
		}
		e.cancel()
		e.wg.Wait()
		// A failed final checkpoint loses nothing (the read models rebuild
		// from the log), so it is a warning, not an unclean exit.
		for i := len(e.stops) - 1; i >= 0; i-- {
			if stopErr := e.stops[i](ctx); stopErr != nil {
				e.log.Warn("stopping", "err", stopErr)
			}
		}
		if e.tronSrv != nil {
			_ = e.tronSrv.Shutdown(ctx)
		}
		// Nothing moves the simulated chain any more: keep its last state.
		if e.sim != nil && e.simPath != "" {
			if saveErr := e.sim.SaveFile(e.simPath); saveErr != nil {
				e.log.Error("simulated chain not saved at shutdown", "err", saveErr)
				err = errors.Join(err, saveErr)
			}
		}
		for _, nc := range e.conns {
			_ = nc.Drain()
		}
		if e.emb != nil {
			e.emb.Shutdown()
		}
	})
	return err
}

// startProjector starts the read models, checkpointed in the KV bucket
// under a name unique to this process, so several weir processes sharing
// one NATS do not overwrite each other's snapshots.
func startProjector(ctx context.Context, e *engine, nc *nats.Conn, cfg serveConfig, log *slog.Logger) (*projections.Projector, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var cps *projections.KVCheckpoints
	if err := e.up.do(ctx, "projection checkpoints (KV weir_projections)", func(ctx context.Context) (err error) {
		cps, err = projections.NewKVCheckpoints(ctx, js, e.store, "weir_projections")
		return err
	}); err != nil {
		return nil, fmt.Errorf("projection checkpoints: %w", err)
	}
	p := projections.New(e.store, projections.Options{
		Name: checkpointName(cfg), Checkpoints: cps, Logger: log.With("room", "projections"),
		// A checkpoint re-encodes every open withdrawal; by time (10 s) is
		// often enough to keep restarts short, and by count it would cost a
		// fifth of the CPU under load (measured with weir bench).
		CheckpointEvery: -1,
	})
	if err := e.up.do(ctx, "projections", p.Start); err != nil {
		return nil, fmt.Errorf("projections: %w", err)
	}
	e.stops = append(e.stops, p.Stop)
	return p, nil
}

// checkpointName is stable across restarts of one process (host and HTTP
// port) and differs between processes.
func checkpointName(cfg serveConfig) string {
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(cfg.HTTP)
	name := "views-" + host + "-" + port
	clean := make([]rune, 0, len(name))
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			clean = append(clean, r)
		default:
			clean = append(clean, '_')
		}
	}
	return string(clean)
}

// startWorker starts broadcast worker i on its own NATS connection (and so
// its own store handle), as a separate process would have.
func (e *engine) startWorker(ctx context.Context, i, inflight int, connect func(string) (*nats.Conn, error), signer tron.Signer, conf *sagas.ConfigSource, log *slog.Logger) error {
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s-%d-w%d", host, os.Getpid(), i+1)
	nc, err := connect("weir-worker-" + id)
	if err != nil {
		return err
	}
	var store *eventstore.Store
	if err := e.up.do(ctx, "event stream (worker "+id+")", func(ctx context.Context) (err error) {
		store, err = eventstore.Open(ctx, nc, e.storeCfg, eventlog.NewRegistry())
		return err
	}); err != nil {
		return err
	}
	w, err := sagas.NewWorker(sagas.WorkerConfig{
		ID: id, Repo: sagas.NewRepo(store), Node: e.node, Signer: signer,
		Custody: conf.Custody, Work: e.projector, Inflight: inflight,
		// Woken by the projector when a withdrawal becomes ready (in any
		// process: each follows the whole log); the poll is the fallback
		// for what nobody announces: lapsed leases, a moving chain.
		PollInterval: time.Second,
		Approver:     conf.Approver, Logger: log, FeeLimit: e.feeLimit,
		Gate: e.wallet, // sending pauses while the hot wallet cannot pay
	})
	if err != nil {
		return err
	}
	e.projector.OnReady(w.Notify)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			e.fail("worker "+id, err)
		}
	}()
	return nil
}

// projectionCollectors expose how far the read models trail the log:
// queues served from a lagging projection are stale, so operators alert on
// it.
func (e *engine) projectionCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "weir_integrity_violations_total",
			Help: "Events quarantined because their tag did not verify or they could not be decoded (never folded into any state); /healthz names them.",
		}, func() float64 { _, n := e.store.Violations(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "weir_snapshots_rejected_total",
			Help: "Stored account snapshots ignored (tag, state or position not verified against the log); the account was folded from its log.",
		}, func() float64 {
			if e.snapshots == nil {
				return 0
			}
			return float64(e.snapshots.Rejected())
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "weir_snapshots_written_total",
			Help: "Account snapshots written to the KV bucket " + sagas.SnapshotBucket + ".",
		}, func() float64 {
			if e.snapshots == nil {
				return 0
			}
			return float64(e.snapshots.Written())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_projection_applied_sequence",
			Help: "Stream sequence the read models have folded up to.",
		}, func() float64 { return float64(e.projector.Applied()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_projection_lag_events",
			Help: "Events in the log not yet folded into the read models.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			lag, err := e.projector.Lag(ctx)
			if err != nil {
				return -1
			}
			return float64(lag)
		}),
	}
}

// readYourWrites serves the queues only after the read models have folded
// everything that was in the log when the request arrived, so a client
// that just created or approved a withdrawal sees it in the queue it
// belongs to. A projector that cannot catch up within a second is served
// as it is (the views say what they have seen; lag is on /metrics).
type readYourWrites struct{ p *projections.Projector }

func (r readYourWrites) catchUp() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = r.p.CatchUp(ctx)
}

func (r readYourWrites) PendingApprovals() []aggregate.Withdrawal {
	r.catchUp()
	return r.p.PendingApprovals()
}

func (r readYourWrites) Ready(now time.Time) []aggregate.Withdrawal {
	r.catchUp()
	return r.p.Ready(now)
}

func (r readYourWrites) InFlight(now time.Time) []projections.InFlightItem {
	r.catchUp()
	return r.p.InFlight(now)
}

// policyQuorum resolves --policy-quorum: 0 is the default, 2 distinct
// operators (1 in dev mode, whose principals are public anyway).
func policyQuorum(flag int, devMode bool) (int, error) {
	switch {
	case flag < 0:
		return 0, fmt.Errorf("--policy-quorum %d: at least 1 (0 = the default)", flag)
	case flag > 0:
		return flag, nil
	case devMode:
		return 1, nil
	}
	return 2, nil
}
