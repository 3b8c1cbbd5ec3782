package tron

import (
	"context"
	"errors"
	"fmt"
)

// Node is what the broadcast saga needs of a TRON full node. Implementations:
// *SimNode (in process) and tronhttp's client (java-tron's HTTP API).
//
// Nothing a Node says is proof on its own: a broadcast answer is a hint
// (see BroadcastResult), and "unknown" from Lookup only becomes evidence of
// death together with a solid block whose timestamp is past the expiration.
// Timeouts are errors wrapping ErrTimeout; an erroring Broadcast is ambiguous.
type Node interface {
	// Broadcast sends the exact signed bytes. A non-SUCCESS code is not an
	// error; the error is for transport failures (ErrTimeout, ErrUnavailable).
	Broadcast(ctx context.Context, tx SignedTx) (BroadcastResult, error)
	// Lookup reports whether the node has the txid in a block (Included,
	// solid or not), in its pending pool (Pending), or not at all (Unknown).
	Lookup(ctx context.Context, txid [32]byte) (TxStatus, error)
	// SolidLookup asks the solidity view: Included only once the containing
	// block is solid; otherwise Unknown (it never answers Pending).
	SolidLookup(ctx context.Context, txid [32]byte) (TxStatus, error)
	// Head is the latest block; SolidHead the latest solid block.
	Head(ctx context.Context) (BlockHeader, error)
	SolidHead(ctx context.Context) (BlockHeader, error)
	// RefBlock is the block to take TAPoS fields from (the solid head: it
	// cannot be reorganised away, so the reference stays valid).
	RefBlock(ctx context.Context) (BlockHeader, error)
	// SolidBlockByNum returns solid block num with the id of every transaction it holds.
	// A node (backend) that has no such solid block answers an error wrapping ErrBlockNotSolid — never an empty block.
	SolidBlockByNum(ctx context.Context, num int64) (Block, error)
	// SolidTxInfosByBlockNum returns the receipts of every transaction in solid block num (one call per block).
	//
	// java-tron answers [] for a block it does not have, so an empty (or
	// short) list proves nothing: compare it with SolidBlockByNum's TxIDs.
	SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]TxInfo, error)
	// TxInfosByBlockNum returns the receipts of every transaction in block
	// num as the node's head view holds it, solid or not (one call per
	// block; java-tron's /wallet/gettransactioninfobyblocknum). A block
	// that is not solid yet can still be replaced in a fork, so what it
	// holds is a hint that a transaction was included, never proof of
	// anything; and java-tron answers [] for a block it does not have (past
	// its head, say), so an empty list proves nothing either.
	TxInfosByBlockNum(ctx context.Context, num int64) ([]TxInfo, error)
}

// Block is a solid block as the solidity view serves it.
type Block struct {
	Header   BlockHeader
	ParentID [32]byte
	TxIDs    [][32]byte
}

// TxInfo is one transaction's receipt as gettransactioninfobyblocknum serves it.
type TxInfo struct {
	TxID                   [32]byte
	BlockNumber, BlockTime int64
	Receipt                ReceiptResult
	Message                string
	// FeeSun is all the TRX the transaction burnt (info.fee): energy,
	// bandwidth and memo fee. A failed receipt burns it too.
	FeeSun int64
	// EnergyUsed is receipt.energy_usage_total; EnergyFromStake
	// receipt.energy_usage (staked energy); EnergyFeeSun receipt.energy_fee
	// (sun burnt for the rest).
	EnergyUsed, EnergyFromStake, EnergyFeeSun int64
	// NetUsage is the bandwidth staking or the free allowance covered;
	// NetFeeSun the sun burnt for bandwidth instead.
	NetUsage, NetFeeSun int64
}

// BroadcastCode is java-tron's Return.response_code, as a string. Codes this
// package does not know are kept verbatim and classify as ambiguous.
type BroadcastCode string

// java-tron's broadcast response codes (api.Return.response_code).
const (
	CodeSuccess                      BroadcastCode = "SUCCESS"
	CodeSigError                     BroadcastCode = "SIGERROR"
	CodeContractValidateError        BroadcastCode = "CONTRACT_VALIDATE_ERROR"
	CodeContractExeError             BroadcastCode = "CONTRACT_EXE_ERROR"
	CodeBandwidthError               BroadcastCode = "BANDWITH_ERROR" // sic: java-tron's spelling
	CodeDupTransactionError          BroadcastCode = "DUP_TRANSACTION_ERROR"
	CodeTaposError                   BroadcastCode = "TAPOS_ERROR"
	CodeTooBigTransactionError       BroadcastCode = "TOO_BIG_TRANSACTION_ERROR"
	CodeTransactionExpirationError   BroadcastCode = "TRANSACTION_EXPIRATION_ERROR"
	CodeServerBusy                   BroadcastCode = "SERVER_BUSY"
	CodeNoConnection                 BroadcastCode = "NO_CONNECTION"
	CodeNotEnoughEffectiveConnection BroadcastCode = "NOT_ENOUGH_EFFECTIVE_CONNECTION"
	CodeBlockUnsolidified            BroadcastCode = "BLOCK_UNSOLIDIFIED"
	CodeOtherError                   BroadcastCode = "OTHER_ERROR"
)

// Known reports whether c is one of java-tron's codes.
func (c BroadcastCode) Known() bool {
	switch c {
	case CodeSuccess, CodeSigError, CodeContractValidateError, CodeContractExeError,
		CodeBandwidthError, CodeDupTransactionError, CodeTaposError, CodeTooBigTransactionError,
		CodeTransactionExpirationError, CodeServerBusy, CodeNoConnection,
		CodeNotEnoughEffectiveConnection, CodeBlockUnsolidified, CodeOtherError:
		return true
	}
	return false
}

// Outcome is how the saga should read a broadcast answer.
type Outcome int

const (
	// OutcomeAmbiguous: the transaction may or may not be in the node's pool.
	// Reconcile by txid (Lookup) and resend the same bytes; never rebuild on
	// this alone. The zero value, so an unset result is ambiguous.
	OutcomeAmbiguous Outcome = iota
	// OutcomeAccepted: the node took it into its pool. Not proof of
	// inclusion: pools drop transactions.
	OutcomeAccepted
	// OutcomeRejected: the node validated these bytes and refused them for a
	// reason resending cannot fix (bad signature, failing contract
	// validation, no bandwidth, bad TAPoS reference, too big). It still says
	// nothing about an earlier send of the same txid.
	OutcomeRejected
)

func (o Outcome) String() string {
	switch o {
	case OutcomeAccepted:
		return "accepted"
	case OutcomeRejected:
		return "rejected"
	}
	return "ambiguous"
}

// BroadcastResult is a node's answer to a broadcast.
type BroadcastResult struct {
	Code    BroadcastCode
	Message string   // decoded human text, when the node gave one
	TxID    [32]byte // the txid of the bytes sent
}

// Outcome classifies the answer. DUP_TRANSACTION_ERROR, expiration errors,
// SERVER_BUSY, NO_CONNECTION, NOT_ENOUGH_EFFECTIVE_CONNECTION,
// BLOCK_UNSOLIDIFIED, OTHER_ERROR and unknown codes are ambiguous: java-tron
// has been seen to answer DUP for transactions it never accepted, "expired"
// for ones that were not, and NOT_ENOUGH_EFFECTIVE_CONNECTION after the
// transaction entered its pool.
func (r BroadcastResult) Outcome() Outcome {
	switch r.Code {
	case CodeSuccess:
		return OutcomeAccepted
	case CodeSigError, CodeContractValidateError, CodeContractExeError, CodeBandwidthError,
		CodeTaposError, CodeTooBigTransactionError:
		return OutcomeRejected
	}
	return OutcomeAmbiguous
}

// IsAccepted: the node said SUCCESS.
func (r BroadcastResult) IsAccepted() bool { return r.Outcome() == OutcomeAccepted }

// IsHardReject: the node refused these bytes for a reason resending cannot fix.
func (r BroadcastResult) IsHardReject() bool { return r.Outcome() == OutcomeRejected }

// IsAmbiguous: the answer proves nothing either way.
func (r BroadcastResult) IsAmbiguous() bool { return r.Outcome() == OutcomeAmbiguous }

func (r BroadcastResult) String() string {
	if r.Message == "" {
		return string(r.Code)
	}
	return fmt.Sprintf("%s: %s", r.Code, r.Message)
}

// ClassifyBroadcast folds Broadcast's two results into one Outcome: any
// error (timeout, unreachable node, cancelled context) is ambiguous, because
// the bytes may have reached the node before the failure.
func ClassifyBroadcast(r BroadcastResult, err error) Outcome {
	if err != nil {
		return OutcomeAmbiguous
	}
	return r.Outcome()
}

// IsTimeout reports whether err is (or wraps) a node timeout.
func IsTimeout(err error) bool { return errors.Is(err, ErrTimeout) }

// TxState is where a node believes a transaction is.
type TxState int

const (
	TxUnknown  TxState = iota // the node does not know the txid
	TxPending                 // in the node's pool, not in a block
	TxIncluded                // in a block
)

func (s TxState) String() string {
	switch s {
	case TxPending:
		return "pending"
	case TxIncluded:
		return "included"
	}
	return "unknown"
}

// ReceiptResult is protocol.Transaction.Result.contractResult: how the
// contract call ended. A transaction can be on chain and still have failed.
type ReceiptResult string

// java-tron contract results (the common ones; others pass through verbatim).
const (
	ReceiptDefault          ReceiptResult = "DEFAULT"
	ReceiptSuccess          ReceiptResult = "SUCCESS"
	ReceiptRevert           ReceiptResult = "REVERT"
	ReceiptOutOfEnergy      ReceiptResult = "OUT_OF_ENERGY"
	ReceiptOutOfTime        ReceiptResult = "OUT_OF_TIME"
	ReceiptBadJumpDest      ReceiptResult = "BAD_JUMP_DESTINATION"
	ReceiptOutOfMemory      ReceiptResult = "OUT_OF_MEMORY"
	ReceiptIllegalOperation ReceiptResult = "ILLEGAL_OPERATION"
	ReceiptStackOverflow    ReceiptResult = "STACK_OVERFLOW"
	ReceiptTransferFailed   ReceiptResult = "TRANSFER_FAILED"
	ReceiptUnknown          ReceiptResult = "UNKNOWN"
	ReceiptPrecompiled      ReceiptResult = "PRECOMPILED_CONTRACT"
	ReceiptStackTooSmall    ReceiptResult = "STACK_TOO_SMALL"
	ReceiptStackTooLarge    ReceiptResult = "STACK_TOO_LARGE"
	ReceiptJVMStackOverflow ReceiptResult = "JVM_STACK_OVER_FLOW"
	ReceiptInvalidCode      ReceiptResult = "INVALID_CODE"
)

// TxStatus is a Lookup answer. Block fields are set only when Included.
type TxStatus struct {
	State       TxState
	BlockNumber int64
	BlockTime   int64 // ms, chain time of the containing block
	Receipt     ReceiptResult
	// Message is the node's failure text for a failed receipt (resMessage).
	Message string
	// FeeSun is the TRX the transaction burnt (info.fee) and EnergyUsed its
	// receipt.energy_usage_total, when included.
	FeeSun, EnergyUsed int64
}

// Succeeded: included with a SUCCESS receipt — the only state in which a
// TRC-20 transfer has moved tokens.
func (s TxStatus) Succeeded() bool { return s.State == TxIncluded && s.Receipt == ReceiptSuccess }

// Failed: included, but the contract call did not succeed (REVERT,
// OUT_OF_ENERGY, ...). The fee is burnt and the txid is spent: resending the
// same bytes cannot help.
func (s TxStatus) Failed() bool { return s.State == TxIncluded && s.Receipt != ReceiptSuccess }

func (s TxStatus) String() string {
	if s.State != TxIncluded {
		return s.State.String()
	}
	return fmt.Sprintf("included in block %d at %d (%s)", s.BlockNumber, s.BlockTime, s.Receipt)
}

type workerKey struct{}

// WithWorker tags ctx with the id of the worker making node calls, so the
// simulated node's log can say which worker sent what (tronhttp carries it
// in a header).
func WithWorker(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, workerKey{}, id)
}

// WorkerFrom returns the worker id set by WithWorker, or "".
func WorkerFrom(ctx context.Context) string {
	id, _ := ctx.Value(workerKey{}).(string)
	return id
}
