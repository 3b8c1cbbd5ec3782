package tron

import (
	"errors"
	"fmt"
)

// The error catalogue of the TRON rail. Every error returned by this package
// wraps one of these sentinels (test with errors.Is), so transports can map
// them once to their own codes.
var (
	// ErrInvalidAddress is wrapped by every address parsing failure; the
	// specific rule that failed is wrapped alongside it (ErrBadAlphabet, ...).
	ErrInvalidAddress = errors.New("tron: invalid address")
	// ErrBadAlphabet: a character is outside the base58 (or hex) alphabet.
	ErrBadAlphabet = errors.New("character outside the alphabet")
	// ErrBadLength: the text or the decoded payload has the wrong length
	// (a TRON address is 21 bytes + a 4-byte checksum, 34 base58 characters,
	// or 42 hex characters).
	ErrBadLength = errors.New("wrong length")
	// ErrBadChecksum: the 4-byte double-sha256 checksum does not match.
	ErrBadChecksum = errors.New("checksum mismatch")
	// ErrBadPrefix: the payload does not start with the TRON prefix 0x41.
	ErrBadPrefix = errors.New("prefix is not 0x41")

	// ErrMalformed is wrapped by every protobuf decoding failure (*DecodeError).
	ErrMalformed = errors.New("tron: malformed transaction bytes")
	// ErrInvalidTransfer: BuildTransfer parameters are unusable.
	ErrInvalidTransfer = errors.New("tron: invalid transfer parameters")
	// ErrNotTransfer: the transaction is not a single TRC-20 transfer(to, amount).
	ErrNotTransfer = errors.New("tron: not a TRC-20 transfer")

	// ErrInvalidSignature: a signature is not 65 bytes r‖s‖v with v in
	// {0,1,27,28}, or no public key can be recovered from it.
	ErrInvalidSignature = errors.New("tron: invalid signature")
	// ErrSignerMismatch: the signature is valid but made by another key.
	ErrSignerMismatch = errors.New("tron: signature is not by the expected address")
	// ErrInvalidKey: key material could not be loaded or parsed. Its message
	// never contains the key material itself.
	ErrInvalidKey = errors.New("tron: invalid private key")

	// ErrTimeout: a node call timed out (or its answer was lost). The call may
	// or may not have taken effect: a broadcast that timed out is ambiguous.
	ErrTimeout = errors.New("tron: node call timed out")
	// ErrUnavailable: the node could not be reached or answered with a server
	// error. Like a timeout, a broadcast that fails this way is ambiguous.
	ErrUnavailable = errors.New("tron: node unavailable")
	// ErrBadResponse: the node answered something this client cannot read.
	ErrBadResponse = errors.New("tron: unreadable node response")
	// ErrBlockNotSolid: the node (or the backend that answered) has no solid
	// block with the number asked: not solid yet there, or beyond its view.
	// It says nothing about the chain; ask again later or elsewhere.
	ErrBlockNotSolid = errors.New("tron: block not solid on this node")
)

// AddressError says which rule an address failed. It wraps ErrInvalidAddress
// and the rule's sentinel, so both errors.Is(err, ErrInvalidAddress) and
// errors.Is(err, ErrBadChecksum) hold.
type AddressError struct {
	// Rule is the sentinel of the failed rule (ErrBadAlphabet, ErrBadLength,
	// ErrBadChecksum or ErrBadPrefix).
	Rule error
	// Detail is a short human explanation (never the whole input when it is long).
	Detail string
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("tron: invalid address: %v: %s", e.Rule, e.Detail)
}

// Unwrap exposes both the umbrella and the rule sentinel.
func (e *AddressError) Unwrap() []error { return []error{ErrInvalidAddress, e.Rule} }

// Code is a stable machine-readable name of the failed rule, for transports
// that report which rule an address broke ("bad_checksum", ...).
func (e *AddressError) Code() string {
	switch e.Rule {
	case ErrBadAlphabet:
		return "bad_alphabet"
	case ErrBadLength:
		return "bad_length"
	case ErrBadChecksum:
		return "bad_checksum"
	case ErrBadPrefix:
		return "bad_prefix"
	}
	return "invalid_address"
}

func addrErr(rule error, format string, args ...any) error {
	return &AddressError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// DecodeError locates a protobuf decoding failure: which message, at which
// byte offset of the input, and why. It wraps ErrMalformed.
type DecodeError struct {
	Message string // protobuf message being decoded, e.g. "Transaction.raw"
	Offset  int    // byte offset inside that message's bytes
	Reason  string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("tron: malformed %s at byte %d: %s", e.Message, e.Offset, e.Reason)
}

func (e *DecodeError) Unwrap() error { return ErrMalformed }
