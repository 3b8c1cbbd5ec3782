package main

import (
	"context"
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
// custody map and the limits. It is compared with, and published as, the
// configuration in force in the log.
func fileConfig(ps *api.Principals, hot tron.Address, cust custody, dailyLimit, reviewAbove aggregate.Amount, quorum int) aggregate.Config {
	c := aggregate.Config{HotWallets: []string{hot.String()}, DailyLimit: dailyLimit, CreditReviewAbove: reviewAbove, PolicyQuorum: quorum}
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
	pub := sagas.ConfigPublish{By: aggregate.SystemActor, Process: processName(cfg), Replace: cfg.PublishConfig || devMode}
	err := e.up.do(ctx, "configuration", func(ctx context.Context) (err error) {
		pub.At = time.Now().UTC()
		cur, published, err = e.repo.StartConfig(ctx, files, pub)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("refusing to start: %w (start with --publish-config to make this process's files the configuration in force)", err)
	}
	if published {
		log.Info("configuration published", "version", cur.Version, "by", cur.ChangedBy, "principals", len(cur.Config.Principals),
			"hot_wallets", cur.Config.HotWallets, "custody", len(cur.Config.Custody), "daily_limit", cur.Config.DailyLimit.String())
	} else {
		log.Info("configuration in force", "version", cur.Version, "published_by", cur.ChangedBy, "at", cur.ChangedAt)
	}
	src := sagas.NewConfigSource(e.repo, cur, log.With("room", "config"))
	src.SetMaxAge(cfg.configMaxAge)
	return src, nil
}
