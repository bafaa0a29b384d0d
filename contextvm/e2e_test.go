package contextvm_test

import (
	"context"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoArgs struct {
	Text string `json:"text"`
}

type whoamiOut struct {
	Pubkey string `json:"pubkey"`
}

// testServer builds a go-sdk server with a few tools.
func testServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "cvm-test-server", Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Return the caller's public key"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoamiOut, error) {
		pk, _ := contextvm.ClientPubkey(req)
		return nil, whoamiOut{Pubkey: pk.Hex()}, nil
	})
	return s
}

// serve starts a ContextVM server for mcpServer on the relays.
func serve(t testing.TB, opts contextvm.ServerOptions, mcpServer *mcp.Server) *contextvm.Server {
	t.Helper()
	if opts.Signer == nil {
		opts.Signer = contextvm.NewKeySigner(nostr.Generate())
	}
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), mcpServer)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func connect(t testing.TB, opts contextvm.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "cvm-test-client", Version: "0.1.0"}, nil), opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callEcho(t testing.TB, cs *mcp.ClientSession, text string) string {
	t.Helper()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Fatalf("tools/call echo: %v", err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestGoClientGoServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	for _, enc := range []contextvm.EncryptionMode{contextvm.EncryptDisabled, contextvm.EncryptOptional, contextvm.EncryptRequired} {
		t.Run(enc.String(), func(t *testing.T) {
			srv := serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: enc, Info: contextvm.ServerInfo{Name: "test"}}, testServer())
			clientKey := nostr.Generate()
			cs := connect(t, contextvm.ClientOptions{
				Server:     srv.PublicKey().Hex(),
				Relays:     []string{r.URL},
				Signer:     contextvm.NewKeySigner(clientKey),
				Encryption: enc,
			})
			if got := cs.InitializeResult().ServerInfo.Name; got != "cvm-test-server" {
				t.Errorf("server name %q", got)
			}
			if got := cs.InitializeResult().ProtocolVersion; got != contextvm.ProtocolVersion {
				t.Errorf("protocol %q", got)
			}
			if got := callEcho(t, cs, "hello"); got != "hello" {
				t.Errorf("echo = %q", got)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.StructuredContent.(map[string]any)["pubkey"]; got != clientKey.Public().Hex() {
				t.Errorf("ClientPubkey = %v, want %s", got, clientKey.Public().Hex())
			}
		})
	}
}
