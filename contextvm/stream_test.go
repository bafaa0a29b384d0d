package contextvm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type streamArgs struct {
	Chunks int `json:"chunks"`
	PauseM int `json:"pauseMs,omitempty"`
}

// streamingServer has a tool that streams chunks when it can and falls back
// to a plain result when it cannot.
func streamingServer(srv **contextvm.Server, stopped chan<- error) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "streamer"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(ctx context.Context, req *mcp.CallToolRequest, in streamArgs) (*mcp.CallToolResult, any, error) {
		w, err := (*srv).OpenStream(req)
		if err != nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no stream: " + err.Error()}}}, nil, nil
		}
		stop := func() (*mcp.CallToolResult, any, error) {
			if stopped != nil {
				stopped <- errors.New("aborted")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stopped"}}}, nil, nil
		}
		for i := range in.Chunks {
			select {
			case <-w.Aborted():
				return stop()
			case <-time.After(time.Duration(in.PauseM) * time.Millisecond):
			}
			// An abort that lands between the check above and this write
			// is seen here, as the write's error.
			if err := w.Write(ctx, fmt.Sprint("chunk ", i)); errors.Is(err, contextvm.ErrStreamAborted) {
				return stop()
			} else if err != nil {
				return nil, nil, err
			}
		}
		w.Close(ctx)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.Chunks, " chunks")}}}, nil, nil
	})
	return s
}

func serveStreaming(t *testing.T, r *relay.Server, stopped chan<- error) *contextvm.Server {
	return serveStreamingAs(t, r, nostr.Generate(), stopped)
}

func serveStreamingAs(t *testing.T, r *relay.Server, key nostr.SecretKey, stopped chan<- error) *contextvm.Server {
	var srv *contextvm.Server
	srv = peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, OpenStreams: true, Signer: contextvm.NewKeySigner(key)}, streamingServer(&srv, stopped))
	return srv
}

func streamClient(t *testing.T, srv *contextvm.Server, r *relay.Server, limits contextvm.StreamLimits) (*mcp.ClientSession, *contextvm.ClientTransport) {
	return streamClientAs(t, srv, r, limits, nostr.Generate())
}

func streamClientAs(t *testing.T, srv *contextvm.Server, r *relay.Server, limits contextvm.StreamLimits, key nostr.SecretKey) (*mcp.ClientSession, *contextvm.ClientTransport) {
	tr, err := contextvm.NewClientTransport(contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, OpenStreams: true, Streams: limits, Signer: contextvm.NewKeySigner(key)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "reader"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, tr
}

// callStream calls count with a stream and returns the chunks read and the
// tool's result.
func callStream(t *testing.T, cs *mcp.ClientSession, tr *contextvm.ClientTransport, token string, args streamArgs) ([]string, string, error) {
	t.Helper()
	reader, err := tr.OpenStream(token)
	if err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "count", Arguments: args}
	params.SetProgressToken(token)
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), params)
		done <- outcome{res, err}
	}()
	var chunks []string
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	var streamErr error
	for {
		c, err := reader.Next(ctx)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				streamErr = err
			}
			break
		}
		chunks = append(chunks, c)
	}
	o := <-done
	if o.err != nil {
		return chunks, "", o.err
	}
	return chunks, o.res.Content[0].(*mcp.TextContent).Text, streamErr
}

func TestOpenStream(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	srv := serveStreaming(t, r, nil)
	cs, tr := streamClient(t, srv, r, contextvm.StreamLimits{})
	chunks, result, err := callStream(t, cs, tr, "s1", streamArgs{Chunks: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 20 || chunks[0] != "chunk 0" || chunks[19] != "chunk 19" {
		t.Fatalf("chunks %v", chunks)
	}
	if result != "20 chunks" {
		t.Fatalf("result %q (the result follows the stream's close)", result)
	}
}

func TestOpenStreamNeedsTheClientsConsent(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := serveStreaming(t, r, nil)
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}}) // OpenStreams off
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "count", Arguments: streamArgs{Chunks: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, "no stream") {
		t.Fatalf("a client that never advertised support_open_stream got a stream: %q", got)
	}
}

func TestOpenStreamClientAbort(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	stopped := make(chan error, 1)
	srv := serveStreaming(t, r, stopped)
	cs, tr := streamClient(t, srv, r, contextvm.StreamLimits{})
	reader, _ := tr.OpenStream("s2")
	params := &mcp.CallToolParams{Name: "count", Arguments: streamArgs{Chunks: 1000, PauseM: 20}}
	params.SetProgressToken("s2")
	result := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			result <- err.Error()
			return
		}
		result <- res.Content[0].(*mcp.TextContent).Text
	}()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	if _, err := reader.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := reader.Abort(ctx, "enough"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the tool never saw the client's abort")
	}
	if got := <-result; got != "stopped" {
		t.Fatalf("result %q", got)
	}
	if _, err := reader.Next(ctx); !errors.Is(err, contextvm.ErrStreamAborted) {
		t.Fatalf("reading an aborted stream: %v", err)
	}
}

// Two clients use the same token; a client's pings are answered to it, and
// only to it (the reference answers by token alone and pongs the wrong
// client). Only one client pings, in turn: pings carry their sender's own
// counter as nonce, so with both pinging a pong sent to the wrong client
// could not be told from a right one.
//
// The test watches the pings and pongs on the relay rather than waiting for
// a reader to abort for a missing pong: that made it a race between a probe
// timeout and a round trip through the relay, which a loaded machine running
// the race detector lost. And the streams stay silent, after a first chunk,
// until the test has seen the pinger's pong: a pause between chunks, timed,
// let a loaded machine deliver both chunks too close together for a ping.
func TestOpenStreamPingsArePerClient(t *testing.T) {
	for pinger := range 2 {
		t.Run(fmt.Sprint("client ", pinger, " pings"), func(t *testing.T) {
			r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
			serverKey, clientKeys := nostr.Generate(), []nostr.SecretKey{nostr.Generate(), nostr.Generate()}
			tp := newTap(t, r.URL, append(clientKeys, serverKey)...)
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			var srv *contextvm.Server
			s := mcp.NewServer(&mcp.Implementation{Name: "silent streamer"}, nil)
			mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(ctx context.Context, req *mcp.CallToolRequest, _ streamArgs) (*mcp.CallToolResult, any, error) {
				w, err := srv.OpenStream(req)
				if err != nil {
					return nil, nil, err
				}
				if err := w.Write(ctx, "chunk 0"); err != nil {
					return nil, nil, err
				}
				select { // silent: the pinger probes
				case <-release:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
				if err := w.Write(ctx, "chunk 1"); err != nil {
					return nil, nil, err
				}
				w.Close(ctx)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "2 chunks"}}}, nil, nil
			})
			srv = peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, OpenStreams: true, Signer: contextvm.NewKeySigner(serverKey)}, s)
			var wg sync.WaitGroup
			defer wg.Wait()
			defer free() // the calls end when the test fails too
			for i, key := range clientKeys {
				// The pinger probes after each 100 ms of silence; the other
				// never does. Neither gives up on a probe, however slow the
				// machine.
				limits := contextvm.StreamLimits{IdleTimeout: time.Hour, ProbeTimeout: time.Hour}
				if i == pinger {
					limits.IdleTimeout = 100 * time.Millisecond
				}
				cs, tr := streamClientAs(t, srv, r, limits, key)
				wg.Go(func() {
					chunks, _, err := callStream(t, cs, tr, "same-token", streamArgs{})
					if err != nil || len(chunks) != 2 {
						t.Errorf("client %d: %d chunks, err %v", i, len(chunks), err)
					}
				})
			}

			// pings are the nonces the pinger sent; pongs the nonces of the
			// pongs addressed to each client.
			probes := func() (pings map[string]bool, pongs map[nostr.PubKey][]string) {
				pings, pongs = map[string]bool{}, map[nostr.PubKey][]string{}
				for _, m := range tp.messages() {
					var msg struct {
						Params struct {
							CVM struct {
								Type, FrameType, Nonce string
							} `json:"cvm"`
						} `json:"params"`
					}
					if m.method != "notifications/progress" || json.Unmarshal([]byte(m.evt.Content), &msg) != nil || msg.Params.CVM.Type != "open-stream" {
						continue
					}
					switch f := msg.Params.CVM; {
					case f.FrameType == "ping" && m.evt.PubKey == clientKeys[pinger].Public():
						pings[f.Nonce] = true
					case f.FrameType == "pong" && m.evt.PubKey == serverKey.Public():
						to, _ := peertest.FirstTag(m.evt.Tags, "p")
						pk := nostr.MustPubKeyFromHex(to)
						pongs[pk] = append(pongs[pk], f.Nonce)
					}
				}
				return pings, pongs
			}
			peertest.Await(t, "a pong for the client that pinged", &tp.changes, func() bool {
				_, pongs := probes()
				return len(pongs[clientKeys[pinger].Public()]) > 0
			})
			free()
			wg.Wait()
			pings, pongs := probes()
			if other := clientKeys[1-pinger].Public(); len(pongs[other]) > 0 {
				t.Errorf("the client that never pinged got %d pongs", len(pongs[other]))
			}
			for _, nonce := range pongs[clientKeys[pinger].Public()] {
				if !pings[nonce] {
					t.Errorf("a pong for ping %q, which was never sent", nonce)
				}
			}
		})
	}
}

// A call that times out on the client ends the stream it reads: no frame of
// it is awaited any more, so the reader fails at once instead of waiting
// for its liveness probe (IdleTimeout + ProbeTimeout).
func TestOpenStreamEndsWhenItsCallTimesOut(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var srv *contextvm.Server
	s := mcp.NewServer(&mcp.Implementation{Name: "stalls"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "stall"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		w, err := srv.OpenStream(req)
		if err != nil {
			return nil, nil, err
		}
		w.Write(ctx, "first")
		<-ctx.Done() // and nothing more
		return nil, nil, ctx.Err()
	})
	srv = peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, OpenStreams: true}, s)
	// The timeout is the behaviour under test; the handshake and the first
	// chunk must still come within it, on a loaded machine too.
	tr, err := contextvm.NewClientTransport(contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL},
		OpenStreams: true, RequestTimeout: testwait.Timeout(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "reader"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	reader, err := tr.OpenStream("slow")
	if err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "stall"}
	params.SetProgressToken("slow")
	if _, err := cs.CallTool(ctx, params); peertest.RPCCode(err) != contextvm.CodeRequestTimeout {
		t.Fatalf("call: %v; want a timeout", err)
	}
	if chunk, err := reader.Next(ctx); chunk != "first" {
		t.Fatalf("first chunk %q, %v", chunk, err)
	}
	// At once: well before the probe would end it (IdleTimeout and
	// ProbeTimeout by default, 50 s).
	rctx, rcancel := context.WithTimeout(ctx, testwait.Timeout(5*time.Second))
	defer rcancel()
	if _, err := reader.Next(rctx); !errors.Is(err, contextvm.ErrStreamAborted) {
		t.Fatalf("reader after its call timed out: %v; want ErrStreamAborted", err)
	}
}
