//lint:file-ignore SA1019 the sampling round trip through the proxy is what is tested; sampling is deprecated by SEP-2577 but still part of the protocol versions ContextVM peers speak.

package proxy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/proxy"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// remoteServer serves a go-sdk server over ContextVM on an in-memory relay.
func remoteServer(t *testing.T) (relayURL string, server nostr.PubKey) {
	t.Helper()
	r := relaytest.Start(t, relay.Options{})
	s := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, &mcp.ServerOptions{Instructions: "far away"})
	type textIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2})
		}
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Text}}}, MaxTokens: 5,
		})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{r.URL}})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), s)
	t.Cleanup(func() { srv.Close() })
	return r.URL, srv.PublicKey()
}

func TestServe_HostReachesRemoteServer(t *testing.T) {
	relayURL, server := remoteServer(t)
	hostSide, proxySide := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() {
		served <- proxy.Serve(context.Background(), proxySide, proxy.Options{Remote: contextvm.ClientOptions{
			Server: server.Hex(), Relays: []string{relayURL},
		}})
	}()

	var mu sync.Mutex
	var progress []float64
	host := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "model says hi"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
	})
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := host.Connect(ctx, hostSide, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	if res := cs.InitializeResult(); res.ServerInfo.Name != "remote" || res.Instructions != "far away" {
		t.Fatalf("initialize result %+v", res)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "through the proxy"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "through the proxy" {
		t.Fatalf("echo: %v %v", res, err)
	}
	params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"text": "q"}}
	params.SetProgressToken("t")
	res, err = cs.CallTool(ctx, params)
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "model says hi" {
		t.Fatalf("sampling through the proxy: %v %v", res, err)
	}
	mu.Lock()
	if len(progress) != 1 {
		t.Errorf("progress %v", progress)
	}
	mu.Unlock()

	// The host ending the session ends the proxy, without error.
	cs.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("Serve did not return after the host left")
	}
}

func TestServe_ContextEndsIt(t *testing.T) {
	relayURL, server := remoteServer(t)
	hostSide, proxySide := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- proxy.Serve(ctx, proxySide, proxy.Options{Remote: contextvm.ClientOptions{Server: server.Hex(), Relays: []string{relayURL}}})
	}()
	// A handshake through the proxy: once it is answered, Serve is piping.
	host := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil)
	hctx, hcancel := testwait.Context(t, 20*time.Second)
	defer hcancel()
	cs, err := host.Connect(hctx, hostSide, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestServe_BadServerKey(t *testing.T) {
	_, proxySide := mcp.NewInMemoryTransports()
	err := proxy.Serve(context.Background(), proxySide, proxy.Options{Remote: contextvm.ClientOptions{Server: "npub1nope", Relays: []string{"ws://127.0.0.1:1"}}})
	if err == nil {
		t.Fatal("Serve accepted a bad server key")
	}
}
