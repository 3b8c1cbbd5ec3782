package aggregate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	opID      = "5f0c7a3e-2b1d-4c8e-9a6f-1d2e3f4a5b6c"
	requester = "alice"
	toAddr    = "TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy"
)

func usdt(s string) Amount { return MustParseAmount(USDT, s) }

func mustPolicy(t testing.TB, name string, version int, rules ...Rule) Policy {
	t.Helper()
	p, err := NewPolicy(name, rules)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p.WithVersion(version)
}

// policyNeeding is a single-rule policy: every amount needs n approvers.
func policyNeeding(t testing.TB, n, version int) Policy {
	return mustPolicy(t, "flat", version, Rule{Name: "flat", Threshold: Amount{}, Approvers: n})
}

func fourEyes(t testing.TB) Policy {
	t.Helper()
	p, err := FourEyes(usdt("1000"))
	if err != nil {
		t.Fatal(err)
	}
	return p.WithVersion(1)
}

// envelope builds a self-consistent envelope (txid = sha256(raw)) from a seed.
func envelope(seed string, expiration int64) Envelope {
	raw := []byte("raw-data:" + seed)
	sum := sha256.Sum256(raw)
	ref := blockID(refBlock)
	return Envelope{
		TxID:         hex.EncodeToString(sum[:]),
		RawDataHex:   hex.EncodeToString(raw),
		Expiration:   expiration,
		FeeLimit:     30_000_000,
		RefBlockNum:  refBlock,
		RefBlockHash: hex.EncodeToString(ref[8:16]),
	}
}

// refBlock is every test envelope's TAPoS reference block.
const refBlock = int64(70_000_000)

// blockID is a TRON-shaped block id: the 8-byte block number, then a hash.
func blockID(n int64) [32]byte {
	var id [32]byte
	sum := sha256.Sum256(fmt.Appendf(nil, "block %d", n))
	copy(id[:], sum[:])
	binary.BigEndian.PutUint64(id[:8], uint64(n))
	return id
}

func blockIDHex(n int64) string {
	id := blockID(n)
	return hex.EncodeToString(id[:])
}

// signature is a well-formed 65-byte signature (v = 1) filled with b.
func signature(b byte) string {
	return strings.Repeat(hex.EncodeToString([]byte{b}), 64) + "01"
}

const exp1 = int64(1_740_830_460_000) // chain ms

// proof is evidence that an envelope expiring at exp is dead.
// The scan runs from the envelopes' reference block to a block a minute
// past expiration + margin.
func proof(exp int64) Evidence {
	to := refBlock + 123
	return Evidence{
		SolidBlockNumber: to, SolidBlockTime: exp + 60_000, Expiration: exp, Margin: 30_000, Lookup: LookupNotFound,
		Scan: BlockScan{
			From: refBlock, FromID: blockIDHex(refBlock), FromTime: exp - 120_000,
			To: to, ToID: blockIDHex(to), ToTime: exp + 60_000,
			IDsSHA256: strings.Repeat("ab", 32),
		},
	}
}

// step decides c on w, requires exactly one event, and applies it.
func step(t testing.TB, w Withdrawal, c Command) Withdrawal {
	t.Helper()
	evs, err := Decide(w, c)
	if err != nil {
		t.Fatalf("Decide(%T) in %s: %v", c, w.State, err)
	}
	if len(evs) != 1 {
		t.Fatalf("Decide(%T) in %s: want 1 event, got %d", c, w.State, len(evs))
	}
	return Evolve(w, evs[0])
}

type pathOpts struct {
	unreserved bool
	unrouted   bool
	internal   bool
}

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func requestCmd(t testing.TB) RequestWithdrawal {
	return RequestWithdrawal{ID: opID, Account: "acct-1", ToAddress: toAddr, Amount: usdt("1500"),
		Asset: USDT.Code, RequestedBy: requester, Policy: fourEyes(t), At: at(0)}
}

// happyPath lists the commands that take a fresh withdrawal to confirmed on
// the external route; reach stops where asked.
func happyPath(t testing.TB, o pathOpts) []Command {
	env := envelope("one", exp1)
	cmds := []Command{requestCmd(t)}
	if !o.unreserved {
		cmds = append(cmds, RecordReservation{At: at(1)})
	}
	cmds = append(cmds,
		Approve{By: "bob", Policy: fourEyes(t), At: at(2)},
		Approve{By: "carol", Policy: fourEyes(t), At: at(3)},
	)
	if o.unrouted {
		return cmds
	}
	if o.internal {
		r, _ := InternalRoute("acct-2", "custodied destination")
		return append(cmds, ChooseRoute{Route: r, At: at(4)})
	}
	r, _ := ExternalRoute("not custodied")
	return append(cmds,
		ChooseRoute{Route: r, At: at(4)},
		ClaimWithdrawal{Worker: "w1", LeaseUntil: at(10), At: at(4)},
		BuildEnvelope{Envelope: env, Policy: fourEyes(t), At: at(5)},
		RecordSignature{Policy: fourEyes(t), TxID: env.TxID, Signature: signature(0xaa), At: at(6)},
		RecordBroadcastIntent{TxID: env.TxID, Send: 1, At: at(7)},
		RecordAccepted{TxID: env.TxID, Send: 1, Result: "SUCCESS", At: at(8)},
		Confirm{TxID: env.TxID, BlockNumber: 100, BlockTime: exp1 - 30_000, Receipt: ReceiptSuccess, At: at(9)},
	)
}

// reach folds a withdrawal to the given state through Decide.
func reach(t testing.TB, s State, o pathOpts) Withdrawal {
	t.Helper()
	var w Withdrawal
	switch s {
	case StateNone:
		return w
	case StateRejected:
		w = step(t, w, requestCmd(t))
		if !o.unreserved {
			w = step(t, w, RecordReservation{At: at(1)})
		}
		return step(t, w, Cancel{By: requester, At: at(2)})
	case StateFailed:
		w = reach(t, StateSigning, o)
		return step(t, w, Fail{Reason: "signer_refused", At: at(20)})
	}
	for _, c := range happyPath(t, o) {
		if w.State == s && (s != StateApproved || !routePending(w, o)) {
			return w
		}
		w = step(t, w, c)
	}
	if w.State != s {
		t.Fatalf("cannot reach %s (at %s)", s, w.State)
	}
	return w
}

// routePending keeps reach going in approved until the route (and claim) is
// recorded, so the approved fixture is ready to build an envelope.
func routePending(w Withdrawal, o pathOpts) bool {
	if o.unrouted {
		return false
	}
	if o.internal {
		return w.Route.IsZero()
	}
	return w.Route.IsZero() || w.Claim.Worker == ""
}

func bigInt(v int64) *big.Int { return big.NewInt(v) }
