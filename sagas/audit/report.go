package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/weir-payouts/weir/aggregate"
)

// Severity grades a finding: a violation fails the audit; a warning and a
// note are reported and do not.
type Severity string

// Severities of a finding.
const (
	Violation Severity = "violation"
	Warning   Severity = "warning"
	Note      Severity = "note"
)

// Finding is one thing the audit found: where (withdrawal or account, event
// version and type, stream sequence) and what.
type Finding struct {
	Severity   Severity `json:"severity"`
	Check      string   `json:"check"`
	Withdrawal string   `json:"withdrawal,omitempty"`
	Account    string   `json:"account,omitempty"`
	Version    uint64   `json:"version,omitempty"`  // the event's version in its stream; 0 = the stream as a whole
	Sequence   uint64   `json:"sequence,omitempty"` // the event's stream sequence, when known
	Event      string   `json:"event,omitempty"`
	What       string   `json:"what"`
}

// Where says where the finding is, for a human: "withdrawal ID event 4
// (withdrawal.approved)", "account acme", "store sequence 17".
func (f Finding) Where() string {
	var b strings.Builder
	switch {
	case f.Withdrawal != "":
		b.WriteString("withdrawal " + f.Withdrawal)
	case f.Account != "":
		b.WriteString("account " + f.Account)
	default:
		b.WriteString("store")
	}
	if f.Version > 0 {
		fmt.Fprintf(&b, " event %d", f.Version)
		if f.Event != "" {
			b.WriteString(" (" + f.Event + ")")
		}
	} else if f.Sequence > 0 {
		fmt.Fprintf(&b, " sequence %d", f.Sequence)
		if f.Event != "" {
			b.WriteString(" (" + f.Event + ")")
		}
	}
	return b.String()
}

// Report is the outcome of an audit (`weir audit --json` prints it).
type Report struct {
	OK             bool           `json:"ok"`
	Scope          string         `json:"scope"` // "withdrawal" or "all"
	StreamSequence uint64         `json:"stream_sequence"`
	Withdrawals    int            `json:"withdrawals"`
	Events         int            `json:"events"`
	Accounts       int            `json:"accounts"`
	States         map[string]int `json:"states"`
	Policy         PolicySummary  `json:"policy"`
	Chain          ChainSummary   `json:"chain"`
	Violations     []Finding      `json:"violations"`
	Warnings       []Finding      `json:"warnings"`
	Notes          []Finding      `json:"notes"`
	Withdrawal     *Replay        `json:"withdrawal,omitempty"` // scope "withdrawal": the timeline
	Elapsed        string         `json:"elapsed"`
}

// PolicySummary is the policy in force at the end of the audited log.
type PolicySummary struct {
	Version   int       `json:"version"`
	Name      string    `json:"name"`
	ChangedBy string    `json:"changed_by,omitempty"`
	ChangedAt time.Time `json:"changed_at,omitzero"`
	Versions  int       `json:"versions"` // stored versions
}

// ChainSummary says whether and how the log was checked against the chain.
type ChainSummary struct {
	Node         string `json:"node"`
	Checked      bool   `json:"checked"`
	Note         string `json:"note,omitempty"`
	SolidBlock   int64  `json:"solid_block,omitempty"`
	TxIDs        int    `json:"txids"`
	LookupErrors int    `json:"lookup_errors"`
	// Unavailable counts the withdrawals requested before the node's chain
	// began: "chain unavailable", noted and not checked.
	Unavailable int `json:"chain_unavailable,omitempty"`

	// Which chain the node serves: its genesis block id, the one expected
	// (--expect-genesis, else the log's), and how the chain was identified:
	// "genesis" (the expected genesis), "log genesis" (the genesis the
	// log's configuration records), "log blocks" (the blocks the log's
	// envelopes were built on carry the ids the log recorded), joined by "+",
	// "unchecked" (nothing to compare), "mismatch" (another chain: a
	// violation, and no chain check ran) or "unknown" (a genesis was
	// expected and the node did not tell its own).
	Genesis         string `json:"genesis,omitempty"`
	ExpectedGenesis string `json:"expected_genesis,omitempty"`
	Identity        string `json:"chain_identity,omitempty"`
	// LogGenesis is the genesis block id the log's configuration records
	// (the latest version that records one; "" for a log older than that).
	LogGenesis string `json:"log_genesis,omitempty"`

	// The chain side (scope "all"): every USDT transfer out of HotWallets
	// in solid blocks FromBlock..ToBlock matched to a confirmed withdrawal,
	// and the reverse. TwoSided: the whole range was read and matched.
	TwoSided      bool     `json:"two_sided"`
	ChainSideNote string   `json:"chain_side_note,omitempty"`
	HotWallets    []string `json:"hot_wallets,omitempty"`
	FromBlock     int64    `json:"chain_from_block,omitempty"`
	ToBlock       int64    `json:"chain_to_block,omitempty"`
	CheckedBlocks int      `json:"chain_checked_blocks"`
	UnreadBlocks  int      `json:"chain_unread_blocks,omitempty"`
	// Transfers counts the successful USDT transfers out of a hot wallet in
	// the range; Matched those matching a confirmed withdrawal (txid,
	// payee, amount); InFlight those whose withdrawal is not confirmed in
	// the log yet; FailedTransfers the hot wallet's transactions in the
	// range with a failed receipt (they moved nothing).
	Transfers       int `json:"chain_transfers"`
	Matched         int `json:"matched_chain_transfers"`
	InFlight        int `json:"chain_in_flight,omitempty"`
	FailedTransfers int `json:"chain_failed_transfers,omitempty"`
	// UnmatchedTransfers are transfers no confirmed withdrawal names (paid
	// outside weir, or the log lost events); UnmatchedWithdrawals the
	// confirmed withdrawals recorded in the range whose transfer is not
	// there; OutsideRange counts confirmed withdrawals recorded outside it.
	UnmatchedTransfers   []ChainTransferRecord `json:"unmatched_chain_transfers"`
	UnmatchedWithdrawals []MissingTransfer     `json:"unmatched_withdrawals"`
	OutsideRange         int                   `json:"confirmed_outside_range,omitempty"`
}

// ChainGaps lists what the audit could not check on the chain ("chain
// unavailable"): no node or an unreachable one, lookups or proofs the
// node did not answer, withdrawals older than its chain, and, for scope
// "all", a chain side that did not read its whole range. Empty: every
// chain check ran. A gap is never a violation; `weir audit
// --require-chain` makes it an exit status of its own.
func (r *Report) ChainGaps() []string {
	c := r.Chain
	var gaps []string
	if !c.Checked {
		return []string{c.Note}
	}
	if c.LookupErrors > 0 {
		gaps = append(gaps, fmt.Sprintf("%d lookup(s) or proof(s) the node did not answer", c.LookupErrors))
	}
	if c.Unavailable > 0 {
		gaps = append(gaps, fmt.Sprintf("%d withdrawal(s) requested before the node's chain began", c.Unavailable))
	}
	if r.Scope == "all" && !c.TwoSided {
		gaps = append(gaps, "chain side: "+c.ChainSideNote)
	}
	return gaps
}

// Replay is one withdrawal stream replayed, with its timeline and findings.
type Replay struct {
	ID       string          `json:"id"`
	State    aggregate.State `json:"state"`
	Version  uint64          `json:"version"`
	Account  string          `json:"account"`
	To       string          `json:"to_address"`
	Amount   string          `json:"amount"`
	Units    string          `json:"amount_units"`
	Asset    string          `json:"asset"`
	By       string          `json:"requested_by"`
	Route    aggregate.Route `json:"route"`
	TxID     string          `json:"txid,omitempty"`
	Attempt  int             `json:"attempt"`
	Retired  []string        `json:"retired_txids"`
	Timeline []Entry         `json:"timeline"`
	Checks   []Finding       `json:"findings,omitempty"` // findings not tied to one event
	w        aggregate.Withdrawal
	found    []Finding // every finding of this withdrawal, in order
	endedAt  time.Time // server time of the terminal event
	txids    []txidRecord
	proofs   []proofRecord
	authSeq  uint64 // stream sequence of the authorisation point (0 = none)
}

// Entry is one event of a withdrawal's replay.
type Entry struct {
	Version  uint64          `json:"version"`
	Sequence uint64          `json:"sequence"`
	At       time.Time       `json:"at"`
	Type     string          `json:"type"`
	State    aggregate.State `json:"state"`
	Details  Details         `json:"details"`
	Findings []Finding       `json:"findings,omitempty"`
}

// Detail is one key fact of an event.
type Detail struct{ K, V string }

// Details are an event's key facts, in display order.
type Details []Detail

// MarshalJSON writes the facts as one object, in order.
func (d Details) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.K)
		v, _ := json.Marshal(kv.V)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// UnmarshalJSON reads the object back, keeping its order.
func (d *Details) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("details: not an object")
	}
	*d = nil
	for dec.More() {
		var k, v string
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ = t.(string)
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*d = append(*d, Detail{k, v})
	}
	return nil
}

func (d Details) String() string {
	parts := make([]string, len(d))
	for i, kv := range d {
		parts[i] = kv.K + "=" + kv.V
	}
	return strings.Join(parts, " ")
}

// StateName is a state for a human: "(new)" before the first event.
func StateName(s aggregate.State) string {
	if s == aggregate.StateNone {
		return "(new)"
	}
	return string(s)
}

// fmtTime formats a server or event time for a finding.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtMs formats a chain time (ms since the epoch) for a finding.
func fmtMs(ms int64) string {
	if ms == 0 {
		return "0"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
