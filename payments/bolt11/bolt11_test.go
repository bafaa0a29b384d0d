package bolt11_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/payments/bolt11"
)

type vector struct {
	Name            string `json:"name"`
	Invoice         string `json:"invoice"`
	Currency        string `json:"currency"`
	AmountMsat      int64  `json:"amount_msat"`
	Timestamp       int64  `json:"timestamp"`
	PaymentHash     string `json:"payment_hash"`
	Description     string `json:"description"`
	DescriptionHash string `json:"description_hash"`
	PaymentSecret   string `json:"payment_secret"`
	Features        []int  `json:"features"`
	Expiry          int64  `json:"expiry"`
	MinFinalCLTV    uint64 `json:"min_final_cltv"`
	Payee           string `json:"payee"`
	Error           string `json:"error"`
}

type vectors struct {
	PrivateKey              string   `json:"private_key"`
	DescriptionHashPreimage string   `json:"description_hash_preimage"`
	Valid                   []vector `json:"valid"`
	Invalid                 []vector `json:"invalid"`
}

func loadVectors(tb testing.TB) vectors {
	tb.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		tb.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestSpecExamples decodes every valid example of BOLT 11 and checks each
// field it encodes, the payee recovered from the signature included.
func TestSpecExamples(t *testing.T) {
	v := loadVectors(t)
	cake := sha256.Sum256([]byte(v.DescriptionHashPreimage))
	for _, tc := range v.Valid {
		t.Run(tc.Name, func(t *testing.T) {
			inv, err := bolt11.Decode(tc.Invoice)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, want any) {
				t.Helper()
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			check("currency", inv.Currency, tc.Currency)
			check("amount", inv.AmountMsat(), tc.AmountMsat)
			check("timestamp", inv.Timestamp.Unix(), tc.Timestamp)
			check("payment hash", inv.PaymentHash(), tc.PaymentHash)
			check("description", inv.Description, tc.Description)
			check("expiry", inv.Expiry(), time.Duration(tc.Expiry)*time.Second)
			check("expires at", inv.ExpiresAt().Unix(), tc.Timestamp+tc.Expiry)
			check("min final cltv", inv.MinFinalCLTV, tc.MinFinalCLTV)
			check("payee", inv.Payee(), tc.Payee)
			check("features", inv.Features, tc.Features)
			if tc.DescriptionHash != "" {
				if inv.DescriptionHash == nil {
					t.Fatal("no description hash")
				}
				check("description hash", hex.EncodeToString(inv.DescriptionHash[:]), tc.DescriptionHash)
				check("description hash of the text", *inv.DescriptionHash, cake)
			} else if inv.DescriptionHash != nil {
				t.Errorf("unexpected description hash")
			}
			if tc.PaymentSecret != "" {
				if inv.Secret == nil {
					t.Fatal("no payment secret")
				}
				check("payment secret", hex.EncodeToString(inv.Secret[:]), tc.PaymentSecret)
			}
		})
	}
}

// TestSpecInvalidExamples checks that every invalid example of BOLT 11 is
// refused, for the reason the spec gives.
func TestSpecInvalidExamples(t *testing.T) {
	for _, tc := range loadVectors(t).Invalid {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := bolt11.Decode(tc.Invoice)
			if err == nil {
				t.Fatal("decoded")
			}
			if !errors.Is(err, bolt11.ErrInvalid) || !strings.Contains(err.Error(), tc.Error) {
				t.Errorf("error %q, want ErrInvalid mentioning %q", err, tc.Error)
			}
		})
	}
}

// TestEncodeReproducesSpecExamples re-encodes the examples whose fields
// Encode writes in the same order, with the spec's key: signatures are
// deterministic (RFC 6979), so the strings must match exactly.
func TestEncodeReproducesSpecExamples(t *testing.T) {
	v := loadVectors(t)
	kb, _ := hex.DecodeString(v.PrivateKey)
	key, _ := btcec.PrivKeyFromBytes(kb)
	for _, i := range []int{0, 1, 2, 3} {
		tc := v.Valid[i]
		inv, err := bolt11.Decode(tc.Invoice)
		if err != nil {
			t.Fatal(err)
		}
		got, err := bolt11.Encode(*inv, key)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.Invoice {
			t.Errorf("%s:\n got %s\nwant %s", tc.Name, got, tc.Invoice)
		}
	}
}

func testKey(seed byte) *btcec.PrivateKey {
	b := sha256.Sum256([]byte{seed})
	k, _ := btcec.PrivKeyFromBytes(b[:])
	return k
}

// TestRoundTrip encodes regtest invoices with every field and decodes
// them back unchanged; the explicit payee and its absence both work.
func TestRoundTrip(t *testing.T) {
	key := testKey(1)
	secret := [32]byte{7}
	dh := sha256.Sum256([]byte("long description"))
	for _, msat := range []int64{1, 10, 999, 1000, 100_000, 250_000_000, 2_100_000_000_000_000_000 / 1000, bolt11.MaxAmountMsat} {
		for _, explicit := range []bool{false, true} {
			inv := bolt11.Invoice{
				Currency: bolt11.Regtest, Amount: msat, Timestamp: time.Unix(1_700_000_000, 0),
				Hash: sha256.Sum256([]byte("preimage")), Secret: &secret, Description: "cvm tool call",
				DescriptionHash: &dh, ExpirySeconds: 300, MinFinalCLTV: 40, Features: []int{9, 14, 17},
				ExplicitPayee: explicit,
			}
			s, err := bolt11.Encode(inv, key)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(s, "lnbcrt") {
				t.Errorf("%s does not start with lnbcrt", s)
			}
			got, err := bolt11.Decode(s)
			if err != nil {
				t.Fatalf("%d msat: %v", msat, err)
			}
			copy(inv.NodeID[:], key.PubKey().SerializeCompressed())
			if !reflect.DeepEqual(*got, inv) {
				t.Errorf("round trip:\n got %+v\nwant %+v", *got, inv)
			}
			if got.Payee() != hex.EncodeToString(key.PubKey().SerializeCompressed()) {
				t.Errorf("payee %s", got.Payee())
			}
		}
	}
}

// TestTamperedInvoiceRefused flips each character of a valid invoice: the
// checksum catches every single change.
func TestTamperedInvoiceRefused(t *testing.T) {
	s, err := bolt11.Encode(bolt11.Invoice{Currency: bolt11.Regtest, Amount: 5000, Timestamp: time.Unix(1_700_000_000, 0), Description: "x"}, testKey(2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(s) {
		b := []byte(s)
		if b[i] == 'q' {
			b[i] = 'p'
		} else {
			b[i] = 'q'
		}
		if _, err := bolt11.Decode(string(b)); err == nil {
			t.Errorf("changing character %d was not noticed", i)
		}
	}
}

// TestExpired uses the invoice's own clock: no waiting.
func TestExpired(t *testing.T) {
	inv := bolt11.Invoice{Timestamp: time.Unix(1000, 0), ExpirySeconds: 60}
	if inv.Expired(time.Unix(1059, 0)) || !inv.Expired(time.Unix(1060, 0)) {
		t.Error("expiry boundary wrong")
	}
	if (&bolt11.Invoice{Timestamp: time.Unix(0, 0)}).Expiry() != time.Hour {
		t.Error("default expiry is not an hour")
	}
}

// FuzzDecode feeds Decode arbitrary strings: it never panics, and what it
// accepts is self-consistent (a positive amount within the supply, UTF-8
// description, sorted features).
func FuzzDecode(f *testing.F) {
	v := loadVectors(f)
	for _, tc := range append(v.Valid, v.Invalid...) {
		f.Add(tc.Invoice)
	}
	s, _ := bolt11.Encode(bolt11.Invoice{Currency: bolt11.Regtest, Amount: 1000, Timestamp: time.Unix(1_700_000_000, 0), ExplicitPayee: true}, testKey(3))
	f.Add(s)
	f.Fuzz(func(t *testing.T, s string) {
		inv, err := bolt11.Decode(s)
		parsed, perr := bolt11.Parse(s)
		if err == nil && (perr != nil || parsed.Amount != inv.Amount || parsed.Hash != inv.Hash || parsed.Description != inv.Description) {
			t.Fatalf("Decode read %+v; Parse %+v, %v", inv, parsed, perr)
		}
		if err != nil {
			if inv != nil {
				t.Fatal("invoice with an error")
			}
			return
		}
		if inv.Amount < 0 || inv.Amount > bolt11.MaxAmountMsat {
			t.Fatalf("amount %d", inv.Amount)
		}
		if !utf8.ValidString(inv.Description) || !slices.IsSorted(inv.Features) {
			t.Fatal("inconsistent invoice")
		}
		if _, err := btcec.ParsePubKey(inv.NodeID[:]); err != nil {
			t.Fatalf("payee: %v", err)
		}
	})
}

// FuzzEncodeDecode builds invoices from fuzzed fields: what Encode makes,
// Decode reads back identically.
func FuzzEncodeDecode(f *testing.F) {
	f.Add(byte(1), int64(1000), int64(1_700_000_000), "desc", uint64(300), uint64(18), uint64(1<<9|1<<14), true, false)
	f.Add(byte(2), int64(0), int64(0), "", uint64(0), uint64(0), uint64(0), false, true)
	f.Fuzz(func(t *testing.T, seed byte, amount, ts int64, desc string, expiry, cltv, features uint64, explicit, secret bool) {
		if amount < 0 || amount > bolt11.MaxAmountMsat || ts < 0 || ts >= 1<<35 || !utf8.ValidString(desc) || len(desc) > 639 {
			return
		}
		inv := bolt11.Invoice{
			Currency: []string{bolt11.Bitcoin, bolt11.Testnet, bolt11.Signet, bolt11.Regtest}[seed%4],
			Amount:   amount, Timestamp: time.Unix(ts, 0), Hash: sha256.Sum256([]byte(desc)),
			Description: desc, ExpirySeconds: expiry >> 4, MinFinalCLTV: cltv >> 4, ExplicitPayee: explicit,
		}
		if secret {
			inv.Secret = &[32]byte{seed}
		}
		if desc == "" && seed%2 == 1 {
			inv.DescriptionHash = &inv.Hash
		}
		for b := range 64 {
			if features>>b&1 == 1 && (b%2 == 1 || b == 8 || b == 14 || b == 16 || b == 48) {
				inv.Features = append(inv.Features, b)
			}
		}
		key := testKey(seed)
		s, err := bolt11.Encode(inv, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := bolt11.Decode(s)
		if err != nil {
			t.Fatalf("decode %s: %v", s, err)
		}
		copy(inv.NodeID[:], key.PubKey().SerializeCompressed())
		if !reflect.DeepEqual(*got, inv) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", *got, inv)
		}
	})
}
