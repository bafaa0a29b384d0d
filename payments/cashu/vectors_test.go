package cashu

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
)

// readVectors decodes a testdata file of NUT test vectors into v.
func readVectors(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustPoint(t *testing.T, s string) *btcec.PublicKey {
	t.Helper()
	p, err := ParsePoint(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustKey(t *testing.T, s string) *btcec.PrivateKey {
	t.Helper()
	k, _ := btcec.PrivKeyFromBytes(mustHex(t, s))
	return k
}

// nut00 is testdata/nut00.json, extracted from 00-tests.md.
type nut00 struct {
	HashToCurve []struct{ Message, Point string } `json:"hash_to_curve"`
	Blind       []struct {
		X string `json:"x"`
		R string `json:"r"`
		B string `json:"B_"`
	} `json:"blind"`
	Sign []struct {
		K string `json:"k"`
		B string `json:"B_"`
		C string `json:"C_"`
	} `json:"sign"`
	V3Serialized string          `json:"v3_serialized"`
	V3JSON       json.RawMessage `json:"v3_json"`
	V3Invalid    []string        `json:"v3_invalid"`
	V3Padding    []string        `json:"v3_padding"`
	V4Serialized []string        `json:"v4_serialized"`
	V4RawHex     string          `json:"v4_raw_hex"`
}

func TestHashToCurve_NUT00Vectors(t *testing.T) {
	var v nut00
	readVectors(t, "nut00.json", &v)
	if len(v.HashToCurve) != 3 {
		t.Fatalf("%d vectors, want 3", len(v.HashToCurve))
	}
	for _, tc := range v.HashToCurve {
		y, err := HashToCurve(mustHex(t, tc.Message))
		if err != nil {
			t.Fatal(err)
		}
		if got := PointHex(y); got != tc.Point {
			t.Errorf("hash_to_curve(%s) = %s, want %s", tc.Message, got, tc.Point)
		}
	}
}

func TestBDHKE_NUT00Vectors(t *testing.T) {
	var v nut00
	readVectors(t, "nut00.json", &v)
	for _, tc := range v.Blind {
		// x is hex of the message bytes; Blind takes the secret's bytes.
		b, err := Blind(string(mustHex(t, tc.X)), mustKey(t, tc.R))
		if err != nil {
			t.Fatal(err)
		}
		if got := PointHex(b); got != tc.B {
			t.Errorf("B_ = %s, want %s", got, tc.B)
		}
	}
	for _, tc := range v.Sign {
		c, err := SignBlinded(mustKey(t, tc.K), mustPoint(t, tc.B))
		if err != nil {
			t.Fatal(err)
		}
		if got := PointHex(c); got != tc.C {
			t.Errorf("C_ = %s, want %s", got, tc.C)
		}
	}
	if len(v.Blind) != 2 || len(v.Sign) != 2 {
		t.Fatalf("%d blind and %d sign vectors, want 2 and 2", len(v.Blind), len(v.Sign))
	}
}

func TestBDHKE_RoundTrip(t *testing.T) {
	k, _ := btcec.NewPrivateKey()
	r, _ := btcec.NewPrivateKey()
	secret := "407915bc212be61a77e3e6d2aeb4c727980bda51cd06a6afc29e2861768a7837"
	b, err := Blind(secret, r)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := SignBlinded(k, b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Unblind(cb, r, k.PubKey())
	if err != nil {
		t.Fatal(err)
	}
	if !VerifySignature(k, secret, c) {
		t.Fatal("unblinded signature does not verify")
	}
	if VerifySignature(k, secret+"x", c) {
		t.Fatal("signature verifies for another secret")
	}
	other, _ := btcec.NewPrivateKey()
	if VerifySignature(other, secret, c) {
		t.Fatal("signature verifies under another key")
	}
}

// nut12 is testdata/nut12.json, from 12-tests.md.
type nut12 struct {
	HashE struct {
		R1, R2, K, Hash string
		C               string `json:"C_"`
	} `json:"hash_e"`
	Nonce struct {
		A    string `json:"a"`
		PubA string `json:"A"`
		B    string `json:"B_"`
		C    string `json:"C_"`
		E    string `json:"e"`
		S    string `json:"s"`
	} `json:"deterministic_nonce"`
	BlindSignature struct {
		A         string         `json:"A"`
		B         string         `json:"B_"`
		Signature BlindSignature `json:"signature"`
	} `json:"blind_signature"`
	Proof struct {
		A     string `json:"A"`
		Proof Proof  `json:"proof"`
	} `json:"proof"`
}

func TestDLEQ_NUT12Vectors(t *testing.T) {
	var v nut12
	readVectors(t, "nut12.json", &v)
	h := hashE(mustPoint(t, v.HashE.R1), mustPoint(t, v.HashE.R2), mustPoint(t, v.HashE.K), mustPoint(t, v.HashE.C))
	if got := hex.EncodeToString(h[:]); got != v.HashE.Hash {
		t.Errorf("hash_e = %s, want %s", got, v.HashE.Hash)
	}

	a := mustKey(t, v.Nonce.A)
	if PointHex(a.PubKey()) != v.Nonce.PubA {
		t.Fatalf("A = %s, want %s", PointHex(a.PubKey()), v.Nonce.PubA)
	}
	e, s, err := ProveDLEQ(a, mustPoint(t, v.Nonce.B), mustPoint(t, v.Nonce.C))
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(e[:]) != v.Nonce.E || hex.EncodeToString(s[:]) != v.Nonce.S {
		t.Errorf("deterministic DLEQ e, s = %x, %x, want %s, %s", e, s, v.Nonce.E, v.Nonce.S)
	}
	if err := VerifyDLEQ(a.PubKey(), mustPoint(t, v.Nonce.B), mustPoint(t, v.Nonce.C), e, s); err != nil {
		t.Errorf("deterministic DLEQ does not verify: %v", err)
	}

	sig := v.BlindSignature.Signature
	if err := sig.VerifyDLEQ(mustPoint(t, v.BlindSignature.A), mustPoint(t, v.BlindSignature.B)); err != nil {
		t.Errorf("BlindSignature DLEQ: %v", err)
	}
	if err := v.Proof.Proof.VerifyDLEQ(mustPoint(t, v.Proof.A)); err != nil {
		t.Errorf("Proof DLEQ: %v", err)
	}
}

func TestDLEQ_RefusesTamperedProofs(t *testing.T) {
	var v nut12
	readVectors(t, "nut12.json", &v)
	pubA := mustPoint(t, v.Proof.A)
	other := mustPoint(t, v.HashE.C)
	flip := func(h string) string {
		b := mustHex(t, h)
		b[31] ^= 1
		return hex.EncodeToString(b)
	}
	tamper := map[string]func(p *Proof){
		"e":      func(p *Proof) { p.DLEQ.E = flip(p.DLEQ.E) },
		"s":      func(p *Proof) { p.DLEQ.S = flip(p.DLEQ.S) },
		"r":      func(p *Proof) { p.DLEQ.R = flip(p.DLEQ.R) },
		"secret": func(p *Proof) { p.Secret += "0" },
		"C":      func(p *Proof) { p.C = PointHex(other) },
		"no r":   func(p *Proof) { p.DLEQ.R = "" },
		"none":   func(p *Proof) { p.DLEQ = nil },
	}
	for name, f := range tamper {
		p := v.Proof.Proof
		d := *p.DLEQ
		p.DLEQ = &d
		f(&p)
		if err := p.VerifyDLEQ(pubA); err == nil {
			t.Errorf("proof with tampered %s verifies", name)
		}
	}
	sig := v.BlindSignature.Signature
	if err := sig.VerifyDLEQ(other, mustPoint(t, v.BlindSignature.B)); err == nil {
		t.Error("BlindSignature DLEQ verifies under another key")
	}
}

func TestOutput_ProofFromMintSignature(t *testing.T) {
	k, _ := btcec.NewPrivateKey()
	outs, err := NewOutputs("009a1f293253e41e", []uint64{1, 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		sig, err := SignOutput(k, o.Message)
		if err != nil {
			t.Fatal(err)
		}
		p, err := o.Proof(sig, k.PubKey())
		if err != nil {
			t.Fatal(err)
		}
		c := mustPoint(t, p.C)
		if !VerifySignature(k, p.Secret, c) {
			t.Fatal("proof does not verify at the mint")
		}
		if err := p.VerifyDLEQ(k.PubKey()); err != nil {
			t.Fatalf("proof's DLEQ (Carol): %v", err)
		}
		other, _ := btcec.NewPrivateKey()
		if _, err := o.Proof(sig, other.PubKey()); err == nil {
			t.Fatal("signature accepted under a key that did not make it")
		}
		sig.DLEQ = nil
		if _, err := o.Proof(sig, k.PubKey()); err == nil {
			t.Fatal("signature without DLEQ accepted")
		}
	}
}

func TestKeysetID_NUT02Vectors(t *testing.T) {
	var v []struct {
		ID   string `json:"id"`
		Keys Keys   `json:"keys"`
	}
	readVectors(t, "nut02.json", &v)
	if len(v) != 2 {
		t.Fatalf("%d keysets, want 2", len(v))
	}
	for _, ks := range v {
		pks, err := ParseKeys(ks.Keys)
		if err != nil {
			t.Fatal(err)
		}
		if got := KeysetID(pks); got != ks.ID {
			t.Errorf("keyset id = %s, want %s", got, ks.ID)
		}
		if _, err := NewKeyset(KeysetInfo{ID: ks.ID}, ks.Keys); err != nil {
			t.Errorf("NewKeyset: %v", err)
		}
		if _, err := NewKeyset(KeysetInfo{ID: "00ffffffffffffff"}, ks.Keys); err == nil {
			t.Error("NewKeyset accepts an id that does not match the keys")
		}
	}
}
