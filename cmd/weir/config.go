package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// fileConfig is the configuration this process's files and flags say:
// principals (names, roles, scopes — never tokens), the hot wallet, the
// custody map and the limits — and the chain its node serves (genesis, ""
// when unknown). It is compared with, and published as, the configuration
// in force in the log.
func fileConfig(ps *api.Principals, hot tron.Address, cust custody, dailyLimit, reviewAbove aggregate.Amount, quorum int, genesis string) aggregate.Config {
	c := aggregate.Config{HotWallets: []string{hot.String()}, DailyLimit: dailyLimit, CreditReviewAbove: reviewAbove, PolicyQuorum: quorum, ChainGenesis: genesis}
	for _, p := range ps.All() {
		cp := aggregate.ConfigPrincipal{Name: p.Name, Accounts: p.Accounts}
		for _, r := range p.Roles {
			cp.Roles = append(cp.Roles, string(r))
		}
		c.Principals = append(c.Principals, cp)
	}
	for addr, acc := range cust {
		c.Custody = append(c.Custody, aggregate.CustodyEntry{Address: addr, Account: acc})
	}
	return c.Normalized()
}

// processName says which weir process published a configuration: host,
// pid and HTTP listener.
func processName(cfg serveConfig) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d http %s", host, os.Getpid(), cfg.HTTP)
}

// startConfig reconciles the files with the configuration in force in the
// log: the first start on an empty log publishes them; files that disagree
// are refused naming the drift, unless --publish-config (or dev mode) makes
// them the next version.
func (e *engine) startConfig(ctx context.Context, cfg serveConfig, files aggregate.Config, devMode bool, log *slog.Logger) (*sagas.ConfigSource, error) {
	var (
		cur       aggregate.ConfigState
		published bool
	)
	pub := sagas.ConfigPublish{By: aggregate.SystemActor, Process: processName(cfg), Replace: cfg.PublishConfig || devMode, ReplaceChain: cfg.PublishConfig}
	err := e.up.do(ctx, "configuration", func(ctx context.Context) (err error) {
		pub.At = time.Now().UTC()
		cur, published, err = e.repo.StartConfig(ctx, files, pub)
		return err
	})
	var chainErr *sagas.ChainMismatchError
	if errors.As(err, &chainErr) {
		return nil, fmt.Errorf("refusing to start: %w: %s serves another chain than the one this log was written on, and a payout engine must not send on it; point --tron-node at a node of the chain whose genesis block is %s, or, only if this log is deliberately moving to the new chain, start with --publish-config to record it", err, nodeName(cfg, e.simPath), chainErr.Recorded)
	}
	if err != nil {
		return nil, fmt.Errorf("refusing to start: %w (start with --publish-config to make this process's files the configuration in force)", err)
	}
	if published {
		log.Info("configuration published", "version", cur.Version, "chain_genesis", cur.Config.ChainGenesis, "by", cur.ChangedBy, "principals", len(cur.Config.Principals),
			"hot_wallets", cur.Config.HotWallets, "custody", len(cur.Config.Custody), "daily_limit", cur.Config.DailyLimit.String())
	} else {
		log.Info("configuration in force", "version", cur.Version, "published_by", cur.ChangedBy, "at", cur.ChangedAt)
	}
	src := sagas.NewConfigSource(e.repo, cur, log.With("room", "config"))
	src.SetMaxAge(cfg.configMaxAge)
	return src, nil
}

// nodeName says, for an error, which node --tron-node names.
func nodeName(cfg serveConfig, simPath string) string {
	switch {
	case cfg.TronNode != "":
		return fmt.Sprintf("--tron-node %s", cfg.TronNode)
	case simPath != "":
		return fmt.Sprintf("the simulated node (--tron-node empty; its chain is kept in %s: was it deleted or replaced?)", simPath)
	}
	return "the simulated node (--tron-node empty; its chain is kept in memory only)"
}

// genesisTimeout bounds one read of the node's genesis block at start.
const genesisTimeout = 10 * time.Second

// chainGenesis reads which chain the node serves: its genesis block id. A
// node that cannot tell is asked again, with a backoff, within
// --startup-wait; then the start is refused: a payout engine that cannot
// tell which chain it would send on does not start. A node that reads no
// chain at all is refused at once: waiting cannot teach it.
func (e *engine) chainGenesis(ctx context.Context, cfg serveConfig, log *slog.Logger) (string, error) {
	cr, ok := e.node.(tron.ChainReader)
	if !ok {
		return "", fmt.Errorf("refusing to start: %s cannot tell its genesis block (%T reads no chain)", nodeName(cfg, e.simPath), e.node)
	}
	var g tron.BlockHeader
	attempts := 0
	// The node is wrapped (tron.Observed, tron.Limited), and a wrapper is
	// a ChainReader whatever it wraps: the node under it that reads no
	// chain answers ErrNotSupported.
	canWait := func(err error) bool { return !errors.Is(err, tron.ErrNotSupported) }
	err := e.up.doOn(ctx, "the TRON node", canWait, "genesis block", func(ctx context.Context) (err error) {
		attempts++
		gctx, cancel := context.WithTimeout(ctx, genesisTimeout)
		defer cancel()
		g, err = cr.Genesis(gctx)
		return err
	})
	if errors.Is(err, tron.ErrNotSupported) {
		return "", fmt.Errorf("refusing to start: %s cannot tell its genesis block: %w", nodeName(cfg, e.simPath), err)
	}
	if err != nil {
		return "", fmt.Errorf("refusing to start: cannot tell which chain %s serves (reading its genesis block, block 0): %w", nodeName(cfg, e.simPath), err)
	}
	log.Info("chain", "genesis", g.IDHex(), "mainnet", g.IDHex() == tron.MainnetGenesisID, "attempts", attempts)
	return g.IDHex(), nil
}
