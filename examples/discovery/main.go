// Command discovery announces two servers that implement the same common
// tool schema at different prices, finds them from their announcements, and
// calls the tool through its schema hash: the cheaper provider answers, and
// when it stops, the other one does.
//
//	go run ./examples/discovery
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type shoutArgs struct {
	Text string `json:"text"`
}

// shouter is a server with the common tool "shout".
func shouter(name string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Upper-case the text"},
		func(ctx context.Context, req *mcp.CallToolRequest, in shoutArgs) (*mcp.CallToolResult, any, error) {
			text := fmt.Sprintf("%s says %s", name, strings.ToUpper(in.Text))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	return s
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := relay.Start("127.0.0.1:0", relay.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	// Two providers announce themselves, with a price and the tool declared
	// common: its schema hash goes into the announcement.
	var servers []*contextvm.Server
	for _, p := range []struct{ name, price string }{{"Budget", "1"}, {"Premium", "5"}} {
		srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
			Signer:      contextvm.NewKeySigner(nostr.Generate()),
			Relays:      []string{r.URL},
			Info:        contextvm.ServerInfo{Name: p.name},
			Announce:    true,
			Prices:      []contextvm.Price{{Capability: "tool:shout", Amount: p.price}},
			CommonTools: []string{"shout"},
		})
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		go srv.Serve(context.Background(), shouter(p.name))
		servers = append(servers, srv)
	}

	// A client finds them. Announcements take a moment to reach the relay.
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()
	var catalog *discovery.Catalog
	for catalog == nil || len(catalog.Servers(discovery.Filter{Tool: "shout"})) < 2 {
		time.Sleep(100 * time.Millisecond)
		if catalog, err = discovery.Fetch(ctx, pool, discovery.Filter{}); err != nil {
			log.Fatal(err)
		}
	}
	var hash string
	for _, s := range catalog.Servers(discovery.Filter{}) {
		tool := s.Tools[0]
		fmt.Printf("%-8s %s  %s costs %s %s, schema %.12s… verified=%v\n", s.Name, s.Npub[:16], tool.Name, tool.Price.Amount, tool.Price.Unit, tool.SchemaHash, tool.Verified)
		hash = tool.SchemaHash
	}

	// Call through the schema: the cheapest provider first.
	history := discovery.OpenHistory("") // in memory; cvm keeps it in the cache directory
	call := func() {
		res, err := discovery.Call(ctx, discovery.CallOptions{
			SchemaHash: hash, Arguments: shoutArgs{Text: "hello"}, Pool: pool, History: history,
			AttemptTimeout: 2 * time.Second,
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("answered by %s after %d attempt(s): %s\n", res.Provider.Server.Name, len(res.Attempts), res.Result.Content[0].(*mcp.TextContent).Text)
	}
	call()
	servers[0].Close() // Budget stops answering, still announced
	call()
	call() // Budget failed recently: Premium is tried first
}
