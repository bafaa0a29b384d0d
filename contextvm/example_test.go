package contextvm_test

import (
	"context"
	"fmt"
	"log"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/relay"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A go-sdk server served over Nostr and a go-sdk client calling it.
func Example() {
	ctx := context.Background()
	r, err := relay.Start("127.0.0.1:0", relay.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	server := mcp.NewServer(&mcp.Implementation{Name: "upper"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "shout"}, func(ctx context.Context, req *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text + "!"}}}, nil, nil
	})
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{r.URL}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	go srv.Serve(ctx, server)

	session, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "client"}, nil),
		contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"text": "hello"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output: hello!
}
