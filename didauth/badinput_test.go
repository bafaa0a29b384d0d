package didauth

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/nostrx"

	"fiatjaf.com/nostr"
)

var testNow = time.Unix(1_800_000_000, 0)

const (
	testEndpoint = "http://mcp.test/mcp"
	testBody     = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
)

// payloadFor is a strict payload for a POST of testBody to testEndpoint.
func payloadFor(nonce string) Payload {
	return Payload{
		Audience: testEndpoint, BodySHA256: BodyHash([]byte(testBody)), Method: "POST",
		Nonce: nonce, Path: "/mcp", Timestamp: testNow.Unix(),
	}
}

// signRaw makes a header over signedData with any separator and
// canonicalization, as a misbehaving client could.
func signRaw(t *testing.T, s did.Signer, signedData []byte, sep string, canon func([]byte) ([]byte, error)) string {
	t.Helper()
	c, err := canon(signedData)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(context.Background(), append([]byte(sep), c...))
	if err != nil {
		t.Fatal(err)
	}
	cred := Credentials{SignedData: signedData, Signature: SignatureInfo{SignerDID: s.DID(), KeyID: s.KeyID(), Value: did.EncodeBase64URLMultibase(sig)}}
	return cred.Header()
}

// signStrict signs p as s with separator sep, p.KeyID set to s's.
func signStrict(t *testing.T, s did.Signer, p Payload, sep string) string {
	t.Helper()
	p.KeyID = s.KeyID()
	return signRaw(t, s, mustJSON(t, p), sep, Canonical)
}

func identity(b []byte) ([]byte, error) { return b, nil }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeCred(raw string) string {
	return Scheme + " u" + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// serve sends one request through a Verifier's middleware and returns the
// status and code.
func serve(t *testing.T, v *Verifier, method, target, header, body string) (int, string, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if header != "" {
		req.Header.Set("Authorization", header)
	}
	rec := httptest.NewRecorder()
	v.Middleware(http.HandlerFunc(echoCaller)).ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	code, _ := out["code"].(string)
	if rec.Code != 200 && (code == "" || out["message"] == "") {
		t.Errorf("status %d without {code, message}: %s", rec.Code, rec.Body)
	}
	return rec.Code, code, out
}

func newTestVerifier(t *testing.T, opts Options) *Verifier {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	opts.RequireAuth = true
	v, err := NewVerifier(opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// docResolver serves fixed documents, and did:key/did:nostr as usual.
type docResolver map[string]*did.Document

func (m docResolver) Resolve(ctx context.Context, d string) (*did.Document, error) {
	if doc, ok := m[d]; ok {
		return doc, nil
	}
	return did.NewResolver(did.ResolverOptions{}).Resolve(ctx, d)
}

// TestMiddleware_BadInput: every authentication failure of the list
// is a 401 with its own code, before the handler runs.
func TestMiddleware_BadInput(t *testing.T) {
	s := nostrSigner()
	good := func(nonce string) string {
		h, err := SignPayload(context.Background(), s, payloadFor(nonce))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	// A did:web whose server answers 404.
	web404 := httptest.NewServer(http.NotFoundHandler())
	defer web404.Close()
	webDID, _ := did.WebDID(web404.URL)
	webSigner := s.WithKeyID(webDID, webDID+"#key1")

	// A document listing the key without authorizing it for authentication.
	other, _ := did.GenerateKey(did.Ed25519)
	assertOnly := &did.Document{ID: "did:web:assert.test", VerificationMethod: []did.VerificationMethod{other.WithKeyID("did:web:assert.test", "did:web:assert.test#k").VerificationMethod()}}
	assertOnly.VerificationMethod[0].ID = "did:web:assert.test#k"
	assertOnly.AssertionMethod = []did.Relationship{{Ref: "did:web:assert.test#k"}}
	assertSigner := other.WithKeyID("did:web:assert.test", "did:web:assert.test#k")

	stale := payloadFor("n-stale")
	stale.Timestamp = testNow.Add(-301 * time.Second).Unix()
	future := payloadFor("n-future")
	future.Timestamp = testNow.Add(301 * time.Second).Unix()
	wrongAud := payloadFor("n-aud")
	wrongAud.Audience = "http://other.test/mcp"

	cases := []struct {
		name, header, code string
		setup              func(v *Verifier)
	}{
		{"missing_header", "", CodeMissing, nil},
		{"wrong_scheme", "Bearer abc", CodeMalformed, nil},
		{"not_json", encodeCred("not json"), CodeMalformed, nil},
		{"no_signature_value", encodeCred(`{"signed_data":{},"signature":{"signer_did":"did:key:x","key_id":"did:key:x#a"}}`), CodeMalformed, nil},
		{"duplicate_keys", signRaw(t, s, []byte(`{"audience":"http://other.test/mcp","audience":"`+testEndpoint+`","body_sha256":"`+BodyHash([]byte(testBody))+`","key_id":"`+s.KeyID()+`","method":"POST","nonce":"n-dup","path":"/mcp","timestamp":`+fmt.Sprint(testNow.Unix())+`}`), SeparatorNIP10, identity), CodeMalformed, nil},
		{"fractional_timestamp", signRaw(t, s, []byte(`{"nonce":"n-frac","timestamp":1.5}`), SeparatorNIP10, identity), CodeMalformed, nil},
		{"kit_payload_in_strict_mode", signRaw(t, s, KitPayload("POST", testEndpoint, "", "n-kit", testNow.Unix()), SeparatorKit, KitCanonical), CodeMalformed, nil},
		{"no_multibase_prefix", Scheme + " " + base64.RawURLEncoding.EncodeToString([]byte(`{}`)), CodeEncoding, nil},
		{"padded_base64", Scheme + " u" + base64.URLEncoding.EncodeToString([]byte(`{"a":1}`)), CodeEncoding, nil},
		{"standard_base64_alphabet", Scheme + " u+/+/", CodeEncoding, nil},
		{"signature_not_multibase", reencode(t, good("n-sig"), func(c *Credentials) { c.Signature.Value = "z" + c.Signature.Value[1:] }), CodeEncoding, nil},
		{"unknown_did_method", signStrict(t, s.WithKeyID("did:example:123", "did:example:123#k"), payloadFor("n-m"), SeparatorNIP10), CodeUnsupportedMethod, nil},
		{"unresolvable_did_web", signStrict(t, webSigner, payloadFor("n-w"), SeparatorNIP10), CodeUnresolvable, nil},
		{"unresolvable_did_key", signStrict(t, s.WithKeyID("did:key:z111", "did:key:z111#a"), payloadFor("n-k"), SeparatorNIP10), CodeUnresolvable, nil},
		{"key_not_in_document", signStrict(t, s.WithKeyID(s.DID(), s.DID()+"#key2"), payloadFor("n-kid"), SeparatorNIP10), CodeKeyNotFound, nil},
		{"key_of_another_did", signStrict(t, s.WithKeyID(s.DID(), "did:nostr:00#key1"), payloadFor("n-kid2"), SeparatorNIP10), CodeKeyNotFound, nil},
		{"key_not_authorized_for_authentication", signStrict(t, assertSigner, payloadFor("n-auth"), SeparatorNIP10), CodeKeyNotAuthorized, nil},
		{"bad_signature", tamperSignature(t, good("n-bad")), CodeBadSignature, nil},
		{"wrong_separator", signStrict(t, s, payloadFor("n-sep"), SeparatorKit), CodeBadSignature, nil},
		{"wrong_audience", signStrict(t, s, wrongAud, SeparatorNIP10), CodeWrongAudience, nil},
		{"stale_timestamp", signStrict(t, s, stale, SeparatorNIP10), CodeTimestamp, nil},
		{"future_timestamp", signStrict(t, s, future, SeparatorNIP10), CodeTimestamp, nil},
		{"replayed_nonce", good("n-replay"), CodeReplayed, func(v *Verifier) {
			if code, _, _ := serve(t, v, "POST", testEndpoint, good("n-replay"), testBody); code != 200 {
				t.Fatalf("first use: %d", code)
			}
		}},
	}
	seen := map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newTestVerifier(t, Options{Resolver: docResolver{"did:web:assert.test": assertOnly}, Audiences: []string{testEndpoint}})
			if c.setup != nil {
				c.setup(v)
			}
			status, code, out := serve(t, v, "POST", testEndpoint, c.header, testBody)
			if status != http.StatusUnauthorized || code != c.code {
				t.Fatalf("got %d %q (%v), want 401 %q", status, code, out["message"], c.code)
			}
			t.Logf("%s: %s", code, out["message"])
		})
		seen[c.code] = c.name
	}
	// The list: each failure its own code.
	for _, code := range []string{CodeMissing, CodeMalformed, CodeEncoding, CodeUnsupportedMethod, CodeUnresolvable, CodeKeyNotFound,
		CodeKeyNotAuthorized, CodeBadSignature, CodeWrongAudience, CodeTimestamp, CodeReplayed} {
		if _, ok := seen[code]; !ok {
			t.Errorf("no case for %s", code)
		}
	}
}

func reencode(t *testing.T, header string, edit func(*Credentials)) string {
	t.Helper()
	c, err := ParseHeader(header)
	if err != nil {
		t.Fatal(err)
	}
	edit(c)
	return c.Header()
}

func tamperSignature(t *testing.T, header string) string {
	t.Helper()
	c, err := ParseHeader(header)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := did.DecodeMultibase(c.Signature.Value)
	sig[10] ^= 0x40
	c.Signature.Value = did.EncodeBase64URLMultibase(sig)
	return c.Header()
}

func TestMiddleware_RequestMismatch(t *testing.T) {
	s := nostrSigner()
	for _, c := range []struct{ name, method, target, body string }{
		{"other_body", "POST", testEndpoint, strings.Replace(testBody, "hi", "rm -rf", 1)},
		{"other_path", "POST", "http://mcp.test/mcp?x=1", testBody},
		{"other_method", "PUT", testEndpoint, testBody},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newTestVerifier(t, Options{Audiences: []string{testEndpoint}})
			h, _ := SignPayload(context.Background(), s, payloadFor("n-"+c.name))
			if status, code, _ := serve(t, v, c.method, c.target, h, c.body); status != 401 || code != CodeRequestMismatch {
				t.Fatalf("got %d %s, want 401 %s", status, code, CodeRequestMismatch)
			}
		})
	}
}

func TestMiddleware_NonceIsNotAcceptedTwiceAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	s := nostrSigner()
	h, _ := SignPayload(context.Background(), s, payloadFor("n-restart"))
	for i, want := range []int{200, 401} {
		st, err := durable.Open(dir, "auth", durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		v := newTestVerifier(t, Options{Store: st, Audiences: []string{testEndpoint}})
		status, code, _ := serve(t, v, "POST", testEndpoint, h, testBody)
		if status != want || (want == 401 && code != CodeReplayed) {
			t.Errorf("process %d: %d %s, want %d", i, status, code, want)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMiddleware_AllowListAndForbidden(t *testing.T) {
	s := nostrSigner()
	pk := s.PublicKey().Bytes
	npubOrHex := []string{"did:nostr:" + hexOf(pk), hexOf(pk), nostrx.EncodeNpub(nostr.PubKey(pk))}
	for _, entry := range npubOrHex {
		v := newTestVerifier(t, Options{Allow: []string{entry}, Audiences: []string{testEndpoint}})
		h, _ := SignPayload(context.Background(), s, payloadFor("n-allow-"+entry[:4]))
		if status, _, out := serve(t, v, "POST", testEndpoint, h, testBody); status != 200 || out["did"] != s.DID() {
			t.Errorf("allow %s: %d %v", entry, status, out)
		}
	}
	other, _ := did.GenerateKey(did.Ed25519)
	v := newTestVerifier(t, Options{Allow: []string{s.DID()}, Audiences: []string{testEndpoint}})
	h, _ := SignPayload(context.Background(), other, payloadFor("n-forbidden"))
	if status, code, _ := serve(t, v, "POST", testEndpoint, h, testBody); status != 403 || code != CodeForbidden {
		t.Errorf("not allowed: %d %s, want 403 %s", status, code, CodeForbidden)
	}
	// Without a header a server with an allow-list asks for one.
	if status, code, _ := serve(t, v, "POST", testEndpoint, "", testBody); status != 401 || code != CodeMissing {
		t.Errorf("no header: %d %s", status, code)
	}
}

// Strangers cannot fill the nonce store: did:keys are free, so a refused
// DID's nonces must not be kept, or a flood of them would lock the allowed
// clients out (503) until they expire.
func TestMiddleware_RefusedDIDsDoNotFillTheNonceStore(t *testing.T) {
	s := nostrSigner()
	store := durable.NewMemory(durable.Options{MaxRecords: 2})
	v := newTestVerifier(t, Options{Store: store, Allow: []string{s.DID()}, Audiences: []string{testEndpoint}})
	for i := range 5 {
		stranger, _ := did.GenerateKey(did.Ed25519)
		h, _ := SignPayload(context.Background(), stranger, payloadFor(fmt.Sprintf("n-flood-%d", i)))
		if status, code, _ := serve(t, v, "POST", testEndpoint, h, testBody); status != 403 || code != CodeForbidden {
			t.Fatalf("stranger %d: %d %s, want 403 %s", i, status, code, CodeForbidden)
		}
	}
	for i := range 2 {
		h, _ := SignPayload(context.Background(), s, payloadFor(fmt.Sprintf("n-allowed-%d", i)))
		if status, code, _ := serve(t, v, "POST", testEndpoint, h, testBody); status != 200 {
			t.Fatalf("allowed client's request %d after the flood: %d %s", i, status, code)
		}
	}
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

func TestMiddleware_OptionalAuthPassesRequestsWithoutHeader(t *testing.T) {
	v, _ := NewVerifier(Options{})
	status, _, out := serve(t, v, "POST", testEndpoint, "", testBody)
	if status != 200 || out["ok"] != false || out["body"] != testBody {
		t.Fatalf("%d %v", status, out)
	}
}

func TestMiddleware_BodyTooLarge(t *testing.T) {
	v := newTestVerifier(t, Options{MaxBody: 16})
	if status, code, _ := serve(t, v, "POST", testEndpoint, "DIDAuthV1 uxx", testBody); status != 413 || code != CodeBodyTooLarge {
		t.Fatalf("%d %s", status, code)
	}
}

func TestVerify_AcceptsNIP7SeparatorNeverWritesIt(t *testing.T) {
	s := nostrSigner()
	v := newTestVerifier(t, Options{Audiences: []string{testEndpoint}})
	h := signStrict(t, s, payloadFor("n-nip7"), SeparatorNIP7)
	if _, err := v.Verify(context.Background(), h, Request{Method: "POST", Path: "/mcp", Body: []byte(testBody)}); err != nil {
		t.Fatal(err)
	}
	// What SignPayload writes verifies over the NIP-10 separator only.
	h2, _ := SignPayload(context.Background(), s, payloadFor("n-nip10"))
	c, _ := ParseHeader(h2)
	canon, _ := Canonical(c.SignedData)
	sig, _ := did.DecodeMultibase(c.Signature.Value)
	if err := s.PublicKey().Verify(append([]byte(SeparatorNIP10), canon...), sig); err != nil {
		t.Fatalf("not signed over %s: %v", SeparatorNIP10, err)
	}
}

func TestTransport_SignsGETAndDELETEOverEmptyBody(t *testing.T) {
	s := nostrSigner()
	v, _ := NewVerifier(Options{RequireAuth: true})
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(echoCaller)))
	defer srv.Close()
	client := &http.Client{Transport: &Transport{Signer: s}}
	for _, m := range []string{"GET", "DELETE", "POST"} {
		req, _ := http.NewRequest(m, srv.URL+"/mcp?session=1", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 200 || out["did"] != s.DID() {
			t.Errorf("%s: %d %v", m, resp.StatusCode, out)
		}
	}
}

func TestCodes_AreDistinct(t *testing.T) {
	codes := []string{CodeMissing, CodeMalformed, CodeEncoding, CodeUnsupportedMethod, CodeUnresolvable, CodeKeyNotFound,
		CodeKeyNotAuthorized, CodeBadSignature, CodeWrongAudience, CodeRequestMismatch, CodeTimestamp, CodeReplayed,
		CodeForbidden, CodeBodyTooLarge, CodeUnavailable}
	seen := map[string]bool{}
	for _, c := range codes {
		if seen[c] {
			t.Errorf("code %s used twice", c)
		}
		seen[c] = true
	}
}

func TestVerifier_CompatibilityModeIsLoggedOnce(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	v, _ := NewVerifier(Options{Compat: true, Logger: log, RequireAuth: true})
	for range 3 {
		serve(t, v, "POST", testEndpoint, "", testBody)
	}
	if n := strings.Count(buf.String(), "compatibility mode is on"); n != 1 {
		t.Errorf("warning logged %d times: %s", n, buf.String())
	}
	buf.Reset()
	_, _ = NewVerifier(Options{Logger: log})
	if buf.Len() != 0 {
		t.Errorf("strict mode logged %s", buf.String())
	}
}

// TestVerify_ReplayUnderAnotherDIDOfTheSameKeyIsRefused: a kit header
// (compatibility mode) does not sign signer_did or key_id, and a P-256 key
// has two did:keys (the standard prefix and the kit's); a captured header
// replayed under the other one is still a replay, since nonces are kept
// per key.
func TestVerify_ReplayUnderAnotherDIDOfTheSameKeyIsRefused(t *testing.T) {
	s, _ := did.GenerateKey(did.P256)
	kitDID := "did:key:" + did.EncodeBase58Multibase(append([]byte{0x12, 0x00}, s.PublicKey().Bytes...))
	v := newTestVerifier(t, Options{Audiences: []string{testEndpoint}, Compat: true, Logger: discard})
	h, err := Sign(context.Background(), s.WithKeyID(s.DID(), s.DID()+"#account-key"), KitPayload("POST", testEndpoint, "", "n-alias", testNow.Unix()), Compat)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, out := serve(t, v, "POST", testEndpoint, h, testBody); status != 200 {
		t.Fatalf("first use: %d %v", status, out)
	}
	alias := reencode(t, h, func(c *Credentials) { c.Signature.SignerDID, c.Signature.KeyID = kitDID, kitDID+"#account-key" })
	if status, code, out := serve(t, v, "POST", testEndpoint, alias, testBody); status != 401 || code != CodeReplayed {
		t.Fatalf("replay as %s: %d %s %v", kitDID, status, code, out)
	}
}

// TestVerify_KeyIDIsSigned: signer_did and key_id travel outside
// signed_data; strict mode signs key_id too, so a header cannot be passed
// off under another DID that lists the same key.
func TestVerify_KeyIDIsSigned(t *testing.T) {
	s, _ := did.GenerateKey(did.Ed25519)
	other := "did:web:attacker.test"
	doc := did.ServerDocument(other, s, "https://attacker.test/mcp")
	v := newTestVerifier(t, Options{Audiences: []string{testEndpoint}, Resolver: docResolver{other: doc}})
	h, _ := SignPayload(context.Background(), s, payloadFor("n-keyid"))
	moved := reencode(t, h, func(c *Credentials) { c.Signature.SignerDID, c.Signature.KeyID = other, doc.VerificationMethod[0].ID })
	if status, code, out := serve(t, v, "POST", testEndpoint, moved, testBody); status != 401 || code != CodeKeyNotFound {
		t.Fatalf("header moved to %s: %d %s %v", other, status, code, out)
	}
	if status, _, out := serve(t, v, "POST", testEndpoint, h, testBody); status != 200 {
		t.Fatalf("the original: %d %v", status, out)
	}
}
