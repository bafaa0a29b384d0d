package contextvm_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestOversizedBothWays(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	arg := peertest.BigText(200_000)
	for _, enc := range []contextvm.EncryptionMode{contextvm.EncryptDisabled, contextvm.EncryptRequired} {
		t.Run(enc.String(), func(t *testing.T) {
			srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptOptional}, peertest.EchoServer())
			cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: enc})
			if got := peertest.CallEcho(t, cs, arg); got != arg {
				t.Fatalf("echo of %d bytes came back as %d bytes", len(arg), len(got))
			}
		})
	}
}

// A stateless client has not heard the server's discovery tags, so its
// first, oversized request waits for the server's accept.
func TestOversizedFirstRequestWaitsForAccept(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	tp := newTap(t, r.URL)
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled}, peertest.EchoServer())
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Stateless: true})
	arg := peertest.BigText(120_000)
	if got := peertest.CallEcho(t, cs, arg); got != arg {
		t.Fatal("wrong echo")
	}
	accepted := false
	for _, m := range tp.messages() {
		if m.method == "notifications/progress" && strings.Contains(m.evt.Content, `"frameType":"accept"`) && m.evt.PubKey == srv.PublicKey() {
			accepted = true
		}
	}
	if !accepted {
		t.Error("the server never sent an accept frame")
	}
}

func TestCorruptTransfersAreAborted(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var logs waitbuf.Buffer
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Logger: logs.Logger()}, peertest.EchoServer())
	request := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("z", 5000) + `"},"_meta":{"progressToken":"raw"}}}`
	for name, mangle := range map[string]func(int, map[string]any) bool{
		"digest mismatch": func(i int, f map[string]any) bool {
			if i == 2 {
				f["cvm"].(map[string]any)["data"] = strings.Repeat("y", 1000)
			}
			return true
		},
		"missing chunk": func(i int, f map[string]any) bool { return i != 3 },
	} {
		t.Run(name, func(t *testing.T) {
			peer := peertest.NewRawPeer(t, r.URL)
			peer.Initialize(srv.PublicKey())
			peertest.RawTransfer(t, peer, srv.PublicKey(), request, mangle)
			var abort string
			for abort == "" {
				evt, ok := peer.Next(10 * time.Second)
				if !ok {
					t.Fatal("no abort frame came back")
				}
				if strings.Contains(evt.Content, `"frameType":"abort"`) {
					abort = evt.Content
				} else if strings.Contains(evt.Content, `"result"`) {
					t.Fatalf("a corrupt request was executed: %s", evt.Content)
				}
			}
			if !strings.Contains(abort, "raw") {
				t.Errorf("abort frame %s is not on the transfer's token", abort)
			}
			logs.Await(t, 10*time.Second, "aborting a client's transfer")
		})
	}
}

// A client that receives a corrupt fragmented answer fails the call with an
// error and tells the server.
func TestClientAbortsCorruptAnswer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	fake := peertest.NewRawPeer(t, r.URL) // plays the server
	aborted := make(chan string, 1)
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
			}
			evt, ok := fake.Next(100 * time.Millisecond)
			if !ok {
				continue
			}
			msgs, _, err := contextvm.DecodeContent(evt.Content)
			if err != nil {
				continue
			}
			req, _ := msgs[0].(*jsonrpc.Request)
			if req == nil {
				continue
			}
			client := evt.PubKey
			reply := func(content string) {
				e := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Content: content,
					Tags: nostr.Tags{{"p", client.Hex()}, {"e", evt.ID.Hex()}, {"nonce", time.Now().String()}}}
				e.Sign(fake.SK)
				fake.Publish(e)
			}
			switch req.Method {
			case "initialize":
				id, _ := json.Marshal(req.ID.Raw())
				reply(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"0"}}}`)
			case "tools/call":
				var p struct {
					Meta struct {
						ProgressToken any `json:"progressToken"`
					} `json:"_meta"`
				}
				json.Unmarshal(req.Params, &p)
				tok, _ := json.Marshal(p.Meta.ProgressToken)
				frame := func(progress int, cvm string) {
					reply(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(tok) + `,"progress":` + peertest.JSONInt(progress) + `,"cvm":` + cvm + `}}`)
				}
				frame(1, `{"type":"oversized-transfer","frameType":"start","completionMode":"render","digest":"sha256:`+strings.Repeat("0", 64)+`","totalBytes":5,"totalChunks":1}`)
				frame(2, `{"type":"oversized-transfer","frameType":"chunk","data":"hello"}`)
				frame(3, `{"type":"oversized-transfer","frameType":"end"}`)
			case "notifications/progress":
				if strings.Contains(string(req.Params), `"abort"`) {
					select {
					case aborted <- string(req.Params):
					default:
					}
				}
			}
		}
	}()
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: fake.SK.Public().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("err = %v, want the call to fail on the digest", err)
	}
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("err = %T, want a JSON-RPC error", err)
	}
	select {
	case <-aborted:
	case <-time.After(testwait.Timeout(10 * time.Second)):
		t.Fatal("the client never told the server it aborted")
	}
}

// A key outside AllowedClients, on a server with a public capability,
// cannot lock the clients it serves out of large requests with a few start
// frames declaring the whole byte budget.
func TestOversized_StrangerCannotExhaustTheBudget(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	friend := nostr.Generate()
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		AllowedClients: []nostr.PubKey{friend.Public()}, PublicCapabilities: []contextvm.Capability{{Method: "tools/list"}}}, peertest.EchoServer())
	stranger := peertest.NewRawPeer(t, r.URL)
	for i, declared := range []int{100 << 20, 100 << 20, 56 << 20} {
		stranger.Publish(stranger.Message(srv.PublicKey(), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"s%d","progress":1,"cvm":{"type":"oversized-transfer","frameType":"start","completionMode":"render","digest":"sha256:%s","totalBytes":%d,"totalChunks":3000}}}`,
			i, strings.Repeat("0", 64), declared)))
	}
	// The server refuses each start with an abort frame: the stranger has
	// been heard before the friend begins.
	for range 3 {
		abort, ok := stranger.Next(10 * time.Second)
		if !ok || !strings.Contains(abort.Content, `"frameType":"abort"`) {
			t.Fatalf("a stranger's oversized start was not refused: %+v", abort)
		}
	}
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		Signer: contextvm.NewKeySigner(friend)})
	arg := peertest.BigText(200_000)
	if got := peertest.CallEcho(t, cs, arg); got != arg {
		t.Fatal("the friend's large request failed")
	}
}

// In the set-up of issue 25 (an allow-list, a public capability, a
// stranger's start frames just before), a fragmented call from a new
// connection of the allowed client (another process under its key,
// stateless as cvm call is) gets its result. Its key has a session here
// that has sent the server's discovery tags already, to the first
// connection; the new one never heard them, so it waits for an accept,
// which the server used to send only to a session that had not.
func TestOversized_NewConnectionOfAKeyWithASessionIsAccepted(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	friend := nostr.Generate()
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		AllowedClients: []nostr.PubKey{friend.Public()}, PublicCapabilities: []contextvm.Capability{{Method: "tools/list"}}}, peertest.EchoServer())
	opts := contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		Signer: contextvm.NewKeySigner(friend), RequestTimeout: testwait.Timeout(20 * time.Second)}
	first := peertest.Connect(t, opts)
	peertest.CallEcho(t, first, "the session now has the server's discovery tags")

	stranger := peertest.NewRawPeer(t, r.URL)
	for i := range 10 { // 8 taken, 2 refused: a stranger's share
		stranger.Publish(stranger.Message(srv.PublicKey(), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"s%d","progress":1,"cvm":{"type":"oversized-transfer","frameType":"start","completionMode":"render","digest":"sha256:%s","totalBytes":100000,"totalChunks":30}}}`,
			i, strings.Repeat("0", 64))))
	}
	opts.Stateless = true
	second := peertest.Connect(t, opts)
	arg := peertest.BigText(100_000)
	if got := peertest.CallEcho(t, second, arg); got != arg {
		t.Fatalf("echo of %d bytes came back as %d bytes", len(arg), len(got))
	}
}

// The end of a transfer the server never saw start (its start frame was
// lost, or came before a restart) is answered with an abort: the request
// did not run, and its client need not wait for its timeout to learn it.
func TestOversized_EndOfATransferNeverStartedIsAborted(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled}, peertest.EchoServer())
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey())
	request := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("z", 3000) + `"},"_meta":{"progressToken":"raw"}}}`
	peertest.RawTransfer(t, peer, srv.PublicKey(), request, func(i int, _ map[string]any) bool { return i != 0 })
	for {
		evt, ok := peer.Next(10 * time.Second)
		if !ok {
			t.Fatal("no abort frame came back")
		}
		if strings.Contains(evt.Content, `"frameType":"abort"`) {
			if !strings.Contains(evt.Content, `"progressToken":"raw"`) {
				t.Fatalf("abort frame %s is not on the transfer's token", evt.Content)
			}
			return
		}
	}
}
