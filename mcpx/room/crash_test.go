package room

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/mcpx"
)

// childGateway is a gateway process started by a test.
type childGateway struct {
	proc   *cvmtest.Proc
	stderr *waitbuf.Buffer // what it logs
	wsURL  string
	rest   string
}

// startChildGateway starts "cvm room serve" on dir, with no rate limit and
// no retention bound, and waits for its ready line. extra are more flags.
func startChildGateway(t *testing.T, dir string, extra ...string) *childGateway {
	t.Helper()
	args := append([]string{"room", "serve", "--data", dir, "--listen", "127.0.0.1:0", "--rate", "-1", "--history-max", "-1"}, extra...)
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "CVM_LOG_LEVEL=warn")
	p := cvmtest.Start(t, build.CVM(t), cvmtest.Options{Env: env}, args...)
	var ready struct {
		URL  string `json:"url"`
		REST string `json:"rest"`
	}
	p.ReadyLine(t, &ready)
	if ready.URL == "" {
		t.Fatalf("ready line without a url: %+v", ready)
	}
	return &childGateway{proc: p, stderr: p.Stderr, wsURL: ready.URL, rest: ready.REST}
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *childGateway) kill() { c.proc.Kill() }

// rawParticipant is a WebSocket connection to a child gateway.
func dialChild(t *testing.T, c *childGateway, keys *Keys, topic, id string) *websocket.Conn {
	t.Helper()
	tok, err := keys.Sign(Claims{Subject: id, Audience: Audience{topic}, ExpiresAt: time.Now().Add(time.Hour).Unix()}, AlgEdDSA)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, c.wsURL+"?topic="+topic, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + tok}},
		Subprotocols: []string{mcpx.Subprotocol},
	})
	if err != nil {
		t.Fatalf("dial %s: %v", id, err)
	}
	conn.SetReadLimit(1 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	if _, _, err := conn.Read(ctx); err != nil { // the welcome
		t.Fatalf("%s: welcome: %v", id, err)
	}
	return conn
}

// childHistory reads the whole history of topic as reader, newest first,
// with before cursors: seq -> envelope id.
func childHistory(t *testing.T, c *childGateway, keys *Keys, topic, reader string) map[uint64]string {
	t.Helper()
	tok, err := keys.Sign(Claims{Subject: reader, Audience: Audience{topic}, ExpiresAt: time.Now().Add(time.Hour).Unix()}, AlgEdDSA)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]string{}
	cursor := ""
	for {
		req, _ := http.NewRequest("GET", c.rest+"/v0/topics/"+topic+"/history?limit=1000"+cursor, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var page struct {
			History []msg `json:"history"`
			HasMore bool  `json:"has_more"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("history: %d %s", resp.StatusCode, body)
		}
		for _, m := range page.History {
			out[m.Seq] = m.ID
		}
		if !page.HasMore || len(page.History) == 0 {
			return out
		}
		cursor = fmt.Sprintf("&before=%d", page.History[len(page.History)-1].Seq)
	}
}

// A gateway killed with SIGKILL while a participant publishes as fast as
// it can has stored every envelope it echoed: the echo, which carries the
// seq, is the sender's acknowledgement, so it must come after the commit.
// After the restart, new envelopes get seqs above every one handed out
// before the crash, even those that were delivered live and never stored.
func TestGateway_KilledGatewayKeepsEveryEchoedEnvelope(t *testing.T) {
	dir := t.TempDir()
	keys, err := LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	gw := startChildGateway(t, dir)
	const topic = "room:crash"
	sub := dialChild(t, gw, keys, topic, "sub")
	pub := dialChild(t, gw, keys, topic, "pub")

	// sub reads everything live, so that it never slows the gateway, and
	// remembers the highest seq it saw.
	var maxLive uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			_, data, err := sub.Read(context.Background())
			if err != nil {
				return
			}
			var m msg
			if json.Unmarshal(data, &m) == nil && m.Seq > maxLive {
				maxLive = m.Seq
			}
		}
	})

	// pub keeps a window of envelopes without an echo, as a client that
	// waits for its acknowledgements does, and records every echo.
	const window, killAfter = 256, 1500
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	stop := make(chan struct{})
	killNow := make(chan struct{})
	echoed := map[string]uint64{}
	wg.Go(func() {
		for n := 1; ; n++ {
			select {
			case <-credits:
			case <-stop:
				return
			}
			frame := fmt.Sprintf(`{"protocol":"mcp-x/v0","id":"d-%d","ts":"2026-01-01T00:00:00Z","from":"pub","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}}`, n, n)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := pub.Write(ctx, websocket.MessageText, []byte(frame))
			cancel()
			if err != nil {
				return
			}
		}
	})
	var lastEcho uint64
	wg.Go(func() {
		for {
			_, data, err := pub.Read(context.Background())
			if err != nil {
				return
			}
			var m msg
			if json.Unmarshal(data, &m) != nil || m.From != "pub" || m.Kind != mcpx.KindMCP {
				continue
			}
			if m.Seq <= lastEcho {
				t.Errorf("echo seq %d after %d", m.Seq, lastEcho)
			}
			lastEcho = m.Seq
			echoed[m.ID] = m.Seq
			if len(echoed) == killAfter {
				close(killNow)
			}
			credits <- struct{}{}
		}
	})
	select {
	case <-killNow:
	case <-time.After(30 * time.Second):
		t.Fatalf("only %d echoes in 30 s; gateway stderr:\n%s", len(echoed), gw.stderr)
	}
	gw.kill()
	close(stop)
	wg.Wait()

	gw = startChildGateway(t, dir)
	stored := childHistory(t, gw, keys, topic, "pub")
	var missing, wrong []string
	for id, seq := range echoed {
		switch got, ok := stored[seq]; {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s(seq %d)", id, seq))
		case got != id:
			wrong = append(wrong, fmt.Sprintf("seq %d: echoed %s, stored %s", seq, id, got))
		}
	}
	t.Logf("%d envelopes echoed before the kill (seqs up to %d, %d seen live by sub); %d in history after the restart",
		len(echoed), lastEcho, maxLive, len(stored))
	if len(missing) > 0 || len(wrong) > 0 {
		t.Fatalf("%d echoed envelopes missing from history after the crash (e.g. %v); %d stored under another id (e.g. %v)",
			len(missing), first(missing, 5), len(wrong), first(wrong, 5))
	}

	// Seqs never repeat: the next envelope is numbered above everything
	// anyone saw before the crash.
	pub = dialChild(t, gw, keys, topic, "pub")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pub.Write(ctx, websocket.MessageText, []byte(`{"protocol":"mcp-x/v0","id":"after","ts":"2026-01-01T00:00:00Z","from":"pub","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":0}}}`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := pub.Read(ctx)
		if err != nil {
			t.Fatalf("no echo after the restart: %v", err)
		}
		var m msg
		if json.Unmarshal(data, &m) == nil && m.ID == "after" {
			if m.Seq <= max(lastEcho, maxLive) {
				t.Fatalf("seq %d after the restart repeats one handed out before the crash (up to %d)", m.Seq, max(lastEcho, maxLive))
			}
			break
		}
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
