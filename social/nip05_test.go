package social

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

// nip05Server serves body at /.well-known/nostr.json over TLS.
func nip05Server(t *testing.T, h http.HandlerFunc) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv, strings.TrimPrefix(srv.URL, "https://")
}

func TestResolveNIP05(t *testing.T) {
	key := nostr.Generate().Public()
	other := nostr.Generate().Public()
	srv, host := nip05Server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("name") {
		case "bob":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"names":{"bob":"` + key.Hex() + `"},"relays":{"` + key.Hex() + `":["wss://r.example"]}}`))
		case "bad":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"names":{"bad":"` + strings.Repeat("z", 64) + `"}}`))
		case "moved":
			http.Redirect(w, r, "/.well-known/nostr.json?name=bob", http.StatusFound)
		case "huge":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"names":{"huge":"` + strings.Repeat("x", maxNIP05Bytes) + `"}}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"names":{}}`))
		}
	})
	f := outboundtest.Allowing(srv)
	ctx := context.Background()
	n, err := ResolveNIP05(ctx, f, "Bob@"+host)
	if err != nil || n.Key != key || len(n.Relays) != 1 || n.Relays[0] != "wss://r.example" {
		t.Fatalf("bob: %+v, %v", n, err)
	}
	if err := VerifyNIP05(ctx, f, "bob@"+host, key); err != nil {
		t.Errorf("verify bob: %v", err)
	}
	for name, want := range map[string]error{
		"alice": ErrNIP05NotFound,
		"bad":   ErrMalformed,
		"moved": outbound.ErrRedirected,
		"huge":  outbound.ErrTooLarge,
	} {
		if _, err := ResolveNIP05(ctx, f, name+"@"+host); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if err := VerifyNIP05(ctx, f, "bob@"+host, other); !errors.Is(err, ErrNIP05Mismatch) {
		t.Errorf("a name pointing elsewhere verified: %v", err)
	}
	// A fetcher that does not allow the test server sees a private address.
	if _, err := ResolveNIP05(ctx, outbound.New(outbound.Options{}), "bob@"+host); !errors.Is(err, outbound.ErrNotPublic) {
		t.Errorf("loopback without the test allowance: %v", err)
	}
	for _, bad := range []string{"bob", "@" + host, "b b@" + host, "bob@ho/st", "bob@"} {
		if _, err := ResolveNIP05(ctx, f, bad); err == nil {
			t.Errorf("%q resolved", bad)
		}
	}
}
