package room

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/mcpx"
)

// childGateway is a gateway process started by a test.
type childGateway struct {
	cmd    *exec.Cmd
	stderr *waitbuf.Buffer
	exited chan struct{}
	wsURL  string
	rest   string
}

// startChildGateway starts "cvm room serve" on dir, with no rate limit and
// no retention bound, and waits for its ready line. extra are more flags.
func startChildGateway(t *testing.T, dir string, extra ...string) *childGateway {
	t.Helper()
	args := append([]string{"room", "serve", "--data", dir, "--listen", "127.0.0.1:0", "--rate", "-1", "--history-max", "-1"}, extra...)
	cmd := exec.Command(cvmBinary, args...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "CVM_LOG_LEVEL=warn")
	var stdout waitbuf.Buffer
	c := &childGateway{cmd: cmd, stderr: &waitbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &stdout, c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.kill)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := stdout.WaitFor(ctx, "\n"); err != nil {
		c.kill()
		t.Fatalf("gateway not ready: %v; stderr:\n%s", err, c.stderr)
	}
	var ready struct {
		URL  string `json:"url"`
		REST string `json:"rest"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(stdout.String(), "\n", 2)[0]), &ready); err != nil || ready.URL == "" {
		t.Fatalf("ready line %q: %v", stdout.String(), err)
	}
	c.wsURL, c.rest = ready.URL, ready.REST
	return c
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *childGateway) kill() {
	c.cmd.Process.Kill()
	<-c.exited
}

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
