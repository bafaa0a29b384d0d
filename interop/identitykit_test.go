package interop

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
)

// runIdentityKit runs identitykit/didauth.mjs (the real
// @nuwa-ai/identity-kit 0.6.0, pinned in its own folder) and decodes the
// JSON line it prints.
func runIdentityKit(t *testing.T, env map[string]string, out any) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH; the interop tests need Node 20 or later")
	}
	if _, err := os.Stat(filepath.Join("identitykit", "node_modules", "@nuwa-ai", "identity-kit")); err != nil {
		t.Fatal("interop/identitykit/node_modules is missing; run: make interop-deps")
	}
	if code, stderr := runNode(t, "identitykit", "didauth.mjs", env, nil, out); code != 0 {
		t.Fatalf("didauth.mjs: exit %d; stderr %s", code, stderr)
	}
}

// TestIdentityKit_KitHeadersVerifyInCompatibilityMode: requests the kit
// signs (Ed25519, secp256k1, and P-256 with the kit's own did:key prefix)
// reach the handler of a compatibility-mode Verifier with the kit's DID; a
// strict Verifier refuses them, and so it refuses the kit's
// tampered-parameters request, which compatibility mode cannot tell apart.
func TestIdentityKit_KitHeadersVerifyInCompatibilityMode(t *testing.T) {
	var mu sync.Mutex
	var callers []string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := didauth.Caller(r.Context())
		mu.Lock()
		callers = append(callers, d)
		mu.Unlock()
		io.WriteString(w, d)
	})
	for _, compat := range []bool{true, false} {
		v, err := didauth.NewVerifier(didauth.Options{Compat: compat, RequireAuth: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(v.Middleware(handler))
		var res struct {
			Results []struct {
				Type, DID, Body string
				Tampered        bool
				Status          int
			}
		}
		runIdentityKit(t, map[string]string{"MODE": "send", "SERVER_URL": srv.URL + "/mcp"}, &res)
		srv.Close()
		if len(res.Results) != 6 {
			t.Fatalf("compat=%v: %d results", compat, len(res.Results))
		}
		for _, r := range res.Results {
			switch {
			case compat && (r.Status != 200 || r.Body != r.DID):
				t.Errorf("compat, %s tampered=%v: %d %s", r.Type, r.Tampered, r.Status, r.Body)
			case !compat && (r.Status != 401 || !strings.Contains(r.Body, didauth.CodeMalformed)):
				t.Errorf("strict, %s tampered=%v: %d %s, want 401 %s", r.Type, r.Tampered, r.Status, r.Body, didauth.CodeMalformed)
			default:
				t.Logf("compat=%v %s tampered=%v: %d %s", compat, r.Type, r.Tampered, r.Status, strings.TrimSpace(r.Body))
			}
		}
	}
	if len(callers) != 6 {
		t.Errorf("handler ran %d times, want 6 (compatibility mode only)", len(callers))
	}
}

// TestIdentityKit_CvmCompatHeadersVerifyWithKit: headers the cvm signing
// Transport makes in compatibility mode verify with the kit's
// verifyAuthHeader (given a resolver for the did:keys); a replay is its
// NONCE_REPLAYED; strict headers are refused by the kit, whose separator
// is fixed.
func TestIdentityKit_CvmCompatHeadersVerifyWithKit(t *testing.T) {
	var mu sync.Mutex
	var headers []string
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer capture.Close()
	docs := map[string]*did.Document{}
	var want []string
	for _, typ := range []did.KeyType{did.Ed25519, did.Secp256k1, did.P256} {
		s, err := did.GenerateKey(typ)
		if err != nil {
			t.Fatal(err)
		}
		docs[s.DID()], _ = did.ResolveKey(s.DID())
		for _, mode := range []didauth.Mode{didauth.Compat, didauth.Strict} {
			c := &http.Client{Transport: &didauth.Transport{Signer: s, Mode: mode}}
			resp, err := c.Post(capture.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if mode == didauth.Compat {
				want = append(want, "ok")
			} else {
				want = append(want, "SIGNATURE_VERIFICATION_FAILED")
			}
		}
	}
	headers = append(headers, headers[0]) // a replay of the first
	want = append(want, "NONCE_REPLAYED")
	input, _ := json.Marshal(map[string]any{"headers": headers, "docs": docs})
	var res struct {
		Results []struct {
			OK        bool    `json:"ok"`
			ErrorCode *string `json:"errorCode"`
			Error     *string `json:"error"`
		}
	}
	runIdentityKit(t, map[string]string{"MODE": "verify", "INPUT": string(input)}, &res)
	if len(res.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(res.Results), len(want))
	}
	for i, r := range res.Results {
		got := "ok"
		if !r.OK {
			got = "?"
			if r.ErrorCode != nil {
				got = *r.ErrorCode
			}
		}
		if got != want[i] {
			t.Errorf("header %d: kit says %s (%v), want %s", i, got, r.Error, want[i])
		}
	}
}
