package tron

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
)

// SignatureSize is the length of a TRON signature: r (32) ‖ s (32) ‖ v (1).
const SignatureSize = 65

// Signer is the boundary behind which keys live. It signs a txid (never raw
// bytes it could be tricked into re-encoding) and says which address its
// signatures belong to. Implementations must be safe for concurrent use.
type Signer interface {
	Address() Address
	Sign(ctx context.Context, txid [32]byte) ([]byte, error)
}

// SignatureVerifier accepts or refuses a signature as owner's over txid. The
// simulated node uses verifiers so that test signers can be accepted next to
// real secp256k1 signatures.
type SignatureVerifier interface {
	VerifySignature(txid [32]byte, sig []byte, owner Address) bool
}

// KeySigner signs with a secp256k1 private key held in memory. Its String,
// Format, GoString and LogValue print only the address: the key never
// reaches a log line or an error message.
type KeySigner struct {
	key  *secp256k1.PrivateKey
	addr Address
}

// NewKeySigner makes a signer from a 32-byte private key.
func NewKeySigner(key []byte) (*KeySigner, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: want 32 bytes, got %d", ErrInvalidKey, len(key))
	}
	var scalar secp256k1.ModNScalar
	if overflow := scalar.SetByteSlice(key); overflow || scalar.IsZero() {
		return nil, fmt.Errorf("%w: not in [1, n-1]", ErrInvalidKey)
	}
	k := secp256k1.NewPrivateKey(&scalar)
	return &KeySigner{key: k, addr: addressOf(k.PubKey())}, nil
}

// GenerateKeySigner makes a signer with a fresh random key from rand (use
// crypto/rand.Reader outside tests).
func GenerateKeySigner(rand io.Reader) (*KeySigner, error) {
	k, err := secp256k1.GeneratePrivateKeyFromRand(rand)
	if err != nil {
		return nil, fmt.Errorf("%w: generate: %w", ErrInvalidKey, err)
	}
	return &KeySigner{key: k, addr: addressOf(k.PubKey())}, nil
}

// ParseKeySigner parses a private key written as 64 hex digits (optional
// "0x", surrounding whitespace ignored).
func ParseKeySigner(text string) (*KeySigner, error) {
	b, err := decodeHex(text)
	if err != nil {
		// Deliberately not wrapping err: hex errors quote the offending byte.
		return nil, fmt.Errorf("%w: not hex", ErrInvalidKey)
	}
	defer clear(b)
	return NewKeySigner(b)
}

// LoadKeySigner reads a private key (64 hex digits) from a file.
func LoadKeySigner(path string) (*KeySigner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: read key file: %w", ErrInvalidKey, err)
	}
	defer clear(b)
	s, err := ParseKeySigner(string(b))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return s, nil
}

// KeySignerFromEnv reads a private key (64 hex digits) from the environment
// variable name.
func KeySignerFromEnv(name string) (*KeySigner, error) {
	v, ok := os.LookupEnv(name)
	if !ok || strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("%w: environment variable %s is not set", ErrInvalidKey, name)
	}
	s, err := ParseKeySigner(v)
	if err != nil {
		return nil, fmt.Errorf("env %s: %w", name, err)
	}
	return s, nil
}

// Address returns the signer's TRON address.
func (k *KeySigner) Address() Address { return k.addr }

// Sign returns r ‖ s ‖ v over txid with v in {0, 1}, the form java-tron and
// TronWeb produce. The nonce is RFC 6979 deterministic: the same txid gives
// the same signature.
func (k *KeySigner) Sign(ctx context.Context, txid [32]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	compact := ecdsa.SignCompact(k.key, txid[:], false) // code ‖ r ‖ s, code = 27 + recid
	sig := make([]byte, SignatureSize)
	copy(sig, compact[1:])
	sig[64] = compact[0] - 27
	return sig, nil
}

// VerifySignature reports whether sig is this key's signature over txid and
// owner is this key's address.
func (k *KeySigner) VerifySignature(txid [32]byte, sig []byte, owner Address) bool {
	return owner == k.addr && VerifySignature(txid, sig, owner) == nil
}

func (k *KeySigner) String() string { return "tron.KeySigner(" + k.addr.String() + ")" }

// GoString redacts the key under %#v.
func (k *KeySigner) GoString() string { return k.String() }

// Format redacts the key under every verb (%v, %+v, %#v, %s, %x, ...).
func (k *KeySigner) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// LogValue makes slog print only the address.
func (k *KeySigner) LogValue() slog.Value { return slog.StringValue(k.String()) }

// RecoverSigner returns the address whose key made sig over txid. sig is
// r ‖ s ‖ v with v in {0, 1, 27, 28}.
func RecoverSigner(txid [32]byte, sig []byte) (Address, error) {
	if len(sig) != SignatureSize {
		return Address{}, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidSignature, len(sig), SignatureSize)
	}
	v := sig[64]
	if v >= 27 {
		v -= 27
	}
	if v > 1 {
		return Address{}, fmt.Errorf("%w: recovery id v=%d, want 0, 1, 27 or 28", ErrInvalidSignature, sig[64])
	}
	var compact [SignatureSize]byte
	compact[0] = 27 + v
	copy(compact[1:], sig[:64])
	pub, _, err := ecdsa.RecoverCompact(compact[:], txid[:])
	if err != nil {
		return Address{}, fmt.Errorf("%w: %w", ErrInvalidSignature, err)
	}
	return addressOf(pub), nil
}

// VerifySignature checks that sig over txid was made by owner's key.
func VerifySignature(txid [32]byte, sig []byte, owner Address) error {
	got, err := RecoverSigner(txid, sig)
	if err != nil {
		return err
	}
	if got != owner {
		return fmt.Errorf("%w: signed by %s, want %s", ErrSignerMismatch, got, owner)
	}
	return nil
}

// HMACSigner is a deterministic test signer. Its "signature" is two
// HMAC-SHA256 values over the txid shaped like r ‖ s ‖ v: it is NOT a real
// signature, no TRON node accepts it, and RecoverSigner yields an unrelated
// address (or an error) for it. Only verifiers that know the key — the
// HMACSigner itself, passed to SimConfig.Verifiers — accept it. It exists so
// tests can sign without key management and get the same bytes every run.
type HMACSigner struct {
	key  []byte
	addr Address
}

// NewHMACSigner derives the test signer for key; its address is derived from
// the key too, so distinct keys give distinct owners.
func NewHMACSigner(key []byte) *HMACSigner {
	s := &HMACSigner{key: bytes.Clone(key)}
	a := s.mac("address", nil)
	s.addr[0] = AddressPrefix
	copy(s.addr[1:], a[:20])
	return s
}

func (s *HMACSigner) mac(label string, txid []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("weir-test-signer/" + label + "/"))
	m.Write(txid)
	return m.Sum(nil)
}

// Address returns the signer's (synthetic) address.
func (s *HMACSigner) Address() Address { return s.addr }

// Sign returns HMAC("r", txid) ‖ HMAC("s", txid) ‖ 0.
func (s *HMACSigner) Sign(ctx context.Context, txid [32]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sig := make([]byte, 0, SignatureSize)
	sig = append(sig, s.mac("r", txid[:])...)
	sig = append(sig, s.mac("s", txid[:])...)
	return append(sig, 0), nil
}

// VerifySignature accepts exactly what Sign produces for owner == Address().
func (s *HMACSigner) VerifySignature(txid [32]byte, sig []byte, owner Address) bool {
	if owner != s.addr {
		return false
	}
	want, err := s.Sign(context.Background(), txid)
	return err == nil && hmac.Equal(want, sig)
}

func (s *HMACSigner) String() string { return "tron.HMACSigner(" + s.addr.String() + ")" }

// Format redacts the key under every verb.
func (s *HMACSigner) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// LogValue makes slog print only the address.
func (s *HMACSigner) LogValue() slog.Value { return slog.StringValue(s.String()) }

// secp256k1Verifier is the default verifier: real signatures only.
type secp256k1Verifier struct{}

func (secp256k1Verifier) VerifySignature(txid [32]byte, sig []byte, owner Address) bool {
	return VerifySignature(txid, sig, owner) == nil
}

// Secp256k1Verifier accepts real TRON signatures (recovery of the owner).
var Secp256k1Verifier SignatureVerifier = secp256k1Verifier{}

// SignEnvelope has s sign env's txid and returns the transaction to send
// (env.Raw, unchanged, with the signature). It refuses a signer that is not
// the envelope's owner — the node would answer SIGERROR — and checks the
// signature verifies (with the signer's own verifier when it has one, else
// as a real secp256k1 signature), so a faulty signer is caught before
// anything is sent — except KeySigner's, which verify by construction.
func SignEnvelope(ctx context.Context, s Signer, env Envelope) (SignedTx, error) {
	if s.Address() != env.Owner {
		return SignedTx{}, fmt.Errorf("%w: signer is %s, envelope owner is %s", ErrSignerMismatch, s.Address(), env.Owner)
	}
	if err := env.Verify(); err != nil {
		return SignedTx{}, err
	}
	sig, err := s.Sign(ctx, env.TxID)
	if err != nil {
		return SignedTx{}, fmt.Errorf("tron: sign %s: %w", env.TxIDHex(), err)
	}
	if _, local := s.(*KeySigner); local {
		// KeySigner's signature comes from ecdsa.SignCompact with the key
		// in this process, its recovery id from the same nonce point: it
		// verifies by construction (its tests prove it), and recovering
		// the owner again would cost as much as signing did. Only a signer
		// whose workings are out of sight (a remote signer, an HSM, a test
		// double) is checked.
		if len(sig) != SignatureSize {
			return SignedTx{}, fmt.Errorf("%w: signer %s produced %d bytes", ErrInvalidSignature, s.Address(), len(sig))
		}
		return SignedTx{Raw: env.Raw, Signature: sig}, nil
	}
	v, ok := s.(SignatureVerifier)
	if !ok {
		v = Secp256k1Verifier
	}
	if !v.VerifySignature(env.TxID, sig, env.Owner) {
		return SignedTx{}, fmt.Errorf("%w: signer %s produced a signature that does not verify", ErrInvalidSignature, s.Address())
	}
	return SignedTx{Raw: env.Raw, Signature: sig}, nil
}
