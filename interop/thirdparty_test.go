package interop

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A smaller matrix through a relay nobody here wrote (@nostr-relay/core),
// with tag filters honoured on live subscriptions.
func TestThirdPartyRelay_ReferencePeers(t *testing.T) {
	url := startThirdPartyRelay(t, "live")
	for _, mode := range []string{"disabled", "optional"} {
		t.Run("ts-client/go-server/"+mode, func(t *testing.T) {
			enc, _ := contextvm.ParseEncryptionMode(mode)
			srv := serveGo(t, []string{url}, enc, contextvm.WrapOptional)
			checkTSClientResult(t, runTSClient(t, url, srv.PublicKey().Hex(), mode, "optional", nil), "cvm-go-server")
		})
		t.Run("go-client/ts-server/"+mode, func(t *testing.T) {
			server := startTSServer(t, url, mode, "optional", nil)
			enc, _ := contextvm.ParseEncryptionMode(mode)
			if err := goClientRun(t, contextvm.ClientOptions{Server: server, Relays: []string{url}, Encryption: enc, RequestTimeout: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A relay that ignores "#p" on live subscriptions delivers every message to
// every peer. cvm checks the recipient of every event and of every wrapped
// event, so concurrent clients of one server never mix up their answers.
func TestThirdPartyRelay_IgnoringTagFilters(t *testing.T) {
	url := startThirdPartyRelay(t, "off")
	srv := serveGo(t, []string{url}, contextvm.EncryptOptional, contextvm.WrapOptional)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 3 {
		for _, enc := range []contextvm.EncryptionMode{contextvm.EncryptOptional, contextvm.EncryptDisabled} {
			wg.Go(func() {
				ctx, cancel := testwait.Context(t, 30*time.Second)
				defer cancel()
				cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "c"}, nil), contextvm.ClientOptions{
					Server: srv.PublicKey().Hex(), Relays: []string{url}, Encryption: enc, Signer: contextvm.NewKeySigner(nostr.Generate()),
				})
				if err != nil {
					errs <- err
					return
				}
				defer cs.Close()
				for j := range 3 {
					want := fmt.Sprintf("client %d/%v call %d", i, enc, j)
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
					if err != nil {
						errs <- err
						return
					}
					if got := res.Content[0].(*mcp.TextContent).Text; got != want {
						errs <- fmt.Errorf("got another client's answer: %q, want %q", got, want)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The reference client, which does not check "p", still works here.
	checkTSClientResult(t, runTSClient(t, url, srv.PublicKey().Hex(), "optional", "optional", nil), "cvm-go-server")
}

// Stateless clients (CEP-35) in both directions.
func TestStatelessInterop(t *testing.T) {
	url := startThirdPartyRelay(t, "live")
	t.Run("ts-client/go-server", func(t *testing.T) {
		srv := serveGo(t, []string{url}, contextvm.EncryptOptional, contextvm.WrapOptional)
		res := runTSClient(t, url, srv.PublicKey().Hex(), "optional", "optional", map[string]string{"STATELESS": "1"})
		if !res.OK || res.Echo != "héllo 🌍" || res.Add["sum"] != float64(5) {
			t.Fatalf("stateless TS client: %+v", res)
		}
	})
	t.Run("go-client/ts-server", func(t *testing.T) {
		server := startTSServer(t, url, "optional", "optional", map[string]string{"INJECT_PUBKEY": "1"})
		me := nostr.Generate()
		ctx, cancel := testwait.Context(t, 20*time.Second)
		defer cancel()
		cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "stateless"}, nil), contextvm.ClientOptions{
			Server: server, Relays: []string{url}, Stateless: true, Signer: contextvm.NewKeySigner(me), RequestTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
		if err != nil {
			t.Fatal(err)
		}
		// The reference server injected our key (CEP-16): it saw who we are.
		if got := res.Content[0].(*mcp.TextContent).Text; got != me.Public().Hex() {
			t.Fatalf("reference server saw client %q, want %s", got, me.Public().Hex())
		}
	})
}
