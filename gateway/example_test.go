package gateway_test

import (
	"context"
	"fmt"
	"log"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/relay"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A gateway in front of an MCP server that knows nothing of Nostr. Here the
// upstream is a go-sdk server in the process; a Command or an HTTP upstream
// is used the same way.
func Example() {
	ctx := context.Background()
	r, err := relay.Start("127.0.0.1:0", relay.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	gw, err := gateway.New(ctx, gateway.Options{
		Upstream: gateway.InProcess(demoserver.New()),
		Server: contextvm.ServerOptions{
			Signer: contextvm.NewKeySigner(nostr.Generate()),
			Relays: []string{r.URL},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer gw.Close()
	go gw.Serve(ctx)

	// Any ContextVM client now reaches the server by the gateway's key.
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil),
		contextvm.ClientOptions{Server: gw.Server().PublicKey().Hex(), Relays: []string{r.URL}})
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	fmt.Println(cs.InitializeResult().ServerInfo.Name)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// cvm-demo
	// {"sum":5}
}
