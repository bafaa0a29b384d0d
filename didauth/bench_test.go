package didauth

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/durable"
)

// BenchmarkMiddleware is the cost of verifying a request: the same POST
// (a tools/call) served without authentication (baseline) and through a
// strict Verifier, by key type and nonce store. Headers are signed before
// the timer starts, each with its own nonce, so only the server's work is
// timed: decode, canonicalize, resolve (did:key and did:nostr are local),
// verify, claim the nonce. Compare each line's ns/op with baseline's, and
// with sigonly's for the same key type (the signature check alone).
func BenchmarkMiddleware(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	serveOne := func(b *testing.B, h http.Handler, header string) {
		req := httptest.NewRequest("POST", testEndpoint, strings.NewReader(testBody))
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	b.Run("baseline", func(b *testing.B) {
		for b.Loop() {
			serveOne(b, ok, "")
		}
	})
	ed, _ := did.GenerateKey(did.Ed25519)
	k1, _ := did.GenerateKey(did.Secp256k1)
	p256, _ := did.GenerateKey(did.P256)
	signers := []struct {
		name string
		s    did.Signer
	}{{"nostr", nostrSigner()}, {"ed25519", ed}, {"secp256k1", k1}, {"p256", p256}}
	// The signature check alone, for each key type: what the middleware
	// adds beyond it is the difference.
	for _, sg := range signers {
		b.Run("sigonly/"+sg.name, func(b *testing.B) {
			ks := sg.s.(*did.KeySigner)
			msg := []byte(SeparatorNIP10 + testBody)
			sig, _ := ks.Sign(context.Background(), msg)
			pub := ks.PublicKey()
			for b.Loop() {
				if err := pub.Verify(msg, sig); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, st := range []string{"memory", "file"} {
		for _, sg := range signers {
			if st == "file" && sg.name != "nostr" {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s", sg.name, st), func(b *testing.B) {
				var store durable.Store = durable.NewMemory(durable.Options{})
				if st == "file" {
					f, err := durable.Open(b.TempDir(), "bench", durable.Options{})
					if err != nil {
						b.Fatal(err)
					}
					store = f
				}
				defer store.Close()
				now := time.Now()
				v, _ := NewVerifier(Options{Store: store, Audiences: []string{testEndpoint}, RequireAuth: true, Now: func() time.Time { return now }})
				h := v.Middleware(ok)
				headers := make([]string, 0, 1024)
				i, batch := 0, 0
				for b.Loop() {
					if i == len(headers) {
						b.StopTimer()
						headers = headers[:0]
						for j := range cap(headers) {
							p := payloadFor(fmt.Sprintf("bench-%d-%d", batch, j))
							p.Timestamp = now.Unix()
							hh, err := SignPayload(context.Background(), sg.s, p)
							if err != nil {
								b.Fatal(err)
							}
							headers = append(headers, hh)
						}
						i = 0
						batch++
						b.StartTimer()
					}
					serveOne(b, h, headers[i])
					i++
				}
			})
		}
	}
}
