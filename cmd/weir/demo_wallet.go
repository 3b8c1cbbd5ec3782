package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/sagas/notify"
)

// demoWalletLow is the demo engine's --wallet-low-usdt.
const demoWalletLow = "100"

// sceneWalletDry: the hot wallet cannot pay; sending pauses (the
// withdrawal stays approved, nothing is built), the wallet is funded, and
// sending resumes by itself. The wallet's readings are taken when the
// scene says (Refresh), not on the monitor's timer, so every run tells the
// same story.
func (d *demoWorld) sceneWalletDry() error {
	mon := d.eng.wallet
	hot := d.signer.Address()
	mark, err := d.notifyMark()
	if err != nil {
		return err
	}
	d.sim.SetBalance(hot, big.NewInt(40_000_000))
	if err := mon.Refresh(d.ctx); err != nil {
		return err
	}
	d.say(1, "the demo empties the simulated hot wallet down to 40 USDT (its low mark is %s USDT); weir reads it:", demoWalletLow)
	d.sayWallet(mon.Status())

	id, err := d.requestApproved(demoAddress("scene 7"), "250")
	if err != nil {
		return err
	}
	w7, err := d.newWorker("worker-7", nil, mon)
	if err != nil {
		return err
	}
	d.say(1, "worker-7 (with the hot wallet as its send gate, as in weir serve) visits it three times, a block apart:")
	for range 3 {
		if _, err := w7.Drive(d.ctx, id); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		d.sim.Advance(1)
	}
	w, err := d.load(id)
	if err != nil {
		return err
	}
	s := mon.Status()
	d.sayWallet(s)
	d.expect(w.State == aggregate.StateApproved && w.TxID() == "" && len(d.sends(w)) == 0 && w.Reserved,
		"paused, not failed: %s stays %s, reserved, no envelope built, nothing sent", id, w.State)
	d.expect(s.Sending == hotwallet.SendingPaused && s.PausedReason != nil && strings.Contains(*s.PausedReason, "USDT short"),
		"GET /v1/wallet says why: sending %s", s.Sending)

	if err := d.sim.Fund(hot, big.NewInt(500_000_000), 0); err != nil {
		return err
	}
	if err := mon.Refresh(d.ctx); err != nil {
		return err
	}
	d.say(1, "500 USDT arrive (the simulated node's Fund, what POST /sim/fund does); at its next reading weir sees them:")
	d.sayWallet(mon.Status())
	d.say(1, "worker-7 goes on visiting, nobody touches the withdrawal:")
	if err := d.drive([]string{id}, w7); err != nil {
		return err
	}
	if _, err := d.timeline(id, 0); err != nil {
		return err
	}
	if _, err := d.paidOnce(id); err != nil {
		return err
	}

	notes, err := d.walletNotes(mark)
	if err != nil {
		return err
	}
	d.say(1, "what WEIR_NOTIFY received on weir.notify.wallet.> meanwhile (and webhooks registered for these types):")
	var types []string
	for _, n := range notes {
		d.say(2, "%-36s %s  event_id %s", n.subject, n.Type, n.EventID)
		types = append(types, n.Type)
	}
	want := []string{hotwallet.ChangeLow, hotwallet.ChangePaused, hotwallet.ChangeRecovered, hotwallet.ChangeResumed}
	d.expect(strings.Join(types, ",") == strings.Join(want, ","), "each change announced once: %s", strings.Join(want, " → "))
	return nil
}

func (d *demoWorld) sayWallet(s hotwallet.Status) {
	why := ""
	if s.PausedReason != nil {
		why = " — " + *s.PausedReason
	}
	d.say(2, "GET /v1/wallet: usdt %s, trx %s, sending %s%s", s.USDT, s.TRX, s.Sending, why)
}

type demoWalletNote struct {
	subject string
	notify.WalletNotification
}

// notifyMark waits until the announcer has published what the monitor
// told it, and returns WEIR_NOTIFY's last sequence: what walletNotes, given
// it, leaves out.
func (d *demoWorld) notifyMark() (uint64, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	if err := d.eng.walletNotes.Idle(ctx); err != nil {
		return 0, err
	}
	info, err := d.eng.notifyStream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// walletNotes waits until the announcer has published what the monitor
// told it, then reads the wallet notifications of WEIR_NOTIFY after stream
// sequence after (notifyMark's), with one consumer filtered on them, rather
// than fetching every message of the stream one by one.
func (d *demoWorld) walletNotes(after uint64) ([]demoWalletNote, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	if err := d.eng.walletNotes.Idle(ctx); err != nil {
		return nil, err
	}
	cons, err := d.eng.notifyStream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{notify.WalletSubjectPrefix + ".>"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1,
		InactiveThreshold: time.Minute, // the server drops it by itself
	})
	if err != nil {
		return nil, err
	}
	info := cons.CachedInfo()
	if info == nil {
		return nil, errors.New("wallet notifications: no consumer info")
	}
	// What is there now; the announcer is idle, so nothing more of the
	// scene is on its way.
	want := int(info.NumPending)
	var out []demoWalletNote
	for len(out) < want {
		batch, err := cons.Fetch(want-len(out), jetstream.FetchContext(ctx))
		if err != nil {
			return nil, err
		}
		for m := range batch.Messages() {
			var n notify.WalletNotification
			if err := json.Unmarshal(m.Data(), &n); err != nil {
				return nil, err
			}
			out = append(out, demoWalletNote{subject: m.Subject(), WalletNotification: n})
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("wallet notifications: %w", err)
		}
	}
	return out, nil
}
