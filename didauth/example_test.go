package didauth_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/durable"
)

// A server verifies DIDAuthV1 before its MCP handler; a client signs every
// request with its DID (here a Nostr key as did:nostr).
func Example() {
	store := durable.NewMemory(durable.Options{}) // a server passes its durable.Open store
	v, err := didauth.NewVerifier(didauth.Options{Store: store, RequireAuth: true})
	if err != nil {
		panic(err)
	}
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, _ := didauth.Caller(r.Context())
		fmt.Fprintln(w, "hello", caller)
	})
	srv := httptest.NewServer(v.Middleware(mcpHandler))
	defer srv.Close()

	signer := did.NostrSigner([32]byte{31: 1})
	client := &http.Client{Transport: &didauth.Transport{Signer: signer}}
	resp, err := client.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.StatusCode, " ", string(body))

	unsigned, _ := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	body, _ = io.ReadAll(unsigned.Body)
	unsigned.Body.Close()
	fmt.Print(unsigned.StatusCode, " ", string(body))
	// Output:
	// 200 hello did:nostr:79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798
	// 401 {"code":"auth_missing","message":"no Authorization header; sign the request with DIDAuthV1"}
}
