package room

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
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
	ctx, cancel := testwait.Context(t, 10*time.Second)
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
			History []struct {
				ID  string `json:"id"`
				Seq uint64 `json:"seq"`
			} `json:"history"`
			HasMore bool `json:"has_more"`
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
