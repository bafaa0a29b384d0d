package interop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func bigArg(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(`big "quoted" \ 🌍 naïve <&> `)
	}
	return b.String()
}

type bigResult struct {
	OK       bool   `json:"ok"`
	Error    string `json:"error"`
	Sent     int    `json:"sent"`
	Received int    `json:"received"`
}

func runTSBig(t *testing.T, relayURL, server, enc, mode string) bigResult {
	t.Helper()
	var res bigResult
	runScript(t, "ts-big.mjs", map[string]string{
		"RELAY_URL": relayURL, "SERVER_PUBKEY": server, "ENCRYPTION": enc, "SIZE": "200000", "MODE": mode,
	}, &res)
	return res
}

// CEP-22 with the reference, in both directions. In plaintext, 200 KB go
// each way. Encrypted, the reference (0.11.14) cannot send a message over
// NIP-44's 65,535 bytes at all: it encrypts the whole message to measure it
// before it fragments, and the encryption throws. So encrypted, each side
// sends its large message to the other and the other answers small.
func TestOversizedInterop(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	srv := serveGo(t, []string{r.URL}, contextvm.EncryptOptional, contextvm.WrapOptional)
	tsServer := startTSServer(t, r.URL, "optional", "optional", nil)

	t.Run("ts-client/go-server/plaintext", func(t *testing.T) {
		if res := runTSBig(t, r.URL, srv.PublicKey().Hex(), "disabled", "echo"); !res.OK {
			t.Fatalf("reference client: %+v", res)
		}
	})
	t.Run("ts-client/go-server/encrypted", func(t *testing.T) {
		// cvm fragments a 200 KB result into gift wraps; the reference reassembles.
		if res := runTSBig(t, r.URL, srv.PublicKey().Hex(), "required", "receive"); !res.OK {
			t.Fatalf("reference client: %+v", res)
		}
	})
	t.Run("ts-client/go-server/encrypted-large-request", func(t *testing.T) {
		// The reference's own limitation, pinned so that a fixed SDK shows up.
		res := runTSBig(t, r.URL, srv.PublicKey().Hex(), "required", "send")
		if res.OK || !strings.Contains(res.Error, "65535") {
			t.Fatalf("expected the reference client to fail measuring an encrypted 200 KB request; got %+v", res)
		}
	})
	for _, mode := range []string{"disabled", "required"} {
		t.Run("go-client/ts-server/"+mode, func(t *testing.T) {
			enc, _ := contextvm.ParseEncryptionMode(mode)
			ctx, cancel := testwait.Context(t, 60*time.Second)
			defer cancel()
			cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "big"}, nil),
				contextvm.ClientOptions{Server: tsServer, Relays: []string{r.URL}, Encryption: enc, RequestTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			arg := bigArg(200_000)
			// cvm fragments the request; the reference reassembles it.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "length", Arguments: map[string]any{"text": arg}})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Content[0].(*mcp.TextContent).Text, fmt.Sprint(len(utf16.Encode([]rune(arg)))); got != want {
				t.Fatalf("length %s, want %s", got, want)
			}
			if mode != "disabled" {
				return // the reference cannot send a large encrypted result (see above)
			}
			// The reference fragments a result; cvm reassembles it.
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": arg}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != arg {
				t.Fatalf("echo: %d bytes back for %d sent", len(got), len(arg))
			}
		})
	}
}

// The reference as receiver of corrupt transfers: it refuses them with an
// error (logged; it sends no abort frame back, unlike cvm, whose refusals
// TestCorruptTransfersAreAborted in package contextvm covers).
func TestCorruptTransferToReference(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var ready struct{ Pubkey string }
	stderr := startNode(t, "js/ts-server.mjs", map[string]string{"RELAY_URL": r.URL, "ENCRYPTION": "disabled", "READY_DELAY_MS": "500"}, &ready)
	waitListening(t, r.URL, ready.Pubkey)
	server, _ := nostr.PubKeyFromHex(ready.Pubkey)
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()
	sk := nostr.Generate()
	send := func(token string, progress int, cvm string) {
		evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", server.Hex()}, {"support_oversized_transfer"}},
			Content: fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":%d,"cvm":%s}}`, token, progress, cvm)}
		evt.Sign(sk)
		if err := pool.Publish(context.Background(), evt); err != nil {
			t.Fatal(err)
		}
	}
	msg := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	digest := "sha256:" + strings.Repeat("0", 64) // wrong
	send("bad-digest", 1, fmt.Sprintf(`{"type":"oversized-transfer","frameType":"start","completionMode":"render","digest":%q,"totalBytes":%d,"totalChunks":1}`, digest, len(msg)))
	send("bad-digest", 2, fmt.Sprintf(`{"type":"oversized-transfer","frameType":"chunk","data":%q}`, msg))
	send("bad-digest", 3, `{"type":"oversized-transfer","frameType":"end"}`)

	send("missing", 1, fmt.Sprintf(`{"type":"oversized-transfer","frameType":"start","completionMode":"render","digest":%q,"totalBytes":%d,"totalChunks":2}`, digest, len(msg)))
	send("missing", 2, fmt.Sprintf(`{"type":"oversized-transfer","frameType":"chunk","data":%q}`, msg))
	send("missing", 4, `{"type":"oversized-transfer","frameType":"end"}`)

	stderr.Await(t, 10*time.Second, "digest mismatch", "Expected 2 chunks")
}
