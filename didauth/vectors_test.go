package didauth

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/durable"
)

// kitVectors is testdata/identitykit-vectors.json: DIDAuthV1 vectors made
// with the real @nuwa-ai/identity-kit 0.6.0 (deterministic keys, fixed
// nonce and timestamp), with the kit's own verdicts.
type kitVectors struct {
	Ed25519 struct {
		SeedHex       string `json:"seed_hex"`
		DID           string `json:"did"`
		KeyID         string `json:"key_id"`
		Nonce         string `json:"nonce"`
		Timestamp     int64  `json:"timestamp"`
		Canonical     string `json:"canonical_signed_data"`
		BytesSigned   string `json:"bytes_signed_utf8"`
		SignatureHex  string `json:"signature_hex"`
		HeaderJSON    string `json:"header_json"`
		Header        string `json:"authorization_header"`
		HugeSkew      string `json:"verify_with_huge_skew"`
		DefaultWindow string `json:"verify_default_window"`
	} `json:"ed25519_fixed"`
	Tamper struct {
		Params    json.RawMessage `json:"tampered_params"`
		Canonical string          `json:"canonical"`
		Result    string          `json:"result"`
	} `json:"quirk_params_tamper"`
	WithAudience struct {
		Canonical string `json:"canonical_signed_data"`
		Header    string `json:"authorization_header"`
	} `json:"ed25519_fixed_with_audience"`
	Fresh struct {
		Header       string `json:"authorization_header"`
		FirstVerify  string `json:"first_verify"`
		ReplayVerify string `json:"replay_verify"`
	} `json:"fresh"`
	Errors struct {
		WrongKey     string `json:"wrong_key"`
		UnknownKeyID string `json:"unknown_key_id"`
		WrongScheme  string `json:"wrong_scheme"`
		NoUPrefix    string `json:"base64url_without_u_prefix"`
	} `json:"errors"`
	Secp256k1 struct {
		PrivateKeyHex string `json:"private_key_hex"`
		DID           string `json:"did"`
		KeyID         string `json:"key_id"`
		Canonical     string `json:"canonical_signed_data"`
		SignatureHex  string `json:"signature_hex"`
		Header        string `json:"authorization_header"`
		Verify        string `json:"verify"`
	} `json:"secp256k1_fixed"`
	Encodings struct {
		Multibase string          `json:"multibase_base64url_of_bytes_01_02_03_fa"`
		NestedIn  json.RawMessage `json:"canonicalize_nested_demo_input"`
		NestedOut string          `json:"canonicalize_nested_demo_output"`
	} `json:"encodings"`
}

var discard = slog.New(slog.DiscardHandler)

// kitCodes maps the kit's AuthErrorCode values to cvm's codes.
var kitCodes = map[string]string{
	"ok":                            "",
	"TIMESTAMP_OUT_OF_WINDOW":       CodeTimestamp,
	"NONCE_REPLAYED":                CodeReplayed,
	"SIGNATURE_VERIFICATION_FAILED": CodeBadSignature,
	"VERIFICATION_METHOD_NOT_FOUND": CodeKeyNotFound,
	"INVALID_HEADER":                CodeMalformed,
	"INVALID_BASE64":                CodeEncoding,
}

func readVectors() ([]byte, error) { return os.ReadFile("testdata/identitykit-vectors.json") }

func loadKitVectors(t *testing.T) kitVectors {
	t.Helper()
	b, err := readVectors()
	if err != nil {
		t.Fatal(err)
	}
	var v kitVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// verdict verifies header in compatibility mode at time now and returns
// the code ("" for success).
func verdict(t *testing.T, v *Verifier, header string) string {
	t.Helper()
	_, err := v.Verify(context.Background(), header, Request{Method: "POST", Path: "/mcp", URL: "https://mcp.example.com"})
	if err == nil {
		return ""
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("not an *Error: %v", err)
	}
	return e.Code
}

func compatVerifier(t *testing.T, now time.Time, window time.Duration, r did.Resolver) *Verifier {
	t.Helper()
	v, err := NewVerifier(Options{Compat: true, Now: func() time.Time { return now }, Window: window, Resolver: r,
		Store: durable.NewMemory(durable.Options{Now: func() time.Time { return now }}), Audiences: []string{"https://mcp.example.com"},
		Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestKitVectors_ReproduceByteForByte: cvm's compatibility mode makes the
// kit's canonical bytes, signatures and headers exactly.
func TestKitVectors_ReproduceByteForByte(t *testing.T) {
	v := loadKitVectors(t)
	ctx := context.Background()
	e := v.Ed25519
	seed, _ := hex.DecodeString(e.SeedHex)
	ks, err := did.NewKeySigner(did.Ed25519, seed)
	if err != nil {
		t.Fatal(err)
	}
	if ks.DID() != e.DID {
		t.Fatalf("did %s, want %s", ks.DID(), e.DID)
	}
	signer := ks.WithKeyID(e.DID, e.KeyID)
	var hj struct {
		SignedData json.RawMessage `json:"signed_data"`
	}
	if err := json.Unmarshal([]byte(e.HeaderJSON), &hj); err != nil {
		t.Fatal(err)
	}
	canon, err := KitCanonical(hj.SignedData)
	if err != nil || string(canon) != e.Canonical || SeparatorKit+string(canon) != e.BytesSigned {
		t.Fatalf("canonical %s, %v; want %s", canon, err, e.Canonical)
	}
	header, err := Sign(ctx, signer, hj.SignedData, Compat)
	if err != nil || header != e.Header {
		t.Fatalf("header\n%s\nwant\n%s (%v)", header, e.Header, err)
	}
	c, _ := ParseHeader(header)
	sig, _ := did.DecodeMultibase(c.Signature.Value)
	if hex.EncodeToString(sig) != e.SignatureHex {
		t.Errorf("signature %x, want %s", sig, e.SignatureHex)
	}

	// The audience variant, and the same through KitPayload's field order.
	wa, _ := ParseHeader(v.WithAudience.Header)
	if canon, _ := KitCanonical(wa.SignedData); string(canon) != v.WithAudience.Canonical {
		t.Errorf("audience canonical %s", canon)
	}
	if h, _ := Sign(ctx, signer, wa.SignedData, Compat); h != v.WithAudience.Header {
		t.Errorf("audience header differs")
	}

	// secp256k1: RFC 6979 makes the signature deterministic here too.
	k := v.Secp256k1
	priv, _ := hex.DecodeString(k.PrivateKeyHex)
	ks1, err := did.NewKeySigner(did.Secp256k1, priv)
	if err != nil || ks1.DID() != k.DID {
		t.Fatalf("secp256k1 did %s, %v; want %s", ks1.DID(), err, k.DID)
	}
	kc, _ := ParseHeader(k.Header)
	if canon, _ := KitCanonical(kc.SignedData); string(canon) != k.Canonical {
		t.Errorf("secp256k1 canonical %s", canon)
	}
	if h, err := Sign(ctx, ks1.WithKeyID(k.DID, k.KeyID), kc.SignedData, Compat); err != nil || h != k.Header {
		t.Errorf("secp256k1 header differs: %v", err)
	}

	if got := did.EncodeBase64URLMultibase([]byte{1, 2, 3, 0xfa}); got != v.Encodings.Multibase {
		t.Errorf("multibase %s, want %s", got, v.Encodings.Multibase)
	}
	if got, err := KitCanonical(v.Encodings.NestedIn); err != nil || string(got) != v.Encodings.NestedOut {
		t.Errorf("nested canonical %s, %v; want %s", got, err, v.Encodings.NestedOut)
	}
}

// TestKitVectors_VerdictsInCompatibilityMode: each vector gets the kit's
// verdict from cvm's compatibility mode, with the clock set where the kit's
// was.
func TestKitVectors_VerdictsInCompatibilityMode(t *testing.T) {
	v := loadKitVectors(t)
	e := v.Ed25519
	at := time.Unix(e.Timestamp, 0)
	year := 365 * 24 * time.Hour
	check := func(name, got, kit string) {
		t.Helper()
		want, ok := kitCodes[kit]
		if !ok {
			t.Fatalf("%s: kit verdict %q not mapped", name, kit)
		}
		if got != want {
			t.Errorf("%s: got %q, kit says %s (%q)", name, got, kit, want)
		} else {
			t.Logf("%s: kit %s, cvm %q", name, kit, got)
		}
	}
	check("ed25519 huge skew", verdict(t, compatVerifier(t, at.Add(100*year), 200*year, nil), e.Header), e.HugeSkew)
	check("ed25519 default window", verdict(t, compatVerifier(t, time.Now(), 0, nil), e.Header), e.DefaultWindow)
	check("ed25519 at its time", verdict(t, compatVerifier(t, at, 0, nil), e.Header), "ok")
	check("with audience", verdict(t, compatVerifier(t, at, 0, nil), v.WithAudience.Header), "ok")
	check("secp256k1", verdict(t, compatVerifier(t, at, 0, nil), v.Secp256k1.Header), v.Secp256k1.Verify)

	// fresh: first use ok, second NONCE_REPLAYED.
	fc, _ := ParseHeader(v.Fresh.Header)
	var fd struct {
		Timestamp int64 `json:"timestamp"`
	}
	_ = json.Unmarshal(fc.SignedData, &fd)
	fv := compatVerifier(t, time.Unix(fd.Timestamp, 0), 0, nil)
	check("fresh first", verdict(t, fv, v.Fresh.Header), v.Fresh.FirstVerify)
	check("fresh replay", verdict(t, fv, v.Fresh.Header), v.Fresh.ReplayVerify)

	// errors: a document with another key; an unknown key id; Bearer; no u.
	other, _ := did.GenerateKey(did.Ed25519)
	wrongDoc, _ := did.ResolveKey(e.DID)
	for i := range wrongDoc.VerificationMethod {
		wrongDoc.VerificationMethod[i].PublicKeyMultibase = did.EncodeBase58Multibase(other.PublicKey().Bytes)
	}
	check("wrong key", verdict(t, compatVerifier(t, at, 0, docResolver{e.DID: wrongDoc}), e.Header), v.Errors.WrongKey)
	unknown := reencode(t, e.Header, func(c *Credentials) { c.Signature.KeyID = e.DID + "#no-such-key" })
	check("unknown key id", verdict(t, compatVerifier(t, at, 0, nil), unknown), v.Errors.UnknownKeyID)
	check("wrong scheme", verdict(t, compatVerifier(t, at, 0, nil), "Bearer "+e.Header[len("DIDAuthV1 "):]), v.Errors.WrongScheme)
	check("no u prefix", verdict(t, compatVerifier(t, at, 0, nil), "DIDAuthV1 "+e.Header[len("DIDAuthV1 u"):]), v.Errors.NoUPrefix)
}

// TestKitVectors_TamperedParams: the kit's weakness reproduced in
// compatibility mode (its verdict, "ok"), and refused by the default mode.
func TestKitVectors_TamperedParams(t *testing.T) {
	v := loadKitVectors(t)
	e := v.Ed25519
	at := time.Unix(e.Timestamp, 0)
	tampered := reencode(t, e.Header, func(c *Credentials) {
		var sd map[string]json.RawMessage
		_ = json.Unmarshal(c.SignedData, &sd)
		sd["params"] = v.Tamper.Params
		c.SignedData, _ = json.Marshal(sd)
	})
	tc, _ := ParseHeader(tampered)
	if canon, _ := KitCanonical(tc.SignedData); string(canon) != v.Tamper.Canonical {
		t.Errorf("tampered canonical %s, want %s", canon, v.Tamper.Canonical)
	}
	if got := verdict(t, compatVerifier(t, at, 0, nil), tampered); got != "" {
		t.Errorf("compatibility mode: %q; the kit accepts it (%s), and so must this mode", got, v.Tamper.Result)
	}
	strict, err := NewVerifier(Options{Now: func() time.Time { return at }, Audiences: []string{"https://mcp.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]string{"tampered": tampered, "original": e.Header} {
		_, err := strict.Verify(context.Background(), h, Request{Method: "POST", Path: "/mcp"})
		if e, ok := err.(*Error); !ok || e.Code != CodeMalformed {
			t.Errorf("strict mode, %s kit header: %v, want %s", name, err, CodeMalformed)
		}
	}
}
