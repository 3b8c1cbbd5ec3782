package sagas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/tron"
)

// The configuration in force lives in the log (weir.evt.config.current):
// principals and roles, hot wallets, custody and limits, one full snapshot
// per version. A process reads it from there — routing, the daily limit,
// the approver re-check before signing — so two processes on one log
// cannot route or limit differently because their files differ.

var configKind = kind[aggregate.ConfigState, aggregate.ConfigChanged]{
	typ:    eventlog.TypeConfig,
	decode: eventlog.ConfigEvents,
	evolve: aggregate.EvolveConfig,
}

// Config loads the configuration stream (Version 0: none was published).
func (r *Repo) Config(ctx context.Context) (aggregate.ConfigState, error) {
	s, _, err := load(ctx, r, configKind, eventlog.ConfigStreamID, false)
	return s, err
}

// ConfigLatest is Config read through the stream leader.
func (r *Repo) ConfigLatest(ctx context.Context) (aggregate.ConfigState, error) {
	s, _, err := load(ctx, r, configKind, eventlog.ConfigStreamID, true)
	return s, err
}

// SetConfig publishes a configuration snapshot; one that says what is in
// force appends nothing.
func (r *Repo) SetConfig(ctx context.Context, c aggregate.SetConfig) (aggregate.ConfigState, error) {
	s, _, _, err := update(ctx, r, configKind, eventlog.ConfigStreamID, nil, func(s aggregate.ConfigState) ([]aggregate.ConfigChanged, error) {
		return aggregate.DecideConfig(s, c)
	})
	return s, err
}

// ErrConfigDrift is the start-up refusal of a process whose configuration
// files disagree with the configuration in force in the log.
var ErrConfigDrift = errors.New("configuration drift")

// ConfigDriftError names what differs between the files and the log.
type ConfigDriftError struct {
	InForce aggregate.ConfigState
	Diff    []string // what the files would change
}

func (e *ConfigDriftError) Error() string {
	return fmt.Sprintf("%v: the configuration files disagree with configuration v%d in force in the log (published by %s at %s): %s",
		ErrConfigDrift, e.InForce.Version, e.InForce.ChangedBy, e.InForce.ChangedAt.Format(time.RFC3339), strings.Join(e.Diff, "; "))
}

func (e *ConfigDriftError) Unwrap() error { return ErrConfigDrift }

// ConfigPublish says who publishes a configuration and whether a process
// may publish its files over a different configuration in force.
type ConfigPublish struct {
	By      string // aggregate.SystemActor for a serve process
	Process string // host, pid, listeners
	// Replace: publish the files as the next version even when another
	// configuration is in force (serve --publish-config, dev mode). An
	// empty log is always published to.
	Replace bool
	// ReplaceChain: publish the files even when they name another chain
	// (aggregate.Config.ChainGenesis) than the one in force (serve
	// --publish-config only: dev mode's Replace does not move a log to
	// another chain).
	ReplaceChain bool
	At           time.Time
}

// ErrChainMismatch is the start-up refusal of a process whose node serves
// another chain than the one the configuration in force records.
var ErrChainMismatch = errors.New("chain mismatch")

// ChainMismatchError names both chains by their genesis block ids.
type ChainMismatchError struct {
	InForce  aggregate.ConfigState
	Recorded string // genesis id the log records
	Node     string // genesis id the node serves
}

func (e *ChainMismatchError) Error() string {
	return fmt.Sprintf("%v: the node serves the chain whose genesis block is %s, but configuration v%d in force in the log (published by %s at %s) records the chain whose genesis block is %s",
		ErrChainMismatch, e.Node, e.InForce.Version, e.InForce.ChangedBy, e.InForce.ChangedAt.Format(time.RFC3339), e.Recorded)
}

func (e *ChainMismatchError) Unwrap() error { return ErrChainMismatch }

// StartConfig reconciles a process's configuration files with the log: an
// empty log gets them as version 1; files that say what is in force change
// nothing; files that differ become the next version with p.Replace, and
// are otherwise refused with a *ConfigDriftError naming the difference.
// It returns the configuration in force afterwards and whether this call
// published it.
func (r *Repo) StartConfig(ctx context.Context, files aggregate.Config, p ConfigPublish) (aggregate.ConfigState, bool, error) {
	if err := files.Validate(); err != nil {
		return aggregate.ConfigState{}, false, err
	}
	cur, err := r.ConfigLatest(ctx)
	if err != nil {
		return cur, false, err
	}
	if cur.Version > 0 {
		recorded := strings.ToLower(cur.Config.ChainGenesis)
		if files.ChainGenesis == "" {
			files.ChainGenesis = recorded // the caller does not know: the log's stands
		}
		node := strings.ToLower(files.ChainGenesis)
		if recorded != "" && node != recorded && !p.ReplaceChain {
			return cur, false, &ChainMismatchError{InForce: cur, Recorded: recorded, Node: node}
		}
		diff := cur.Config.Diff(files)
		if len(diff) == 0 {
			return cur, false, nil
		}
		// A log that does not know its chain yet (recorded before weir
		// recorded it) learns it without --publish-config: recording
		// which chain the process found is no operator's choice.
		unknownChainOnly := false
		if recorded == "" {
			same := files
			same.ChainGenesis = ""
			unknownChainOnly = len(cur.Config.Diff(same)) == 0
		}
		if !p.Replace && !unknownChainOnly {
			return cur, false, &ConfigDriftError{InForce: cur, Diff: diff}
		}
	}
	s, err := r.SetConfig(ctx, aggregate.SetConfig{Config: files, By: p.By, Process: p.Process, At: p.At})
	if err != nil {
		return s, false, err
	}
	return s, s.Version != cur.Version, nil
}

// ConfigSource answers, from the log, what the configuration in force is.
// Each question reads the configuration stream (a handful of direct gets);
// when the log cannot be read it answers with the last configuration it
// read and logs that, so a routing decision never falls back to a file.
type ConfigSource struct {
	repo *Repo
	log  *slog.Logger
	// maxAge: a configuration read less than this long ago is answered
	// without reading the log again (0: every question reads it). A read
	// per routing, reservation and approver check costs the intake and the
	// pipeline half their throughput (weir bench); a change published by
	// another process reaches this one within maxAge.
	maxAge time.Duration
	mu     sync.Mutex
	last   aggregate.ConfigState
	readAt time.Time
}

// NewConfigSource reads the configuration in force through repo; initial
// is what the process read at start. Every question reads the log until
// SetMaxAge says otherwise.
func NewConfigSource(repo *Repo, initial aggregate.ConfigState, log *slog.Logger) *ConfigSource {
	if log == nil {
		log = slog.Default()
	}
	return &ConfigSource{repo: repo, log: log, last: initial, readAt: time.Now()}
}

// SetMaxAge sets how long a configuration read is answered from memory
// (see maxAge). Call it before the source is used.
func (s *ConfigSource) SetMaxAge(d time.Duration) { s.maxAge = d }

// Current is the configuration in force, read from the log unless it was
// read less than maxAge ago.
func (s *ConfigSource) Current(ctx context.Context) aggregate.ConfigState {
	if s.maxAge > 0 {
		s.mu.Lock()
		last, fresh := s.last, time.Since(s.readAt) < s.maxAge
		s.mu.Unlock()
		if fresh {
			return last
		}
	}
	c, err := s.repo.Config(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.log.Warn("reading the configuration in force failed; using the last one read", "version", s.last.Version, "err", err)
		return s.last
	}
	if c.Version >= s.last.Version {
		s.last, s.readAt = c, time.Now()
	}
	return s.last
}

// Last is the configuration read most recently, without reading the log.
func (s *ConfigSource) Last() aggregate.ConfigState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *ConfigSource) now() aggregate.Config {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Current(ctx).Config
}

// Custody is the broadcast saga's routing question (WorkerConfig.Custody):
// is this destination custodied, into which account — by the custody map
// in force in the log.
func (s *ConfigSource) Custody(to string) (string, bool) {
	a, err := tron.ParseAddress(to)
	if err != nil {
		return "", false
	}
	return s.now().CustodyAccount(a.String())
}

// Approver reports whether name holds the approver role in the
// configuration in force (WorkerConfig.Approver: the re-check before
// signing does not count approvals by principals who lost the role).
func (s *ConfigSource) Approver(name string) bool {
	p, ok := s.now().Principal(name)
	return ok && p.Has(aggregate.RoleApprover)
}

// DailyLimit is the per-account daily limit in force (zero: none).
func (s *ConfigSource) DailyLimit(ctx context.Context) aggregate.Amount {
	return s.Current(ctx).Config.DailyLimit
}
