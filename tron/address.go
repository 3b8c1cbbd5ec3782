package tron

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"golang.org/x/crypto/sha3"
)

// AddressPrefix is the first byte of every TRON mainnet/testnet address.
const AddressPrefix = 0x41

// Address is a TRON account or contract address: 0x41 followed by the 20
// bytes of the account (the last 20 bytes of keccak256 of the public key).
type Address [21]byte

// USDTContract is Tether's TRC-20 contract on TRON mainnet,
// TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t (hex 41a614f803b6fd780986a42c78ec9c7f77e6ded13c).
var USDTContract = Address{
	0x41, 0xa6, 0x14, 0xf8, 0x03, 0xb6, 0xfd, 0x78, 0x09, 0x86, 0xa4,
	0x2c, 0x78, 0xec, 0x9c, 0x7f, 0x77, 0xe6, 0xde, 0xd1, 0x3c,
}

const (
	base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	// base58AddrLen is the length of every base58check TRON address: 25 bytes
	// whose first is 0x41 always encode to 34 characters.
	base58AddrLen = 34
	hexAddrLen    = 2 * len(Address{})
	checksumLen   = 4
)

// base58Index maps an ASCII byte to its base58 digit, or -1.
var base58Index = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(base58Alphabet); i++ {
		t[base58Alphabet[i]] = int8(i)
	}
	return t
}()

// ParseAddress parses a TRON address in base58check form ("T...", 34
// characters) or in 42-character hex form ("41..."). It is strict: no
// surrounding whitespace, no "0x". The error is an *AddressError naming the
// rule that failed.
func ParseAddress(s string) (Address, error) {
	if len(s) == hexAddrLen {
		return ParseHexAddress(s)
	}
	return parseBase58Address(s)
}

// MustParseAddress is ParseAddress for constants in code and tests; it panics
// on an invalid address.
func MustParseAddress(s string) Address {
	a, err := ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

func parseBase58Address(s string) (Address, error) {
	var a Address
	// Checking the length before decoding bounds the (quadratic) base58 work
	// for arbitrary input.
	if len(s) != base58AddrLen {
		return a, addrErr(ErrBadLength, "base58 address has %d characters, want %d", len(s), base58AddrLen)
	}
	for i := 0; i < len(s); i++ {
		if base58Index[s[i]] < 0 {
			return a, addrErr(ErrBadAlphabet, "character %q at position %d is not base58", s[i], i)
		}
	}
	payload := base58Decode(s)
	if len(payload) != len(a)+checksumLen {
		return a, addrErr(ErrBadLength, "decodes to %d bytes, want %d", len(payload), len(a)+checksumLen)
	}
	body, sum := payload[:len(a)], payload[len(a):]
	if want := checksum(body); !bytes.Equal(sum, want[:]) {
		return a, addrErr(ErrBadChecksum, "checksum %x, want %x", sum, want)
	}
	if body[0] != AddressPrefix {
		return a, addrErr(ErrBadPrefix, "first byte is 0x%02x", body[0])
	}
	copy(a[:], body)
	return a, nil
}

// ParseHexAddress parses the 42-character hex form "41" + 40 hex digits
// (either case), as java-tron's HTTP API prints addresses with visible=false.
func ParseHexAddress(s string) (Address, error) {
	var a Address
	if len(s) != hexAddrLen {
		return a, addrErr(ErrBadLength, "hex address has %d characters, want %d", len(s), hexAddrLen)
	}
	for i := 0; i < len(s); i++ {
		if !isHexDigit(s[i]) {
			return a, addrErr(ErrBadAlphabet, "character %q at position %d is not hex", s[i], i)
		}
	}
	if _, err := hex.Decode(a[:], []byte(s)); err != nil {
		return Address{}, addrErr(ErrBadAlphabet, "%v", err)
	}
	if a[0] != AddressPrefix {
		return Address{}, addrErr(ErrBadPrefix, "first byte is 0x%02x", a[0])
	}
	return a, nil
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// AddressFromBytes accepts 21 bytes starting with 0x41 (as stored in
// protobuf fields) and returns them as an Address.
func AddressFromBytes(b []byte) (Address, error) {
	var a Address
	if len(b) != len(a) {
		return a, addrErr(ErrBadLength, "%d bytes, want %d", len(b), len(a))
	}
	if b[0] != AddressPrefix {
		return a, addrErr(ErrBadPrefix, "first byte is 0x%02x", b[0])
	}
	copy(a[:], b)
	return a, nil
}

// AddressFromPublicKey derives the address of a secp256k1 public key given in
// SEC1 form (33-byte compressed or 65-byte uncompressed): 0x41 ‖ the last 20
// bytes of keccak256(X ‖ Y).
func AddressFromPublicKey(pub []byte) (Address, error) {
	pk, err := secp256k1.ParsePubKey(pub)
	if err != nil {
		return Address{}, fmt.Errorf("%w: public key: %w", ErrInvalidSignature, err)
	}
	return addressOf(pk), nil
}

func addressOf(pk *secp256k1.PublicKey) Address {
	h := sha3.NewLegacyKeccak256()
	h.Write(pk.SerializeUncompressed()[1:]) // drop the 0x04 SEC1 tag
	sum := h.Sum(nil)
	var a Address
	a[0] = AddressPrefix
	copy(a[1:], sum[len(sum)-20:])
	return a
}

// String returns the base58check form ("T...").
func (a Address) String() string {
	sum := checksum(a[:])
	buf := make([]byte, 0, len(a)+checksumLen)
	buf = append(append(buf, a[:]...), sum[:]...)
	return base58Encode(buf)
}

// Hex returns the 42-character lowercase hex form ("41...").
func (a Address) Hex() string { return hex.EncodeToString(a[:]) }

// IsZero reports whether a is the zero value (not a usable address).
func (a Address) IsZero() bool { return a == Address{} }

// MarshalText encodes the address as base58 (so it reads well in JSON).
func (a Address) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText accepts either the base58 or the hex form.
func (a *Address) UnmarshalText(b []byte) error {
	p, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = p
	return nil
}

func checksum(b []byte) [checksumLen]byte {
	first := sha256.Sum256(b)
	second := sha256.Sum256(first[:])
	var out [checksumLen]byte
	copy(out[:], second[:checksumLen])
	return out
}

// base58Encode is the Bitcoin-alphabet big-number encoding: each leading zero
// byte becomes a '1'.
func base58Encode(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	// log(256)/log(58) ≈ 1.366, so len*138/100+1 digits always suffice.
	digits := make([]byte, len(b)*138/100+1)
	n := 0 // digits in use, little-endian
	for _, c := range b[zeros:] {
		carry := int(c)
		for i := 0; i < n; i++ {
			carry += int(digits[i]) << 8
			digits[i] = byte(carry % 58)
			carry /= 58
		}
		for carry > 0 {
			digits[n] = byte(carry % 58)
			carry /= 58
			n++
		}
	}
	out := make([]byte, 0, zeros+n)
	for i := 0; i < zeros; i++ {
		out = append(out, '1')
	}
	for i := n - 1; i >= 0; i-- {
		out = append(out, base58Alphabet[digits[i]])
	}
	return string(out)
}

// base58Decode decodes a string already checked against the alphabet.
func base58Decode(s string) []byte {
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	// log(58)/log(256) ≈ 0.733.
	bytesLE := make([]byte, len(s)*733/1000+1)
	n := 0
	for i := zeros; i < len(s); i++ {
		carry := int(base58Index[s[i]])
		for j := 0; j < n; j++ {
			carry += int(bytesLE[j]) * 58
			bytesLE[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			bytesLE[n] = byte(carry)
			carry >>= 8
			n++
		}
	}
	out := make([]byte, zeros+n)
	for i := 0; i < n; i++ {
		out[zeros+i] = bytesLE[n-1-i]
	}
	return out
}
