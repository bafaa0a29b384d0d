package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostOverProxy starts cvm proxy for the pay world's gateway and connects
// a go-sdk client to it as the MCP host; elicit, if not nil, is the host's
// elicitation handler (and the host declares elicitation).
func hostOverProxy(t *testing.T, w *payWorld, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	return hostOver(t, newCLI(t), elicit, "proxy", w.npub, "--relay", w.relay, "--wallet-file", w.clientFile, "--max-sats", "10")
}

// hostOver starts cvm with args in c (a cvm proxy) and connects a go-sdk
// client to it as the MCP host, with elicit as hostOverProxy's.
func hostOver(t *testing.T, c *cli, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error), args ...string) *mcp.ClientSession {
	t.Helper()
	p := startCVM(t, c, args...)
	client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: elicit})
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(p.Stdout), Writer: p.Stdin}, nil)
	if err != nil {
		t.Fatalf("connect to the proxy: %v; stderr: %s", err, p.Stderr)
	}
	t.Cleanup(func() { cs.Close(); p.Wait(t) })
	return cs
}

func addOverProxy(t *testing.T, cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
}

// cvm proxy asks a host that declares elicitation before each payment,
// naming amount, unit, server and tool: accept pays exactly the price,
// decline pays nothing and fails the call with -32017 "declined".
func TestPayProxy_AsksTheHostThroughElicitation(t *testing.T) {
	w := newPayWorld(t, "tool:add=10")
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	action := "accept"
	cs := hostOverProxy(t, w, func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.Params)
		return &mcp.ElicitResult{Action: action}, nil
	})
	res, err := addOverProxy(t, cs)
	if err != nil || res.IsError {
		t.Fatalf("accepted payment: %v %+v", err, res)
	}
	if a, s := w.balances(t); a != 90 || s != 10 {
		t.Fatalf("after accept: alice %d srv %d; want 90 and 10", a, s)
	}
	mu.Lock()
	if len(asked) != 1 {
		t.Fatalf("the host was asked %d times", len(asked))
	}
	if msg := asked[0].Message; !strings.Contains(msg, "10 sats") || !strings.Contains(msg, "tool:add") || !strings.Contains(msg, w.npub) {
		t.Fatalf("the host was asked %q", msg)
	}
	action = "decline"
	mu.Unlock()

	_, err = addOverProxy(t, cs)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != contextvm.CodePaymentDeclined || !strings.Contains(werr.Message, "not approved") {
		t.Fatalf("declined payment: %v", err)
	}
	if a, s := w.balances(t); a != 90 || s != 10 {
		t.Fatalf("after decline: alice %d srv %d; want 90 and 10", a, s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("the host was asked %d times", len(asked))
	}
}

// A host without elicitation is not asked: the proxy pays within the cap.
func TestPayProxy_HostWithoutElicitationPaysWithinTheCap(t *testing.T) {
	w := newPayWorld(t, "tool:add=10")
	cs := hostOverProxy(t, w, nil)
	if res, err := addOverProxy(t, cs); err != nil || res.IsError {
		t.Fatalf("paid call: %v %+v", err, res)
	}
	if a, s := w.balances(t); a != 90 || s != 10 {
		t.Fatalf("alice %d srv %d; want 90 and 10", a, s)
	}
}
