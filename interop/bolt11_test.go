package interop

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/lnsim"
)

// requirePaymentsModules fails (not skips) when interop/payments' pinned
// packages are missing.
func requirePaymentsModules(t *testing.T) {
	t.Helper()
	requireNodeModules(t)
	for _, p := range []string{"bolt11", filepath.Join("@getalby", "sdk"), "ws"} {
		if _, err := os.Stat(filepath.Join("payments", "node_modules", p)); err != nil {
			t.Fatalf("interop/payments/node_modules/%s is missing; run: make interop-deps", p)
		}
	}
}

// runPaymentsScript runs a script from payments/ with in as its stdin and
// decodes the one JSON object it prints.
func runPaymentsScript(t *testing.T, script string, env map[string]string, in, out any) {
	t.Helper()
	requirePaymentsModules(t)
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if code, stderr := runNode(t, "payments", script, env, bytes.NewReader(body), out); code != 0 {
		t.Logf("%s exited %d; stderr: %s", script, code, stderr)
	}
}

type npmDecoded struct {
	OK              bool    `json:"ok"`
	Error           string  `json:"error"`
	Network         string  `json:"network"`
	Msat            *string `json:"msat"`
	Timestamp       int64   `json:"timestamp"`
	Payee           string  `json:"payee"`
	Signature       string  `json:"signature"`
	PaymentHash     string  `json:"paymentHash"`
	PaymentSecret   *string `json:"paymentSecret"`
	Description     *string `json:"description"`
	DescriptionHash *string `json:"descriptionHash"`
	Expiry          *int64  `json:"expiry"`
	TimeExpireDate  int64   `json:"timeExpireDate"`
	MinFinalCltv    *int64  `json:"minFinalCltv"`
}

type npmEncodeSpec struct {
	Network         string `json:"network"`
	Msat            string `json:"msat,omitempty"`
	Timestamp       int64  `json:"timestamp"`
	PaymentHash     string `json:"paymentHash"`
	PaymentSecret   string `json:"paymentSecret,omitempty"`
	Description     string `json:"description,omitempty"`
	DescriptionHash string `json:"descriptionHash,omitempty"`
	Expiry          int64  `json:"expiry,omitempty"`
	MinFinalCltv    int64  `json:"minFinalCltv,omitempty"`
	PrivateKey      string `json:"privateKey"`
}

type npmEncoded struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Invoice string `json:"invoice"`
}

func ptr[T any](v T) *T { return &v }

// TestBolt11_NpmPackage: invoices cvm makes (cvm wallet-sim's, from
// package lnsim, and others from payments/bolt11.Encode covering every
// network, sub-satoshi and absent amounts, description hashes, expiry and
// CLTV) decode with the bolt11 npm package to the same signature-recovered
// payee, amount, payment hash, expiry and the rest; and invoices that
// package encodes and signs decode with cvm's decoder to what it was given.
func TestBolt11_NpmPackage(t *testing.T) {
	key, err := btcec.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	payee := hex.EncodeToString(key.PubKey().SerializeCompressed())
	hash := sha256.Sum256([]byte("preimage"))
	secret := sha256.Sum256([]byte("secret"))
	descHash := sha256.Sum256([]byte("a long description"))
	ts := time.Unix(1_790_000_000, 0)

	// What cvm wallet-sim hands out: lnsim's invoices.
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.AddWallet("srv", 0); err != nil {
		t.Fatal(err)
	}
	simInv, err := net.MakeInvoice("srv", 10_000, "add two numbers", 300*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	simPayee, err := net.NodeID("srv")
	if err != nil {
		t.Fatal(err)
	}

	type made struct {
		inv   bolt11.Invoice
		s     string
		payee string
	}
	cases := []made{{s: simInv.Bolt11, payee: simPayee}}
	for _, inv := range []bolt11.Invoice{
		{Currency: bolt11.Bitcoin, Amount: 1_234_567, Timestamp: ts, Hash: hash, Secret: &secret, Description: "coffee ☕", ExpirySeconds: 600, MinFinalCLTV: 40, Features: []int{8, 14}},
		{Currency: bolt11.Testnet, Timestamp: ts, Hash: hash, DescriptionHash: &descHash},
		{Currency: bolt11.Regtest, Amount: 21_000_000_000, Timestamp: ts, Hash: hash, Secret: &secret, Description: "", ExpirySeconds: 86_400, Features: []int{8, 14, 17}},
	} {
		s, err := bolt11.Encode(inv, key)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, made{inv: inv, s: s, payee: payee})
	}
	var decodeIn []string
	for _, c := range cases {
		decodeIn = append(decodeIn, c.s)
	}

	// What the npm package encodes and signs.
	specs := []npmEncodeSpec{
		{Network: "bcrt", Msat: "10000", Timestamp: ts.Unix(), PaymentHash: hex.EncodeToString(hash[:]), PaymentSecret: hex.EncodeToString(secret[:]), Description: "add two numbers", Expiry: 300, MinFinalCltv: 18},
		{Network: "bc", Msat: "2500000001", Timestamp: ts.Unix(), PaymentHash: hex.EncodeToString(hash[:]), DescriptionHash: hex.EncodeToString(descHash[:]), Expiry: 3600},
		{Network: "tb", Timestamp: ts.Unix(), PaymentHash: hex.EncodeToString(hash[:]), Description: "no amount"},
	}
	for i := range specs {
		specs[i].PrivateKey = hex.EncodeToString(key.Serialize())
	}

	var out struct {
		Decoded []npmDecoded `json:"decoded"`
		Encoded []npmEncoded `json:"encoded"`
	}
	runPaymentsScript(t, "bolt11-check.mjs", nil, map[string]any{"decode": decodeIn, "encode": specs}, &out)
	if len(out.Decoded) != len(cases) || len(out.Encoded) != len(specs) {
		t.Fatalf("the script answered %d decodes and %d encodes", len(out.Decoded), len(out.Encoded))
	}

	for i, c := range cases {
		got := out.Decoded[i]
		ours, err := bolt11.Decode(c.s)
		if err != nil {
			t.Fatalf("cvm's own invoice %d does not decode: %v", i, err)
		}
		if !got.OK {
			t.Errorf("bolt11 npm refused cvm's invoice %s: %s", c.s, got.Error)
			continue
		}
		wantMsat := (*string)(nil)
		if ours.Amount != 0 {
			wantMsat = ptr(strconv.FormatInt(ours.Amount, 10))
		}
		if got.Payee != c.payee || got.PaymentHash != ours.PaymentHash() || got.Network != ours.Currency ||
			got.Timestamp != ours.Timestamp.Unix() || !eqPtr(got.Msat, wantMsat) {
			t.Errorf("invoice %d: npm read payee %s hash %s network %s ts %d msat %v; cvm: %s %s %s %d %d",
				i, got.Payee, got.PaymentHash, got.Network, got.Timestamp, deref(got.Msat), c.payee, ours.PaymentHash(), ours.Currency, ours.Timestamp.Unix(), ours.Amount)
		}
		// Without an x field npm reports no expiry date (BOLT 11's default
		// of an hour is the reader's to apply, as cvm does).
		if wantExp := ours.ExpiresAt().Unix(); ours.ExpirySeconds == 0 && (got.TimeExpireDate != 0 || ours.Expiry() != bolt11.DefaultExpiry) ||
			ours.ExpirySeconds != 0 && got.TimeExpireDate != wantExp {
			t.Errorf("invoice %d: npm says it expires at %d, cvm at %d", i, got.TimeExpireDate, wantExp)
		}
		if ours.ExpirySeconds != 0 && (got.Expiry == nil || uint64(*got.Expiry) != ours.ExpirySeconds) {
			t.Errorf("invoice %d: expiry %v, want %d", i, deref(got.Expiry), ours.ExpirySeconds)
		}
		if ours.Description != "" && !eqPtr(got.Description, &ours.Description) {
			t.Errorf("invoice %d: description %v, want %q", i, deref(got.Description), ours.Description)
		}
		if ours.DescriptionHash != nil && !eqPtr(got.DescriptionHash, ptr(hex.EncodeToString(ours.DescriptionHash[:]))) {
			t.Errorf("invoice %d: description hash %v", i, deref(got.DescriptionHash))
		}
		if ours.Secret != nil && !eqPtr(got.PaymentSecret, ptr(hex.EncodeToString(ours.Secret[:]))) {
			t.Errorf("invoice %d: payment secret %v", i, deref(got.PaymentSecret))
		}
		if ours.MinFinalCLTV != 0 && (got.MinFinalCltv == nil || uint64(*got.MinFinalCltv) != ours.MinFinalCLTV) {
			t.Errorf("invoice %d: min final cltv %v, want %d", i, deref(got.MinFinalCltv), ours.MinFinalCLTV)
		}
	}
	if got := out.Decoded[0]; !got.OK || !eqPtr(got.Msat, ptr("10000")) || got.Expiry == nil || *got.Expiry != 300 || !eqPtr(got.Description, ptr("add two numbers")) {
		t.Errorf("cvm wallet-sim's invoice read by npm as %+v", got)
	}

	for i, e := range out.Encoded {
		spec := specs[i]
		if !e.OK {
			t.Fatalf("bolt11 npm could not encode %+v: %s", spec, e.Error)
		}
		inv, err := bolt11.Decode(e.Invoice)
		if err != nil {
			t.Errorf("cvm cannot decode npm's invoice %s: %v", e.Invoice, err)
			continue
		}
		wantAmount := int64(0)
		if spec.Msat != "" {
			wantAmount, _ = strconv.ParseInt(spec.Msat, 10, 64)
		}
		if inv.Payee() != payee || inv.Currency != spec.Network || inv.Amount != wantAmount || inv.PaymentHash() != spec.PaymentHash ||
			inv.Timestamp.Unix() != spec.Timestamp || inv.ExpirySeconds != uint64(spec.Expiry) || inv.MinFinalCLTV != uint64(spec.MinFinalCltv) ||
			inv.Description != spec.Description {
			t.Errorf("npm's invoice %d read by cvm as %+v; encoded from %+v", i, inv, spec)
		}
		if (spec.PaymentSecret != "") != (inv.Secret != nil) || (inv.Secret != nil && (hex.EncodeToString(inv.Secret[:]) != spec.PaymentSecret || !slices.Equal(inv.Features, []int{8, 14}))) {
			t.Errorf("npm's invoice %d: payment secret %v", i, inv.Secret)
		}
		if (spec.DescriptionHash != "") != (inv.DescriptionHash != nil) || (inv.DescriptionHash != nil && hex.EncodeToString(inv.DescriptionHash[:]) != spec.DescriptionHash) {
			t.Errorf("npm's invoice %d: description hash %v", i, inv.DescriptionHash)
		}
		// One character changed breaks the checksum: cvm refuses it.
		tampered := []byte(e.Invoice)
		tampered[len(tampered)-10] ^= 'q' ^ 'p'
		if _, err := bolt11.Decode(string(tampered)); err == nil {
			t.Errorf("npm's invoice %d with one character changed still decodes", i)
		}
	}
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
