package interop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type countArgs struct {
	Chunks int `json:"chunks"`
}

// streamingGoServer serves "count", which streams its chunks over CEP-41
// the way the reference's tool of the same name does.
func streamingGoServer(t *testing.T, relayURL string, enc contextvm.EncryptionMode) *contextvm.Server {
	t.Helper()
	var srv *contextvm.Server
	s := mcp.NewServer(&mcp.Implementation{Name: "cvm streamer"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(ctx context.Context, req *mcp.CallToolRequest, in countArgs) (*mcp.CallToolResult, any, error) {
		w, err := srv.OpenStream(req)
		if err != nil {
			return nil, nil, err
		}
		for i := range in.Chunks {
			if err := w.Write(ctx, fmt.Sprint("chunk ", i)); err != nil {
				return nil, nil, err
			}
		}
		if err := w.Close(ctx); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.Chunks, " chunks")}}}, nil, nil
	})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	var err error
	srv, err = contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer:      contextvm.NewKeySigner(nostr.Generate()),
		Relays:      []string{relayURL},
		Encryption:  enc,
		OpenStreams: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), s)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func wantChunks(t *testing.T, chunks []string, n int) {
	t.Helper()
	if len(chunks) != n {
		t.Fatalf("%d chunks, want %d: %v", len(chunks), n, chunks)
	}
	for i, c := range chunks {
		if c != fmt.Sprint("chunk ", i) {
			t.Fatalf("chunk %d = %q", i, c)
		}
	}
}

// CEP-41 open streams with the reference, both ways, plaintext and
// encrypted: chunks arrive complete and in order, and the tool's result
// follows the stream.
func TestOpenStreamInterop(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	const n = 25
	for _, mode := range []string{"disabled", "required"} {
		enc, _ := contextvm.ParseEncryptionMode(mode)
		t.Run("ts-client/go-server/"+mode, func(t *testing.T) {
			srv := streamingGoServer(t, r.URL, contextvm.EncryptOptional)
			var res struct {
				OK     bool     `json:"ok"`
				Error  string   `json:"error"`
				Chunks []string `json:"chunks"`
				Result string   `json:"result"`
			}
			runScript(t, "ts-stream-client.mjs", map[string]string{
				"RELAY_URL": r.URL, "SERVER_PUBKEY": srv.PublicKey().Hex(), "ENCRYPTION": mode, "CHUNKS": fmt.Sprint(n),
			}, &res)
			if !res.OK {
				t.Fatalf("reference stream client: %+v", res)
			}
			wantChunks(t, res.Chunks, n)
			if res.Result != fmt.Sprint(n, " chunks") {
				t.Fatalf("result %q", res.Result)
			}
		})
		t.Run("go-client/ts-server/"+mode, func(t *testing.T) {
			tsServer := startTSServer(t, r.URL, "optional", "optional", map[string]string{"OPEN_STREAM": "1"})
			ctx, cancel := testwait.Context(t, 60*time.Second)
			defer cancel()
			tr, err := contextvm.NewClientTransport(contextvm.ClientOptions{
				Server: tsServer, Relays: []string{r.URL}, Encryption: enc, OpenStreams: true,
				Signer: contextvm.NewKeySigner(nostr.Generate()),
			})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "cvm stream reader"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			reader, err := tr.OpenStream("s-" + mode)
			if err != nil {
				t.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: "count", Arguments: countArgs{Chunks: n}}
			params.SetProgressToken("s-" + mode)
			type outcome struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := cs.CallTool(ctx, params)
				done <- outcome{res, err}
			}()
			var chunks []string
			for {
				c, err := reader.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("after %d chunks: %v", len(chunks), err)
				}
				chunks = append(chunks, c)
			}
			o := <-done
			if o.err != nil {
				t.Fatal(o.err)
			}
			wantChunks(t, chunks, n)
			if got := o.res.Content[0].(*mcp.TextContent).Text; got != fmt.Sprint(n, " chunks") {
				t.Fatalf("result %q", got)
			}
		})
	}
}
