package room

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/mcpx"
)

// testKeys returns fresh signing keys that live only in memory.
func testKeys(t testing.TB) *Keys {
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	k, err := NewKeys(ed, secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func claimsFor(id string, topics ...string) Claims {
	return Claims{Subject: id, Audience: topics, ExpiresAt: time.Now().Add(time.Hour).Unix(), Name: "Alice", Kind: mcpx.ParticipantHuman}
}

func TestKeys_SignVerifyBothAlgorithms(t *testing.T) {
	k := testKeys(t)
	for _, alg := range []string{AlgEdDSA, AlgHS256} {
		tok, err := k.Sign(claimsFor("alice", "room:a", "room:b"), alg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := k.Verify(tok, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if c.Subject != "alice" || !c.Allows("room:a") || !c.Allows("room:b") || c.Allows("room:c") || c.ID == "" {
			t.Errorf("%s: claims %+v", alg, c)
		}
		p := c.Participant()
		if p.Name != "Alice" || p.Kind != mcpx.ParticipantHuman || p.MCP.Version != mcpx.DefaultMCPVersion {
			t.Errorf("%s: participant %+v", alg, p)
		}
	}
}

// forge builds a token with any header and claims, signed by sign.
func forge(header, claims string, sign func([]byte) []byte) string {
	enc := base64.RawURLEncoding
	s := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	return s + "." + enc.EncodeToString(sign([]byte(s)))
}

func TestKeys_VerifyRefuses(t *testing.T) {
	k := testKeys(t)
	other := testKeys(t)
	good, _ := k.Sign(claimsFor("alice", "room:a"), AlgEdDSA)
	exp := time.Now().Add(time.Hour).Unix()
	claims := `{"sub":"alice","aud":"room:a","exp":` + itoa(exp) + `}`
	edOnly, _ := NewKeys(k.ed, nil)
	hsTok, _ := k.Sign(claimsFor("alice", "room:a"), AlgHS256)
	otherTok, _ := other.Sign(claimsFor("alice", "room:a"), AlgEdDSA)
	parts := strings.Split(good, ".")

	cases := map[string]struct {
		keys  *Keys
		token string
		want  error
	}{
		"alg none":  {k, forge(`{"alg":"none"}`, claims, func([]byte) []byte { return nil }), ErrTokenInvalid},
		"alg RS256": {k, forge(`{"alg":"RS256"}`, claims, func([]byte) []byte { return []byte("x") }), ErrTokenInvalid},
		// The classic confusion: an HS256 token keyed with the public key.
		"HS256 keyed with the EdDSA public key": {edOnly, forge(`{"alg":"HS256"}`, claims, func(b []byte) []byte {
			m := hmac.New(sha256.New, k.ed.Public().(ed25519.PublicKey))
			m.Write(b)
			return m.Sum(nil)
		}), ErrTokenInvalid},
		"HS256 when only EdDSA is configured": {edOnly, hsTok, ErrTokenInvalid},
		"another issuer's key":                {k, otherTok, ErrTokenInvalid},
		"tampered claims":                     {k, parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory","aud":"room:a","exp":`+itoa(exp)+`}`)) + "." + parts[2], ErrTokenInvalid},
		"two parts":                           {k, parts[0] + "." + parts[1], ErrTokenInvalid},
		"not base64":                          {k, "a.b.c!", ErrTokenInvalid},
		"expired": {k, forge(`{"alg":"EdDSA"}`, `{"sub":"alice","aud":"room:a","exp":`+itoa(time.Now().Add(-time.Hour).Unix())+`}`,
			func(b []byte) []byte { return ed25519.Sign(k.ed, b) }), ErrTokenExpired},
		"no exp": {k, forge(`{"alg":"EdDSA"}`, `{"sub":"alice","aud":"room:a"}`, func(b []byte) []byte { return ed25519.Sign(k.ed, b) }), ErrTokenInvalid},
		"not yet valid": {k, forge(`{"alg":"EdDSA"}`, `{"sub":"alice","aud":"room:a","exp":`+itoa(exp)+`,"nbf":`+itoa(time.Now().Add(time.Hour).Unix())+`}`,
			func(b []byte) []byte { return ed25519.Sign(k.ed, b) }), ErrTokenInvalid},
		"system: participant": {k, forge(`{"alg":"EdDSA"}`, `{"sub":"system:gateway","aud":"room:a","exp":`+itoa(exp)+`}`,
			func(b []byte) []byte { return ed25519.Sign(k.ed, b) }), ErrTokenInvalid},
		"bad kind": {k, forge(`{"alg":"EdDSA"}`, `{"sub":"a","aud":"room:a","kind":"cat","exp":`+itoa(exp)+`}`,
			func(b []byte) []byte { return ed25519.Sign(k.ed, b) }), ErrTokenInvalid},
		"no audience": {k, forge(`{"alg":"EdDSA"}`, `{"sub":"a","exp":`+itoa(exp)+`}`,
			func(b []byte) []byte { return ed25519.Sign(k.ed, b) }), ErrTokenInvalid},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.keys.Verify(c.token, time.Now())
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
}

func TestKeys_ClockSkewIsTolerated(t *testing.T) {
	k := testKeys(t)
	c := claimsFor("alice", "room:a")
	c.ExpiresAt = time.Now().Add(time.Minute).Unix()
	tok, _ := k.Sign(c, AlgEdDSA)
	if _, err := k.Verify(tok, time.Now().Add(time.Minute+clockSkew/2)); err != nil {
		t.Fatalf("refused within the skew: %v", err)
	}
	if _, err := k.Verify(tok, time.Now().Add(time.Minute+2*clockSkew)); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("accepted past the skew: %v", err)
	}
}

func TestLoadOrCreateKeys_CreatedOnceWithMode0600(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{EdKeyFile, HSKeyFile} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v mode %v, want 0600", name, err, info.Mode())
		}
	}
	k2, err := LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := k1.Sign(claimsFor("alice", "room:a"), AlgEdDSA)
	if _, err := k2.Verify(tok, time.Now()); err != nil {
		t.Fatalf("reloaded keys refuse a token of the first: %v", err)
	}
	tok, _ = k2.Sign(claimsFor("alice", "room:a"), AlgHS256)
	if _, err := k1.Verify(tok, time.Now()); err != nil {
		t.Fatalf("HS256 secret changed on reload: %v", err)
	}
}

func TestLoadOrCreateKeys_ConcurrentCreatorsAgree(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	keys := make([]*Keys, n)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := LoadOrCreateKeys(dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	tok, _ := keys[0].Sign(claimsFor("alice", "room:a"), AlgEdDSA)
	for i, k := range keys {
		if _, err := k.Verify(tok, time.Now()); err != nil {
			t.Fatalf("creator %d has another key: %v", i, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}

func TestLoadOrCreateKeys_RefusesReadableKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateKeys(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, EdKeyFile)
	os.Chmod(path, 0o644)
	_, err := LoadOrCreateKeys(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Fatalf("err %v, want a chmod hint", err)
	}
}

func TestValidateNames(t *testing.T) {
	for _, ok := range []string{"room:alpha", "a", "user-alice", "robot.alpha_2@x+y~z"} {
		if err := mcpx.ValidateTopic(ok); err != nil {
			t.Errorf("topic %q refused: %v", ok, err)
		}
		if err := mcpx.ValidateParticipantID(ok); err != nil {
			t.Errorf("id %q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "a b", "é", strings.Repeat("x", 129), "a?b"} {
		if mcpx.ValidateTopic(bad) == nil {
			t.Errorf("topic %q accepted", bad)
		}
	}
	if mcpx.ValidateParticipantID("system:gateway") == nil {
		t.Error("system: id accepted")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
