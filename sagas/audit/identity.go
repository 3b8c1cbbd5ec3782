package audit

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/weir-payouts/weir/tron"
)

// Which chain the node serves. A node answering at the configured address
// may serve any chain — another simulated chain, a testnet, a fork — and
// what it says about txids proves nothing unless it is the chain the log
// was written against. The expected identity comes from outside the node:
//
//   - Options.ExpectGenesis (`weir audit --expect-genesis`): block 0's id;
//   - the log's configuration: `weir serve` records the genesis block id
//     of the chain it pays on (aggregate.Config.ChainGenesis), so block 0
//     is checked even on a log without envelopes; --expect-genesis, when
//     given, overrides it (a note says when they differ);
//   - the log itself: every envelope records the block it refers to
//     (ref_block_num, and ref_block_hash = bytes 8..16 of that block's id),
//     read from the chain weir paid on when it built the envelope. The
//     node's solid block at that height must carry that id.

// ParseGenesis reads an expected genesis block id: 64 hex digits, or
// "mainnet" for tron.MainnetGenesisID. It returns the id in lower case.
func ParseGenesis(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "mainnet" {
		return tron.MainnetGenesisID, nil
	}
	s = strings.TrimPrefix(s, "0x")
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return "", fmt.Errorf("genesis block id %q: want 64 hex digits (a block id) or \"mainnet\"", s)
	}
	return s, nil
}

// refBlock is a block an envelope of the log refers to.
type refBlock struct {
	wa      *Replay
	version uint64
	num     int64
	hash    string // ref_block_hash: bytes 8..16 of the block id, hex
}

// logRefBlocks are the earliest and the latest block the envelopes in force
// refer to (one when they are the same; none for a log without them).
func logRefBlocks(was []*Replay) []refBlock {
	var first, last *refBlock
	for _, wa := range was {
		env := wa.w.Envelope
		if env.RefBlockNum <= 0 || len(env.RefBlockHash) != 16 {
			continue
		}
		r := refBlock{wa: wa, version: wa.w.Version, num: env.RefBlockNum, hash: strings.ToLower(env.RefBlockHash)}
		if first == nil || r.num < first.num {
			first = &r
		}
		if last == nil || r.num > last.num {
			last = &r
		}
	}
	switch {
	case first == nil:
		return nil
	case first.num == last.num:
		return []refBlock{*first}
	}
	return []refBlock{*first, *last}
}

// checkIdentity checks that the node serves the expected chain: block 0
// against Options.ExpectGenesis, and the blocks the log's envelopes refer
// to against the node's blocks at those heights. A node of another chain
// is a violation ("chain_identity"); a node that cannot say (no genesis
// when one is expected) is "chain unavailable", a note. Either way it
// returns false and nothing else is asked of the node. sum.Genesis is
// the node's genesis id when withoutPredating could read it.
func (a *auditor) checkIdentity(ctx context.Context, opts Options, solid int64, was []*Replay, sum *ChainSummary) bool {
	var how []string
	// want is the genesis the node must serve; expected says, for a
	// person, where it comes from.
	want := opts.ExpectGenesis
	expected := "the expected " + want
	if lv, ok := a.configs.chainGenesis(); ok {
		sum.LogGenesis = lv.State.Config.ChainGenesis
		switch {
		case want == "":
			want = sum.LogGenesis
			expected = fmt.Sprintf("%s, the one recorded in the log by %s", want, lv.label())
			how = append(how, "log genesis")
		case want == sum.LogGenesis:
			how = append(how, "genesis") // the flag's; log_genesis says the log agrees
		default:
			a.add(Finding{Severity: Note, Check: "chain_identity", What: fmt.Sprintf("--expect-genesis %s overrides the genesis block %s recorded in the log by %s", want, sum.LogGenesis, lv.label())})
			how = append(how, "genesis")
		}
	} else if want != "" {
		how = append(how, "genesis")
	}
	if want != "" {
		sum.ExpectedGenesis = want
		switch {
		case sum.Genesis == "":
			sum.Identity = "unknown"
			sum.Note = fmt.Sprintf("chain unavailable: the node at %s did not tell its genesis block, so it cannot be checked against %s: chain checks skipped", opts.NodeURL, expected)
			a.add(Finding{Severity: Note, Check: "chain_identity", What: sum.Note})
			return false
		case sum.Genesis != want:
			sum.Identity = "mismatch"
			sum.Note = fmt.Sprintf("the node at %s serves the chain whose genesis block is %s, not %s: chain checks skipped (they would ask the wrong chain)", opts.NodeURL, sum.Genesis, expected)
			a.add(Finding{Severity: Violation, Check: "chain_identity", What: sum.Note})
			return false
		}
	}
	matched := false
	for _, r := range logRefBlocks(was) {
		if r.num > solid {
			continue // not solid on this node (yet): proves nothing either way
		}
		bctx, cancel := context.WithTimeout(ctx, opts.NodeTimeout)
		b, err := opts.Node.SolidBlockByNum(bctx, r.num)
		cancel()
		if err != nil {
			a.add(Finding{Severity: Note, Check: "chain_identity", Withdrawal: r.wa.ID, Version: r.version,
				What: fmt.Sprintf("could not read block %d to check the node serves the chain this envelope was built on: %v", r.num, err)})
			continue
		}
		if got := b.Header.RefBlockHash(); hex.EncodeToString(got[:]) != r.hash {
			sum.Identity = "mismatch"
			sum.Note = fmt.Sprintf("the node at %s serves another chain than the one weir paid on: its block %d has id %s, but the envelope of withdrawal %s (event %d) was built on block %d with ref_block_hash %s: chain checks skipped",
				opts.NodeURL, r.num, b.Header.IDHex(), r.wa.ID, r.version, r.num, r.hash)
			a.add(Finding{Severity: Violation, Check: "chain_identity", Withdrawal: r.wa.ID, Version: r.version, What: sum.Note})
			return false
		}
		matched = true
	}
	if matched {
		how = append(how, "log blocks")
	}
	sum.Identity = strings.Join(how, "+")
	if sum.Identity == "" {
		sum.Identity = "unchecked"
	}
	return true
}
