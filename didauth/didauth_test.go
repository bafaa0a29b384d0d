package didauth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/did"
)

// echoCaller answers with the verified DID and the body it received.
func echoCaller(w http.ResponseWriter, r *http.Request) {
	d, ok := Caller(r.Context())
	body, _ := io.ReadAll(r.Body)
	_ = json.NewEncoder(w).Encode(map[string]any{"did": d, "ok": ok, "body": string(body)})
}

func nostrSigner() *did.KeySigner {
	var sk [32]byte
	sk[31] = 1
	return did.NostrSigner(sk)
}

func TestMiddleware_SignedRequestReachesHandlerWithItsDID(t *testing.T) {
	v, err := NewVerifier(Options{RequireAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(echoCaller)))
	defer srv.Close()
	s := nostrSigner()
	client := &http.Client{Transport: &Transport{Signer: s}}
	resp, err := client.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&got)
	if resp.StatusCode != 200 || got["did"] != s.DID() || got["body"] != `{"jsonrpc":"2.0","id":1,"method":"ping"}` {
		t.Fatalf("status %d, %v", resp.StatusCode, got)
	}
	_ = context.Background()
}

// TestMiddleware_CallerKeyForChannelReceipts: the handler learns the key
// the request was verified with (its id and public key), which a payment
// channel's receipts must be signed with; an unsigned request has none.
func TestMiddleware_CallerKeyForChannelReceipts(t *testing.T) {
	v, err := NewVerifier(Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make(chan Key, 1)
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := CallerKey(r.Context())
		keys <- k
	})))
	defer srv.Close()
	for _, typ := range []did.KeyType{did.Ed25519, did.Secp256k1} {
		s, err := did.GenerateKey(typ)
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: &Transport{Signer: s}}
		resp, err := client.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		k := <-keys
		if k.DID != s.DID() || k.ID != s.KeyID() || !k.Public.Equal(s.PublicKey()) {
			t.Fatalf("%s: CallerKey = %+v, want %s %s", typ, k, s.KeyID(), s.PublicKey().Bytes)
		}
	}
	resp, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if k := <-keys; k.ID != "" {
		t.Fatalf("an unsigned request has key %+v", k)
	}
}
