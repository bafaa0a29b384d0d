package usdrate

import (
	"errors"
	"math/big"
	"testing"
)

func TestParsePointer_RFC6901(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{in: "", want: nil},
		{in: "/", want: []string{""}},
		{in: "/data/amount", want: []string{"data", "amount"}},
		{in: "/a~1b/m~0n", want: []string{"a/b", "m~n"}},
		{in: "/~01", want: []string{"~1"}}, // ~0 first: "~01" is "~1", not "/"
		{in: "data/amount", bad: true},
		{in: "/a~2", bad: true},
		{in: "/a~", bad: true},
	} {
		p, err := parsePointer(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrBadPointer) {
				t.Errorf("%q: err %v, want ErrBadPointer", tc.in, err)
			}
			continue
		}
		if err != nil || len(p) != len(tc.want) {
			t.Fatalf("%q: %q %v, want %q", tc.in, p, err, tc.want)
		}
		for i := range p {
			if p[i] != tc.want[i] {
				t.Errorf("%q: token %d is %q, want %q", tc.in, i, p[i], tc.want[i])
			}
		}
		if p.String() != tc.in {
			t.Errorf("%q written back as %q", tc.in, p.String())
		}
	}
}

func TestParseRate_FindsThePrice(t *testing.T) {
	for _, tc := range []struct {
		name, body, ptr, want string
	}{
		{"number", `{"bitcoin":{"usd":97123.45}}`, "/bitcoin/usd", "97123.45"},
		{"string (Coinbase)", `{"data":{"amount":"97000.12","base":"BTC","currency":"USD"}}`, "/data/amount", "97000.12"},
		{"array element (Kraken)", `{"result":{"XXBTZUSD":{"c":["96000.5","0.1"]}}}`, "/result/XXBTZUSD/c/0", "96000.5"},
		{"whole answer", `50000`, "", "50000"},
		{"exponent", `{"p":9.7e4}`, "/p", "97000"},
		{"escaped member", `{"a/b":{"m~n":42000}}`, "/a~1b/m~0n", "42000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parsePointer(tc.ptr)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseRate([]byte(tc.body), p)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := new(big.Rat).SetString(tc.want)
			if got.Cmp(want) != 0 {
				t.Fatalf("got %s, want %s", got.FloatString(4), tc.want)
			}
		})
	}
}

func TestParseRate_RefusesWhatIsNoPrice(t *testing.T) {
	for _, tc := range []struct{ name, body, ptr string }{
		{"not JSON", `<html>`, ""},
		{"two values", `1 2`, ""},
		{"missing member", `{"data":{}}`, "/data/amount"},
		{"index past the end", `[1]`, "/1"},
		{"leading zero index", `[1,2]`, "/01"},
		{"into a number", `{"a":5}`, "/a/b"},
		{"null", `{"a":null}`, "/a"},
		{"object", `{"a":{}}`, "/a"},
		{"zero", `{"a":0}`, "/a"},
		{"negative", `{"a":-97000}`, "/a"},
		{"below a dollar", `{"a":0.5}`, "/a"},
		{"cents, not dollars", `{"a":9700000000000}`, "/a"},
		{"fraction string", `{"a":"1/3"}`, "/a"},
		{"hex string", `{"a":"0x1p16"}`, "/a"},
		{"infinity string", `{"a":"Inf"}`, "/a"},
		{"NaN string", `{"a":"NaN"}`, "/a"},
		{"huge exponent", `{"a":1e999999999}`, "/a"},
		{"empty string", `{"a":""}`, "/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parsePointer(tc.ptr)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := parseRate([]byte(tc.body), p); !errors.Is(err, ErrBadAnswer) {
				t.Fatalf("got %v, %v; want ErrBadAnswer", r, err)
			}
		})
	}
}

// FuzzParseRate: whatever a rate source answers, and whatever pointer the
// operator gave, the parser returns a price between the bounds or
// ErrBadAnswer, and never panics.
func FuzzParseRate(f *testing.F) {
	f.Add([]byte(`{"data":{"amount":"97000.12"}}`), "/data/amount")
	f.Add([]byte(`{"bitcoin":{"usd":97123.45}}`), "/bitcoin/usd")
	f.Add([]byte(`[[1,2],{"a~b":"3e4"}]`), "/1/a~0b")
	f.Add([]byte(`{"a":1e-400}`), "/a")
	f.Fuzz(func(t *testing.T, body []byte, ptr string) {
		p, err := parsePointer(ptr)
		if err != nil {
			if !errors.Is(err, ErrBadPointer) {
				t.Fatalf("pointer %q: %v", ptr, err)
			}
			return
		}
		r, err := parseRate(body, p)
		if err != nil {
			if !errors.Is(err, ErrBadAnswer) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		if r.Cmp(big.NewRat(minUSDPerBTC, 1)) < 0 || r.Cmp(big.NewRat(maxUSDPerBTC, 1)) > 0 {
			t.Fatalf("rate %s out of bounds", r.FloatString(8))
		}
	})
}
