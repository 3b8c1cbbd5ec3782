package aggregate

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

func TestParseAmountTable(t *testing.T) {
	capped := USDT.WithMax(usdt("1000000"))
	cases := []struct {
		in    string
		asset Asset
		units string // "" = refused with invalid_amount
		canon string
	}{
		{"1", USDT, "1000000", "1"},
		{"1.5", USDT, "1500000", "1.5"},
		{"1.50", USDT, "1500000", "1.5"},
		{"1.500000", USDT, "1500000", "1.5"},
		{"12.50", USDT, "12500000", "12.5"},
		{"0.000001", USDT, "1", "0.000001"},
		{"0.1", USDT, "100000", "0.1"},
		{"1000", USDT, "1000000000", "1000"},
		{"1000000000000000000000000", USDT, "1000000000000000000000000000000", "1000000000000000000000000"}, // 10^30 units
		{"1000000", capped, "1000000000000", "1000000"},
		{"1000000.000001", capped, "", ""}, // over the configured max
		{"", USDT, "", ""},
		{"0", USDT, "", ""},
		{"0.000000", USDT, "", ""},
		{"-1", USDT, "", ""},
		{"+1", USDT, "", ""},
		{"1e3", USDT, "", ""},
		{"1E3", USDT, "", ""},
		{"1.5e-2", USDT, "", ""},
		{" 1", USDT, "", ""},
		{"1 ", USDT, "", ""},
		{"1 000", USDT, "", ""},
		{"1,5", USDT, "", ""},
		{"1_000", USDT, "", ""},
		{".5", USDT, "", ""},
		{"5.", USDT, "", ""},
		{".", USDT, "", ""},
		{"1.2.3", USDT, "", ""},
		{"01", USDT, "", ""},
		{"00.5", USDT, "", ""},
		{"1.0000001", USDT, "", ""}, // 7 decimals
		{"١٢", USDT, "", ""},        // Arabic-Indic digits
		{"１２", USDT, "", ""},        // fullwidth digits
		{"1\u00a0000", USDT, "", ""},
		{"0x10", USDT, "", ""},
		{"NaN", USDT, "", ""},
		{"Infinity", USDT, "", ""},
		{"1" + strings.Repeat("0", 100), USDT, "", ""},
		{"1" + strings.Repeat("0", 78), USDT, "", ""}, // above 2^256-1 units: cannot be encoded on chain
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			a, err := ParseAmount(tc.asset, tc.in)
			if tc.units == "" {
				if !errors.Is(err, ErrInvalidAmount) {
					t.Fatalf("want invalid_amount, got %v (%s)", err, a)
				}
				var e *Error
				if !errors.As(err, &e) || e.Field != "amount" || e.Message == "" {
					t.Fatalf("error must name the field and say why: %#v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.UnitsString() != tc.units || a.String() != tc.canon || a.Decimals() != tc.asset.Decimals {
				t.Fatalf("got %s units, %q", a.UnitsString(), a.String())
			}
		})
	}
}

func TestTenToTheThirtyBaseUnitsRoundTripExactly(t *testing.T) {
	units := new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)
	a, err := FromUnits(USDT, units)
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != "1000000000000000000000000" || a.UnitsString() != units.String() {
		t.Fatalf("%s / %s", a, a.UnitsString())
	}
	b, err := ParseAmount(USDT, a.String())
	if err != nil || !b.Equal(a) || b.Units().Cmp(units) != 0 {
		t.Fatalf("parse back: %v %v", b, err)
	}
	plusOne, _ := FromUnits(USDT, new(big.Int).Add(units, big.NewInt(1)))
	if plusOne.String() != "1000000000000000000000000.000001" {
		t.Fatal(plusOne.String())
	}
	back, err := ParseAmount(USDT, plusOne.String())
	if err != nil || back.UnitsString() != "1000000000000000000000000000001" {
		t.Fatalf("%v %v", back.UnitsString(), err)
	}
	data, _ := json.Marshal(plusOne)
	var c Amount
	if err := json.Unmarshal(data, &c); err != nil || !c.Equal(plusOne) || c.UnitsString() != plusOne.UnitsString() {
		t.Fatalf("JSON round trip: %s → %v %v", data, c.UnitsString(), err)
	}
	if s, err := FromUnitsString(USDT, units.String()); err != nil || !s.Equal(a) {
		t.Fatal(err)
	}
}

func TestAmountJSONMustBeAString(t *testing.T) {
	cases := []struct {
		raw  string
		want string // "" = refused
	}{
		{`"12.50"`, "12.5"},
		{` "1" `, "1"},
		{`12.50`, ""},
		{`12`, ""},
		{`-1`, ""},
		{`1e3`, ""},
		{`null`, ""},
		{``, ""},
		{`true`, ""},
		{`["1"]`, ""},
		{`{"amount":"1"}`, ""},
		{`"1.5e3"`, ""},
		{`"\u0661"`, ""}, // an escaped Arabic-Indic one
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			a, err := ParseAmountJSON(USDT, json.RawMessage(tc.raw))
			if tc.want == "" {
				if !errors.Is(err, ErrInvalidAmount) {
					t.Fatalf("want invalid_amount, got %v", err)
				}
				return
			}
			if err != nil || a.String() != tc.want {
				t.Fatalf("%v %v", a, err)
			}
		})
	}
	var a Amount
	if err := json.Unmarshal([]byte(`1.5`), &a); err == nil {
		t.Fatal("Amount.UnmarshalJSON accepted a JSON number")
	}
}

func TestAmountArithmeticIsExactAndLeavesOperandsAlone(t *testing.T) {
	a, b := usdt("0.1"), usdt("0.2")
	sum := a.Add(b)
	if sum.String() != "0.3" || !sum.Equal(usdt("0.3")) {
		t.Fatal(sum)
	}
	if a.String() != "0.1" || b.String() != "0.2" {
		t.Fatal("operands changed")
	}
	diff := a.Sub(b)
	if diff.Sign() != -1 || diff.String() != "-0.1" {
		t.Fatal(diff)
	}
	u := a.Units()
	u.SetInt64(999)
	if a.UnitsString() != "100000" {
		t.Fatal("Units leaked the internal big.Int")
	}
	var zero Amount
	if !zero.IsZero() || zero.Sign() != 0 || zero.String() != "0" || zero.Add(a).String() != "0.1" {
		t.Fatal("zero value")
	}
	// Different scales compare by value.
	loose := newAmount(big.NewInt(15), 1)
	if loose.Cmp(usdt("1.5")) != 0 || loose.Cmp(usdt("1.500001")) != -1 {
		t.Fatal("cross-scale compare")
	}
	if usdt("1.5").FixedString() != "1.500000" {
		t.Fatal(usdt("1.5").FixedString())
	}
	if _, err := FromUnits(USDT, big.NewInt(-1)); !errors.Is(err, ErrInvalidAmount) {
		t.Fatal("negative units accepted")
	}
	if _, err := Amount(loose).In(Asset{Code: "X", Decimals: 0}); !errors.Is(err, ErrInvalidAmount) {
		t.Fatal("precision loss accepted")
	}
}

func TestLookupAsset(t *testing.T) {
	if a, err := LookupAsset("USDT-TRC20"); err != nil || a.Decimals != 6 {
		t.Fatal(a, err)
	}
	for _, code := range []string{"", "usdt-trc20", "USDT", "TRX"} {
		if _, err := LookupAsset(code); !errors.Is(err, ErrUnsupportedAsset) {
			t.Errorf("%q: %v", code, err)
		}
	}
}

func TestWithMaxOnlyTightens(t *testing.T) {
	if USDT.WithMax(Amount{}).Max.Cmp(USDT.Max) != 0 {
		t.Fatal("zero max removed the ceiling")
	}
	huge, _ := FromUnits(Asset{Decimals: 6}, new(big.Int).Lsh(big.NewInt(1), 300))
	if USDT.WithMax(huge).Max.Cmp(USDT.Max) != 0 {
		t.Fatal("a looser max raised the ceiling")
	}
}

func TestErrorsMatchByCode(t *testing.T) {
	_, err := ParseAmount(USDT, "-1")
	if !errors.Is(err, ErrInvalidAmount) || errors.Is(err, ErrInvalidPolicy) || CodeOf(err) != "invalid_amount" {
		t.Fatal(err)
	}
	wrapped := errors.Join(errors.New("context"), err)
	if !errors.Is(wrapped, ErrInvalidAmount) || CodeOf(wrapped) != CodeInvalidAmount {
		t.Fatal("wrapping loses the code")
	}
	if CodeOf(errors.New("plain")) != "" {
		t.Fatal("foreign error has a code")
	}
}

func TestLargestEncodableAmountRoundTripsAndOneMoreUnitIsRefused(t *testing.T) {
	top := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	a, err := FromUnits(USDT, top)
	if err != nil || !a.Equal(USDT.Max) {
		t.Fatalf("2^256-1 units: %v %v", a, err)
	}
	b, err := ParseAmount(USDT, a.String())
	if err != nil || b.UnitsString() != top.String() {
		t.Fatalf("parse back %s: %v %v", a, b.UnitsString(), err)
	}
	data, _ := json.Marshal(a)
	var c Amount
	if err := json.Unmarshal(data, &c); err != nil || c.UnitsString() != top.String() || c.FixedString() != a.FixedString() {
		t.Fatalf("JSON round trip %s: %v %v", data, c.UnitsString(), err)
	}
	over := new(big.Int).Add(top, big.NewInt(1))
	if _, err := FromUnits(USDT, over); !errors.Is(err, ErrInvalidAmount) {
		t.Fatalf("2^256 units accepted: %v", err)
	}
	if _, err := ParseAmount(USDT, newAmount(over, 6).String()); !errors.Is(err, ErrInvalidAmount) {
		t.Fatalf("2^256 units accepted as text: %v", err)
	}
}

func TestInPadsToTheAssetScaleAndKeepsTheValue(t *testing.T) {
	coarse, err := ParseAmount(Asset{Code: "X", Decimals: 2}, "1.5")
	if err != nil || coarse.Decimals() != 2 || coarse.UnitsString() != "150" {
		t.Fatalf("%v %v %v", coarse.Decimals(), coarse.UnitsString(), err)
	}
	fine, err := coarse.In(USDT)
	if err != nil || fine.Decimals() != 6 || fine.UnitsString() != "1500000" || fine.FixedString() != "1.500000" || !fine.Equal(coarse) {
		t.Fatalf("%v %v %v", fine.Decimals(), fine.UnitsString(), err)
	}
	if coarse.UnitsString() != "150" {
		t.Fatal("In changed its receiver")
	}
}

// The decimal library has package-wide formatting switches; weir's text for
// an amount (events, views, JSON) must not change if anything flips them.
func TestAmountTextIgnoresDecimalPackageSwitches(t *testing.T) {
	trim, sci := decimal.TrimTrailingZeros, decimal.UseScientificNotation
	t.Cleanup(func() { decimal.TrimTrailingZeros, decimal.UseScientificNotation = trim, sci })
	decimal.TrimTrailingZeros, decimal.UseScientificNotation = false, true
	for in, want := range map[string]string{"1.50": "1.5", "1500": "1500", "0.000001": "0.000001", "1000000": "1000000"} {
		a := usdt(in)
		if a.String() != want {
			t.Errorf("%s: String %q, want %q", in, a.String(), want)
		}
		if data, _ := json.Marshal(a); string(data) != `"`+a.FixedString()+`"` || strings.ContainsAny(string(data), "eE") {
			t.Errorf("%s: JSON %s", in, data)
		}
	}
}
