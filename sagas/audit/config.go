package audit

import (
	"fmt"
	"sort"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// What was in force: the configuration stream (weir.evt.config.current)
// folded version by version. Authority comes from here, never from the
// checked event: an approver is judged against the principals and roles in
// force at the approval's position in the log, an envelope's owner and
// signer against the hot wallets in force, a reservation's daily limit
// against the limit in force. A log with no configuration events (written
// before weir recorded its configuration) is judged as before, with a note;
// events before the first configuration version likewise.

// configVersion is one version of the configuration and where it entered
// the log.
type configVersion struct {
	State    aggregate.ConfigState
	Sequence uint64
	At       time.Time // the server's record time of its event
}

func (c configVersion) label() string {
	return fmt.Sprintf("configuration v%d (published by %s at %s)", c.State.Version, c.State.ChangedBy, fmtTime(c.State.ChangedAt))
}

// configHistory is the configuration stream in stream order.
type configHistory struct {
	versions []configVersion
}

// buildConfigHistory folds the configuration stream, reporting a version
// that does not follow the one before, an undecodable or invalid snapshot,
// and a publisher that is not weir itself.
func buildConfigHistory(recs []eventstore.Record, report func(Finding)) configHistory {
	var h configHistory
	last := 0
	for i, r := range recs {
		f := Finding{Severity: Violation, Check: "config", Version: r.AggregateVersion, Sequence: r.Sequence, Event: r.Type}
		bad := func(format string, args ...any) {
			f.What = "configuration stream: " + fmt.Sprintf(format, args...)
			report(f)
		}
		if r.AggregateVersion != uint64(i+1) {
			bad("event %d has version %d", i+1, r.AggregateVersion)
		}
		ev, err := aggregate.DecodeConfigEvent(r.Type, r.Payload)
		if err != nil {
			bad("event %d (%s): %v", r.AggregateVersion, r.Type, err)
			continue
		}
		if ev.Version != last+1 {
			bad("version %d follows version %d", ev.Version, last)
		}
		if err := ev.Config.Validate(); err != nil {
			bad("version %d is not a valid configuration: %v", ev.Version, err)
		}
		if ev.By != aggregate.SystemActor {
			bad("version %d published by %q: only a weir serve process publishes its configuration", ev.Version, ev.By)
		}
		last = ev.Version
		h.versions = append(h.versions, configVersion{State: aggregate.EvolveConfig(aggregate.ConfigState{}, ev), Sequence: r.Sequence, At: r.Time})
	}
	return h
}

// chainGenesis is the latest configuration version that records the chain
// (aggregate.Config.ChainGenesis): the chain weir pays on now.
func (h configHistory) chainGenesis() (configVersion, bool) {
	for i := len(h.versions) - 1; i >= 0; i-- {
		if h.versions[i].State.Config.ChainGenesis != "" {
			return h.versions[i], true
		}
	}
	return configVersion{}, false
}

// known reports whether the log records any configuration.
func (h configHistory) known() bool { return len(h.versions) > 0 }

// inForceAt is the configuration in force for an event at stream sequence
// seq: the last version stored before it (false: none yet).
func (h configHistory) inForceAt(seq uint64) (configVersion, bool) {
	i := sort.Search(len(h.versions), func(i int) bool { return h.versions[i].Sequence >= seq })
	if i == 0 {
		return configVersion{}, false
	}
	return h.versions[i-1], true
}

// previous is the version in force just before v (false: v is the first).
func (h configHistory) previous(v configVersion) (configVersion, bool) {
	return h.inForceAt(v.Sequence)
}

// checkActor judges who did something against the configuration in force
// at seq: a principal holding one of roles (acting on account, when given).
// system: weir itself (aggregate.SystemActor) may do it too.
func (h configHistory) checkActor(seq uint64, by, what, account string, system bool, roles ...string) (string, bool) {
	cv, ok := h.inForceAt(seq)
	if !ok {
		return "", true
	}
	if system && by == aggregate.SystemActor {
		return "", true
	}
	p, ok := cv.State.Config.Principal(by)
	if !ok {
		return fmt.Sprintf("%s by %q, who is no principal in %s", what, by, cv.label()), false
	}
	held := false
	for _, r := range roles {
		held = held || p.Has(r)
	}
	if !held {
		return fmt.Sprintf("%s by %s, whose roles %v in %s do not include %v", what, by, p.Roles, cv.label(), roles), false
	}
	if account != "" && !p.MayAct(account) {
		return fmt.Sprintf("%s by %s on account %s, outside the accounts %v it may act on in %s", what, by, account, p.Accounts, cv.label()), false
	}
	return "", true
}

// dailyLimitSlack is how long after a configuration change a reservation
// may still carry the limit of the version before it: the ledger read the
// configuration just before deciding, and no append fences the two
// streams against each other.
const dailyLimitSlack = 10 * time.Second

// checkDailyLimit judges a reservation's recorded daily limit against the
// limit in force at its position in the log.
func (h configHistory) checkDailyLimit(rec eventstore.Record, recorded aggregate.Amount) (string, bool) {
	cv, ok := h.inForceAt(rec.Sequence)
	if !ok {
		return "", true
	}
	limit := cv.State.Config.DailyLimit
	if recorded.Equal(limit) {
		return "", true
	}
	if prev, ok := h.previous(cv); ok && recorded.Equal(prev.State.Config.DailyLimit) && rec.Time.Sub(cv.At) < dailyLimitSlack {
		return "", true // decided on the version just replaced
	}
	return fmt.Sprintf("reserved under daily_limit %q, but %s set daily_limit %q", recorded.String(), cv.label(), limit.String()), false
}

// checkHotWallet judges an address that signs or owns an envelope against
// the hot wallets in force at seq.
func (h configHistory) checkHotWallet(seq uint64, address, what string) (string, bool) {
	cv, ok := h.inForceAt(seq)
	if !ok || cv.State.Config.IsHotWallet(address) {
		return "", true
	}
	return fmt.Sprintf("%s %s, not a hot wallet in %s (hot wallets %v)", what, address, cv.label(), cv.State.Config.HotWallets), false
}
