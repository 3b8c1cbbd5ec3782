package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/weir-payouts/weir/tron"
)

// simChainFile is where the simulated chain is kept in --data, so that a
// restarted dev-mode weir finds the chain its log speaks of (otherwise
// `weir audit --all` could not find an earlier payment's txid). Deleting
// the file starts a new chain at the next start.
const simChainFile = "simchain.json"

// Saving the simulated chain rewrites the whole file; it costs about 5 ms
// per 1,000 transactions on chain (measured: 10,000 transactions, 6.5 MB,
// 35–60 ms with the fsync). So the saver looks once a second and writes
// only when the chain changed, and never sooner after a save than
// simSaveSpacing times that save's duration: at most a tenth of the time
// goes to saving however long the chain grows. A clean shutdown always
// saves; a crash loses at most the changes of the last few seconds (the
// worker re-sends what the chain forgot, by txid, as after any node loss).
const (
	simSaveTick    = time.Second
	simSaveSpacing = 10
)

// simChainPath is the file the simulated chain is kept in, "" when it is
// not kept: on memory storage (tests, demo, bench) and with --nats-url,
// whose log lives elsewhere than --data.
func simChainPath(cfg serveConfig) string {
	if cfg.memory || cfg.simEphemeral || cfg.NATSURL != "" || cfg.Data == "" {
		return ""
	}
	return filepath.Join(cfg.Data, simChainFile)
}

// openSimChain loads the simulated chain kept at path, or starts a new one
// (and keeps it at once) when there is none. A file that cannot be read is
// refused, naming it: starting over silently would make every earlier
// payment unverifiable. fund gives the hot wallet its start funds on a new
// chain, and on a loaded chain only if the wallet never appeared on it (a
// new --signing-key): a restart never refills a wallet.
func openSimChain(path string, cfg tron.SimConfig, wallet tron.Address, fund func(*tron.SimNode) error, log *slog.Logger) (*tron.SimNode, error) {
	if path == "" {
		sim := tron.NewSimNode(cfg)
		return sim, fund(sim)
	}
	sim, err := tron.LoadSimNodeFile(path, cfg)
	switch {
	case err == nil:
		head := sim.CurrentHead()
		log.Info("simulated chain loaded", "file", path, "head", head.Number, "transactions", sim.Ledger().Included)
		if !sim.AccountState(wallet).Exists {
			if err := fund(sim); err != nil {
				return nil, err
			}
		}
		return sim, nil
	case errors.Is(err, os.ErrNotExist):
		sim = tron.NewSimNode(cfg)
		if err := fund(sim); err != nil {
			return nil, err
		}
		if err := sim.SaveFile(path); err != nil {
			return nil, fmt.Errorf("simulated chain: %w", err)
		}
		log.Info("simulated chain started", "file", path)
		return sim, nil
	default:
		return nil, fmt.Errorf("simulated chain: %w (weir does not start a new chain over it: the log's payments would become unverifiable; to start a new simulated chain anyway, delete %s)", err, path)
	}
}

// runSimSaver keeps the simulated chain's file up to date until ctx ends
// (see simSaveSpacing); the final save is Close's. saved is sim.Changes()
// when the file was last written (0: since the chain was made or loaded,
// which at worst costs one save too many).
func runSimSaver(ctx context.Context, sim *tron.SimNode, path string, saved uint64, tick time.Duration, log *slog.Logger) {
	t := time.NewTicker(tick)
	defer t.Stop()
	var next time.Time
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			ch := sim.Changes()
			if ch == saved || now.Before(next) {
				continue
			}
			start := time.Now()
			if err := sim.SaveFile(path); err != nil {
				if !failing {
					log.Error("simulated chain not saved; retrying every second", "err", err)
				}
				failing = true
				continue
			}
			if failing {
				log.Info("simulated chain saved again", "file", path)
			}
			failing = false
			saved = ch
			next = start.Add(simSaveSpacing * time.Since(start))
		}
	}
}
