package tron

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzParseAddress: no input panics; every error names a rule; every
// accepted input round-trips to the same text.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",
		"41a614f803b6fd780986a42c78ec9c7f77e6ded13c",
		"1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
		"", "T", "0x41a614f803b6fd780986a42c78ec9c7f77e6ded13c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			var ae *AddressError
			if !errors.As(err, &ae) || !errors.Is(err, ErrInvalidAddress) {
				t.Fatalf("error %v is not an *AddressError", err)
			}
			return
		}
		if a[0] != AddressPrefix {
			t.Fatalf("accepted %q with prefix %x", s, a[0])
		}
		if len(s) == hexAddrLen {
			if a.Hex() != strings.ToLower(s) {
				t.Fatalf("hex %q round-trips to %q", s, a.Hex())
			}
		} else if a.String() != s {
			t.Fatalf("base58 %q round-trips to %q", s, a.String())
		}
	})
}

// FuzzDecodeRaw: no input panics; whatever decodes re-encodes to bytes that
// decode to the same fields (encoding is a fixed point after one pass).
func FuzzDecodeRaw(f *testing.F) {
	env, err := BuildTransfer(testParams())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env.Raw)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x28, 0xc3})
	f.Add([]byte{0x5a, 0x02, 0x08, 0x1f})
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeRaw(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		_, _ = r.TokenTransfer()
		_, _ = r.Owner()
		once := EncodeRaw(r)
		r2, err := DecodeRaw(once)
		if err != nil {
			t.Fatalf("re-encoding of a decodable input does not decode: %v", err)
		}
		if twice := EncodeRaw(r2); !bytes.Equal(once, twice) {
			t.Fatalf("encoding not stable:\n%x\n%x", once, twice)
		}
		_, _ = DecodeTransaction(raw)
	})
}
