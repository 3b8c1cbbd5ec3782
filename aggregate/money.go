package aggregate

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"

	"github.com/shopspring/decimal"
)

// Asset is something weir pays out. Decimals fixes the size of one base unit
// (USDT on TRON: 6, so 1 USDT = 1_000_000 units). Max, when not zero, is the
// largest amount ParseAmount accepts for the asset; WithMax tightens it from
// configuration.
type Asset struct {
	Code     string
	Decimals int
	Max      Amount
}

// USDT is TRC-20 USDT on TRON. Its hard maximum is the largest value the
// 32-byte amount word of a TRC-20 transfer can carry (2^256 - 1 units): beyond
// it an amount cannot be encoded at all. Operational limits are configured
// with WithMax.
var USDT = Asset{Code: "USDT-TRC20", Decimals: 6, Max: newAmount(maxUint256(), 6)}

func maxUint256() *big.Int {
	m := new(big.Int).Lsh(big.NewInt(1), 256)
	return m.Sub(m, big.NewInt(1))
}

// LookupAsset returns the asset with this code (exact, case-sensitive match),
// or an unsupported_asset error.
func LookupAsset(code string) (Asset, error) {
	switch code {
	case USDT.Code:
		return USDT, nil
	}
	return Asset{}, newError(CodeUnsupportedAsset, "asset", "unsupported asset %q (supported: %s)", code, USDT.Code)
}

// WithMax returns a copy of the asset whose maximum is max, if max is tighter
// than the current one. A zero max leaves the asset unchanged: configuration
// can lower the ceiling, never remove the rail's own.
func (as Asset) WithMax(max Amount) Asset {
	if max.Sign() <= 0 {
		return as
	}
	if as.Max.IsZero() || max.Cmp(as.Max) < 0 {
		as.Max = max
	}
	return as
}

// Zero is the zero amount of the asset.
func (as Asset) Zero() Amount { return newAmount(new(big.Int), as.Decimals) }

// admit pins a to the asset's scale and applies the rules every amount that
// leaves must satisfy: exactly representable, greater than zero, at most Max.
func (as Asset) admit(field string, a Amount) (Amount, error) {
	out, err := a.in(field, as)
	if err != nil {
		return Amount{}, err
	}
	if out.Sign() <= 0 {
		return Amount{}, newError(CodeInvalidAmount, field, "must be greater than zero")
	}
	if !as.Max.IsZero() && out.Cmp(as.Max) > 0 {
		return Amount{}, newError(CodeInvalidAmount, field, "above the maximum of %s %s", as.Max.String(), as.Code)
	}
	return out, nil
}

// Amount is an exact quantity of money: a shopspring decimal whose exponent
// is minus the number of decimals one base unit stands for, so the
// coefficient is the integer number of base units. It is a value (decimal
// never mutates its operands, and Units hands out a copy), so copies of an
// Amount can be shared freely. The zero value is zero. Compare with Cmp or
// Equal, never with ==. Nothing here converts to or from a float.
type Amount struct {
	d decimal.Decimal
}

// newAmount is units base units at a scale of decimals (units is copied).
func newAmount(units *big.Int, decimals int) Amount {
	return Amount{d: decimal.NewFromBigInt(units, -int32(decimals))}
}

// maxAmountLen bounds the text we are willing to parse; far above any real
// amount (2^256 has 78 digits) and small enough that parsing stays cheap.
const maxAmountLen = 100

// ParseAmount turns a decimal string into an amount of the asset. The accepted
// grammar is deliberately narrow, because a payout amount that could be read
// two ways must not be read at all:
//
//	amount = int [ "." frac ]
//	int    = "0" | "1"…"9" { "0"…"9" }
//	frac   = "0"…"9" { "0"…"9" }
//
// So: ASCII digits only (no Arabic-Indic or fullwidth digits), no sign, no
// exponent, no spaces, no leading zeros ("01"), no leading or trailing point
// (".5", "5."), no more fraction digits than the asset has decimals. Trailing
// zeros in the fraction are fine ("1.50" is 1.5). Zero and amounts above the
// asset's Max are refused. Every refusal is an invalid_amount error with field
// "amount".
func ParseAmount(as Asset, s string) (Amount, error) {
	a, err := parseDecimal("amount", s)
	if err != nil {
		return Amount{}, err
	}
	return as.admit("amount", a)
}

// ParseAmountJSON is ParseAmount for a raw JSON value: the amount must be a
// JSON string. A JSON number is refused because decoders routinely turn it
// into a float, and a float is not money.
func ParseAmountJSON(as Asset, raw json.RawMessage) (Amount, error) {
	s, err := jsonDecimalString("amount", raw)
	if err != nil {
		return Amount{}, err
	}
	return ParseAmount(as, s)
}

// MustParseAmount is ParseAmount for constants and tests; it panics on error.
func MustParseAmount(as Asset, s string) Amount {
	a, err := ParseAmount(as, s)
	if err != nil {
		panic(err)
	}
	return a
}

// FromUnits builds an amount of the asset from base units (copied). Zero is
// allowed (balances start there); negative values and values above the
// asset's Max are refused.
func FromUnits(as Asset, units *big.Int) (Amount, error) {
	if units == nil {
		return Amount{}, newError(CodeInvalidAmount, "amount_units", "missing")
	}
	if units.Sign() < 0 {
		return Amount{}, newError(CodeInvalidAmount, "amount_units", "negative")
	}
	a := newAmount(units, as.Decimals)
	if !as.Max.IsZero() && a.Cmp(as.Max) > 0 {
		return Amount{}, newError(CodeInvalidAmount, "amount_units", "above the maximum of %s %s", as.Max.String(), as.Code)
	}
	return a, nil
}

// FromUnitsString is FromUnits for a string of ASCII digits (no sign, no
// leading zeros), the form amount_units takes in JSON.
func FromUnitsString(as Asset, s string) (Amount, error) {
	a, err := parseDecimal("amount_units", s)
	if err != nil {
		return Amount{}, err
	}
	if a.Decimals() != 0 {
		return Amount{}, newError(CodeInvalidAmount, "amount_units", "base units are an integer")
	}
	return FromUnits(as, a.d.Coefficient())
}

// parseDecimal checks the grammar documented on ParseAmount (decimal's own
// parser is far more lenient: exponents, signs, ".5") and then lets decimal
// read the digits; the scale is the number of fraction digits written. Zero
// is accepted here; callers decide whether zero means anything.
func parseDecimal(field, s string) (Amount, error) {
	bad := func(format string, args ...any) (Amount, error) {
		return Amount{}, newError(CodeInvalidAmount, field, format, args...)
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > maxAmountLen {
		return bad("longer than %d characters", maxAmountLen)
	}
	dots := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '.':
			dots++
		case c >= 0x80:
			return bad("only ASCII digits 0-9 are allowed (found a non-ASCII character)")
		case c == '+' || c == '-':
			return bad("a sign is not allowed")
		case c == 'e' || c == 'E':
			return bad("an exponent is not allowed; write the digits out")
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			return bad("spaces are not allowed")
		case c == ',' || c == '_':
			return bad("digit separators are not allowed")
		default:
			return bad("unexpected character %q", rune(c))
		}
	}
	if dots > 1 {
		return bad("more than one decimal point")
	}
	intPart, fracPart, hasDot := strings.Cut(s, ".")
	switch {
	case intPart == "":
		return bad("a leading decimal point is not allowed; write 0%s", s)
	case hasDot && fracPart == "":
		return bad("a trailing decimal point is not allowed")
	case len(intPart) > 1 && intPart[0] == '0':
		return bad("leading zeros are not allowed")
	}
	d, err := decimal.NewFromString(s)
	if err != nil || d.Exponent() != -int32(len(fracPart)) {
		return bad("not a decimal number")
	}
	return Amount{d: d}, nil
}

// jsonDecimalString extracts the string from a raw JSON value that must be a
// JSON string.
func jsonDecimalString(field string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return "", newError(CodeInvalidAmount, field, "required")
	case raw[0] != '"':
		if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
			return "", newError(CodeInvalidAmount, field, "must be a JSON string such as \"12.50\", not a JSON number")
		}
		return "", newError(CodeInvalidAmount, field, "must be a JSON string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", newError(CodeInvalidAmount, field, "malformed JSON string")
	}
	return s, nil
}

// Units returns a copy of the base units.
func (a Amount) Units() *big.Int { return a.d.Coefficient() }

// UnitsString is the base units in decimal digits ("12500000" for 12.5 USDT).
func (a Amount) UnitsString() string { return a.d.Coefficient().String() }

// Decimals is the scale of the base units.
func (a Amount) Decimals() int { return -int(a.d.Exponent()) }

// In expresses a at the asset's scale, refusing when digits would be lost.
// It does not apply the asset's positivity or maximum rules.
func (a Amount) In(as Asset) (Amount, error) { return a.in("amount", as) }

func (a Amount) in(field string, as Asset) (Amount, error) {
	r := a.d.Round(int32(as.Decimals))
	if !r.Equal(a.d) {
		return Amount{}, newError(CodeInvalidAmount, field, "too many decimal places: %s allows %d", as.Code, as.Decimals)
	}
	return Amount{d: r}, nil
}

// Add returns a + b (at the larger scale of the two).
func (a Amount) Add(b Amount) Amount { return Amount{d: a.d.Add(b.d)} }

// Sub returns a - b (at the larger scale of the two); the result may be
// negative, which Sign reports.
func (a Amount) Sub(b Amount) Amount { return Amount{d: a.d.Sub(b.d)} }

// Cmp compares exactly, whatever the scales: -1, 0 or +1.
func (a Amount) Cmp(b Amount) int { return a.d.Cmp(b.d) }

// Equal reports whether a and b are the same quantity ("1.5" equals "1.50").
func (a Amount) Equal(b Amount) bool { return a.Cmp(b) == 0 }

// IsZero reports whether the amount is zero.
func (a Amount) IsZero() bool { return a.d.IsZero() }

// Sign is -1, 0 or +1.
func (a Amount) Sign() int { return a.d.Sign() }

// String is the canonical decimal form: no trailing fraction zeros, no point
// for whole amounts ("1.5", "12", "0.000001"). It never depends on decimal's
// package-wide formatting switches (TrimTrailingZeros, UseScientificNotation).
func (a Amount) String() string {
	return a.d.StringFixed(max(0, -a.d.Normalize().Exponent()))
}

// FixedString writes every decimal of the scale ("1.500000" for 1.5 USDT).
func (a Amount) FixedString() string { return a.d.StringFixed(-a.d.Exponent()) }

// MarshalJSON writes the amount as a JSON string with every decimal of its
// scale ("1.500000"), so that decoding it back restores the scale and the
// base units exactly. Views meant for people use String instead.
func (a Amount) MarshalJSON() ([]byte, error) { return json.Marshal(a.FixedString()) }

// UnmarshalJSON accepts only a JSON string in ParseAmount's grammar (zero
// allowed); the scale is the number of fraction digits written.
func (a *Amount) UnmarshalJSON(data []byte) error {
	s, err := jsonDecimalString("amount", data)
	if err != nil {
		return err
	}
	v, err := parseDecimal("amount", s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}
