package tron

import (
	"bytes"
	"math/big"
)

// ---- inspection (never faulted) ----------------------------------------

// CurrentHead returns the head without consuming faults.
func (s *SimNode) CurrentHead() BlockHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header(s.head)
}

// CurrentSolidHead returns the solid head without consuming faults.
func (s *SimNode) CurrentSolidHead() BlockHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header(s.solidNumber())
}

// Block returns the header of block n if it exists.
func (s *SimNode) Block(n int64) (BlockHeader, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < s.startNumber || n > s.head {
		return BlockHeader{}, false
	}
	return s.header(n), true
}

// Status is Lookup (solid=false) or SolidLookup (solid=true) without faults.
func (s *SimNode) Status(txid [32]byte, solid bool) TxStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status(txid, solid)
}

// Transaction returns the signed bytes the node holds for txid (pending or
// included) and its status, without consuming faults.
func (s *SimNode) Transaction(txid [32]byte) (SignedTx, TxStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, ok := s.known[txid]
	if !ok {
		return SignedTx{}, TxStatus{}, false
	}
	signed := SignedTx{Raw: bytes.Clone(tx.signed.Raw), Signature: bytes.Clone(tx.signed.Signature)}
	return signed, s.status(txid, false), true
}

// PendingCount returns the number of transactions in the pool.
func (s *SimNode) PendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pool)
}

// BroadcastLog returns every Broadcast call so far, in arrival order.
func (s *SimNode) BroadcastLog() []BroadcastRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]BroadcastRecord(nil), s.log...)
}

func (tx *simTx) asTransfer() Transfer {
	return Transfer{
		TxID:        tx.txid,
		Contract:    tx.transfer.Contract,
		From:        tx.transfer.Owner,
		To:          tx.transfer.To,
		Amount:      new(big.Int).Set(tx.transfer.Amount),
		BlockNumber: tx.block,
		BlockTime:   tx.blockTime,
		Receipt:     tx.receipt,
		Worker:      tx.worker,
	}
}

// Transfers returns every included transfer (whatever its receipt), in
// inclusion order. Each txid appears at most once: the chain deduplicates.
func (s *SimNode) Transfers() []Transfer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Transfer, 0, len(s.included))
	for _, tx := range s.included {
		out = append(out, tx.asTransfer())
	}
	return out
}

// TransferByTxID returns the included transfer with this txid.
func (s *SimNode) TransferByTxID(txid [32]byte) (Transfer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, ok := s.known[txid]
	if !ok || tx.block == 0 {
		return Transfer{}, false
	}
	return tx.asTransfer(), true
}

// Ledger totals the included transfers.
func (s *SimNode) Ledger() LedgerSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := LedgerSummary{Total: new(big.Int)}
	for _, tx := range s.included {
		sum.Included++
		if tx.receipt == ReceiptSuccess {
			sum.Succeeded++
			sum.Total.Add(sum.Total, tx.transfer.Amount)
		} else {
			sum.Failed++
		}
	}
	return sum
}

// Balance returns the modelled token balance of a (nil when balances are
// not modelled).
func (s *SimNode) Balance(a Address) *big.Int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.balances == nil {
		return nil
	}
	return new(big.Int).Set(s.balanceOf(a))
}

// SetBalance sets a's modelled token balance (nil means zero), turning
// balance modelling on if it was off.
func (s *SimNode) SetBalance(a Address, amount *big.Int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes++
	if s.balances == nil {
		s.balances = map[Address]*big.Int{}
	}
	b := new(big.Int)
	if amount != nil {
		b.Set(amount)
	}
	s.balances[a] = b
}

// TxInfo returns the receipt of an included transaction (what
// gettransactioninfobyid serves), without consuming faults.
func (s *SimNode) TxInfo(txid [32]byte) (TxInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, ok := s.known[txid]
	if !ok || tx.block == 0 {
		return TxInfo{}, false
	}
	return tx.info(), true
}

func (tx *simTx) info() TxInfo {
	return TxInfo{
		TxID: tx.txid, BlockNumber: tx.block, BlockTime: tx.blockTime,
		Receipt: tx.receipt, Message: tx.message, FeeSun: tx.cost.total(),
		EnergyUsed: tx.cost.energyUsed, EnergyFromStake: tx.cost.energyStaked, EnergyFeeSun: tx.cost.energyFee,
		NetUsage: tx.cost.netUsage, NetFeeSun: tx.cost.netFee,
	}
}
