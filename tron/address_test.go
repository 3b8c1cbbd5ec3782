package tron

import (
	"errors"
	"strings"
	"testing"
)

func TestUSDTContractConstantMatchesBothForms(t *testing.T) {
	if got := USDTContract.String(); got != "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t" {
		t.Fatalf("String() = %s", got)
	}
	if got := USDTContract.Hex(); got != "41a614f803b6fd780986a42c78ec9c7f77e6ded13c" {
		t.Fatalf("Hex() = %s", got)
	}
	for _, s := range []string{"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", "41a614f803b6fd780986a42c78ec9c7f77e6ded13c", "41A614F803B6FD780986A42C78EC9C7F77E6DED13C"} {
		a, err := ParseAddress(s)
		if err != nil || a != USDTContract {
			t.Errorf("ParseAddress(%q) = %v, %v", s, a, err)
		}
	}
}

func TestParseAddressNamesTheRuleThatFailed(t *testing.T) {
	valid := "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
	tests := []struct {
		name  string
		input string
		rule  error
		code  string
	}{
		{"empty", "", ErrBadLength, "bad_length"},
		{"too short", valid[:33], ErrBadLength, "bad_length"},
		{"too long", valid + "1", ErrBadLength, "bad_length"},
		{"zero is not base58", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj60", ErrBadAlphabet, "bad_alphabet"},
		{"capital O is not base58", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLjOt", ErrBadAlphabet, "bad_alphabet"},
		{"last character changed", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u", ErrBadChecksum, "bad_checksum"},
		{"two characters swapped", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLjt6", ErrBadChecksum, "bad_checksum"},
		// A valid Bitcoin address: 25 bytes, good checksum, prefix 0x00.
		{"bitcoin address", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", ErrBadPrefix, "bad_prefix"},
		{"hex with wrong prefix", "42a614f803b6fd780986a42c78ec9c7f77e6ded13c", ErrBadPrefix, "bad_prefix"},
		{"hex with non-hex digit", "41a614f803b6fd780986a42c78ec9c7f77e6ded13g", ErrBadAlphabet, "bad_alphabet"},
		{"0x hex", "0x41a614f803b6fd780986a42c78ec9c7f77e6ded13c", ErrBadLength, "bad_length"},
		{"surrounding space", " " + valid, ErrBadLength, "bad_length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAddress(tc.input)
			if !errors.Is(err, ErrInvalidAddress) || !errors.Is(err, tc.rule) {
				t.Fatalf("err = %v, want %v", err, tc.rule)
			}
			var ae *AddressError
			if !errors.As(err, &ae) || ae.Code() != tc.code {
				t.Fatalf("code = %v, want %s", ae, tc.code)
			}
		})
	}
}

func TestAddressRoundTripsThroughBothForms(t *testing.T) {
	for _, s := range []string{"TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"} {
		a := MustParseAddress(s)
		if a.String() != s {
			t.Errorf("String() = %s, want %s", a.String(), s)
		}
		b, err := ParseHexAddress(a.Hex())
		if err != nil || b != a {
			t.Errorf("hex round trip: %v %v", b, err)
		}
		text, _ := a.MarshalText()
		var c Address
		if err := c.UnmarshalText(text); err != nil || c != a {
			t.Errorf("text round trip: %v %v", c, err)
		}
	}
	// All-zero and all-0xff account bytes still encode to 34 characters.
	for _, fill := range []byte{0, 0xff} {
		a := Address{AddressPrefix}
		for i := 1; i < len(a); i++ {
			a[i] = fill
		}
		s := a.String()
		if len(s) != 34 || !strings.HasPrefix(s, "T") {
			t.Errorf("%x encodes to %q", a, s)
		}
		if b, err := ParseAddress(s); err != nil || b != a {
			t.Errorf("ParseAddress(%q) = %x, %v", s, b, err)
		}
	}
}

func TestAddressFromBytesChecksLengthAndPrefix(t *testing.T) {
	if _, err := AddressFromBytes(USDTContract[:20]); !errors.Is(err, ErrBadLength) {
		t.Errorf("20 bytes: %v", err)
	}
	b := USDTContract
	b[0] = 0xa0
	if _, err := AddressFromBytes(b[:]); !errors.Is(err, ErrBadPrefix) {
		t.Errorf("prefix: %v", err)
	}
}
