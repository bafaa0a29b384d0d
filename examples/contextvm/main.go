// Command contextvm serves a go-sdk MCP server over Nostr and calls it with a
// go-sdk MCP client, through an embedded relay on loopback: everything a
// ContextVM deployment has, in one process.
//
//	go run ./examples/contextvm
//
// In a real deployment the server and the client run on different machines
// and share only relay URLs and the server's public key.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A relay. Any Nostr relay works; this one lives in the process.
	r, err := relay.Start("127.0.0.1:0", relay.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	// An ordinary go-sdk server with one tool. Handlers can ask who called.
	server := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "Say hello"},
		func(ctx context.Context, req *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			caller, _ := contextvm.ClientPubkey(req)
			text := fmt.Sprintf("Hello, %s (you are %s…)", in.Name, nostrx.EncodeNpub(caller)[:16])
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})

	// Serve it over Nostr under a key of its own, encrypted by default.
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(nostr.Generate()),
		Relays: []string{r.URL},
		Info:   contextvm.ServerInfo{Name: "Greeter", About: "An example ContextVM server"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	go srv.Serve(context.Background(), server)
	fmt.Println("server:", nostrx.EncodeNpub(srv.PublicKey()))

	// An ordinary go-sdk client reaches it by public key.
	client := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1.0.0"}, nil)
	session, err := contextvm.Connect(ctx, client, contextvm.ClientOptions{
		Server: srv.PublicKey().Hex(),
		Relays: []string{r.URL},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools.Tools {
		fmt.Printf("tool: %s: %s\n", t.Name, t.Description)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Nostr"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("result:", res.Content[0].(*mcp.TextContent).Text)
}
