package main

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"time"

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
	notesBefore, err := d.walletNotes()
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

	notes, err := d.walletNotes()
	if err != nil {
		return err
	}
	notes = notes[len(notesBefore):]
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

// walletNotes waits until the announcer has published what the monitor
// told it, then reads every wallet notification of WEIR_NOTIFY.
func (d *demoWorld) walletNotes() ([]demoWalletNote, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	if err := d.eng.walletNotes.Idle(ctx); err != nil {
		return nil, err
	}
	info, err := d.eng.notifyStream.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []demoWalletNote
	for seq := info.State.FirstSeq; seq >= 1 && seq <= info.State.LastSeq; seq++ {
		m, err := d.eng.notifyStream.GetMsg(ctx, seq)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(m.Subject, notify.WalletSubjectPrefix+".") {
			continue
		}
		var n notify.WalletNotification
		if err := json.Unmarshal(m.Data, &n); err != nil {
			return nil, err
		}
		out = append(out, demoWalletNote{subject: m.Subject, WalletNotification: n})
	}
	return out, nil
}
