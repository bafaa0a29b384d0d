package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
)

// chatGateway starts "cvm room serve" with args and returns its REST base
// and its data directory, to mint tokens in.
func chatGateway(t *testing.T, c *cli, args ...string) (base, data string) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "room")
	gw := startCVM(t, c, append([]string{"room", "serve", "--listen", "127.0.0.1:0", "--data", data}, args...)...)
	var ready roomReady
	gw.ReadyLine(t, &ready)
	return ready.REST, data
}

// pipeLines writes n numbered lines into p's stdin and ends the input:
// end is "eof" (stdin closed), a last line, or "" for nothing (stdin left
// open either way). It runs
// beside the reader of p's output: a pipe holds only so much.
func pipeLines(t *testing.T, p *piped, n int, end string) {
	t.Helper()
	in := strings.Join(numbered(n), "\n") + "\n"
	if end != "eof" && end != "" {
		in += end + "\nnot said after " + end + "\n"
	}
	go func() {
		io.WriteString(p.Stdin, in)
		if end == "eof" {
			p.Stdin.Close()
		}
	}()
}

// drainOutput reads p's output until it ends (the process exited), and
// returns the JSON objects with event ev.
func drainOutput(t *testing.T, p *piped, ev string) []map[string]any {
	t.Helper()
	deadline := time.After(testwait.Timeout(2 * time.Minute))
	var got []map[string]any
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return got
			}
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["event"] == ev {
				got = append(got, m)
			}
		case <-deadline:
			t.Fatalf("output did not end; stderr: %s", p.Stderr)
		}
	}
}

// chatHistory returns the texts of the chat messages from in topic's
// history, oldest first.
func chatHistory(t *testing.T, base, topic, token, from string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v0/topics/"+topic+"/history?after=0&limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		History []struct {
			Seq     uint64 `json:"seq"`
			From    string `json:"from"`
			Payload struct {
				Method string `json:"method"`
				Params struct {
					Text string `json:"text"`
				} `json:"params"`
			} `json:"payload"`
		} `json:"history"`
		HasMore bool `json:"has_more"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || body.HasMore {
		t.Fatalf("history: %d, has_more %v, %v", resp.StatusCode, body.HasMore, err)
	}
	sort.Slice(body.History, func(i, j int) bool { return body.History[i].Seq < body.History[j].Seq })
	var texts []string
	for _, e := range body.History {
		if e.From == from && e.Payload.Method == "notifications/chat/message" {
			texts = append(texts, e.Payload.Params.Text)
		}
	}
	return texts
}

// A program pipes 200 lines into "cvm room chat" and ends its input, with
// end of file or with /quit (its stdin left open). The gateway's default
// rate limit (50 envelopes/s, burst 100) refuses many of them at first: the
// chat waits out each retry_after_ms and sends the line again, so every
// line is in the topic's history, in order, once, and each was echoed; the
// chat exits 0 once the last is stored.
func TestRoomChat_PipedLinesAllArriveInOrder(t *testing.T) {
	const n = 200
	for _, end := range []string{"eof", "/quit"} {
		t.Run(end, func(t *testing.T) {
			c := newCLI(t)
			base, data := chatGateway(t, c)
			tok := mint(t, c, "--data", data, "--topic", "room:x", "--id", "alice")
			alice := startPiped(t, c, "--json", "room", "chat", "--gateway", base, "--topic", "room:x", "--token", tok)
			pipeLines(t, alice, n, end)
			chats := drainOutput(t, alice, "chat")
			if code := alice.Wait(t); code != exitOK {
				t.Fatalf("chat exited %d; stderr: %s", code, alice.Stderr)
			}
			got := chatHistory(t, base, "room:x", tok, "alice")
			want := numbered(n)
			if !slices.Equal(got, want) {
				t.Fatalf("history holds %d of the %d lines (want each once, in order): %q", len(got), n, got)
			}
			var echoed []string
			for _, m := range chats {
				if m["mine"] == true {
					echoed = append(echoed, fmt.Sprint(m["text"]))
				}
			}
			if !slices.Equal(echoed, want) {
				t.Fatalf("%d of the %d lines echoed: %q", len(echoed), n, echoed)
			}
		})
	}
}

// A gateway that takes 5 lines a second cannot take 50 within a
// --drain-timeout of 1 s: the chat stops at the timeout, says how many
// lines were not sent and exits 1. Every line is either in history (the
// first ones, in order) or counted.
func TestRoomChat_DrainTimeoutCountsTheLinesNotSent(t *testing.T) {
	const n = 50
	c := newCLI(t)
	base, data := chatGateway(t, c, "--rate", "5", "--burst", "1")
	tok := mint(t, c, "--data", data, "--topic", "room:x", "--id", "alice")
	alice := startPiped(t, c, "room", "chat", "--gateway", base, "--topic", "room:x", "--token", tok, "--drain-timeout", "1s")
	pipeLines(t, alice, n, "eof")
	drainOutput(t, alice, "")
	if code := alice.Wait(t); code != exitRemote {
		t.Fatalf("chat exited %d, want 1; stderr: %s", code, alice.Stderr)
	}
	accounted(t, alice, base, tok, n, "--drain-timeout 1s passed first")
}

// accounted checks that the chat's stderr counts the lines not sent, for
// reason why, and that every one of the n lines is either in history (the
// first ones, in order) or counted.
func accounted(t *testing.T, p *piped, base, tok string, n int, why string) {
	t.Helper()
	stderr := p.Stderr.String()
	m := regexp.MustCompile(`cvm: (\d+) lines? w[a-z]+ not sent(?:, and (\d+) lines? w[a-z]+ sent but not confirmed by the gateway)?: ` + regexp.QuoteMeta(why)).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not say how many lines were not sent (%s): %s", why, stderr)
	}
	notSent, _ := strconv.Atoi(m[1])
	unconfirmed := 0
	if m[2] != "" {
		unconfirmed, _ = strconv.Atoi(m[2])
	}
	got := chatHistory(t, base, "room:x", tok, "alice")
	if !slices.Equal(got, numbered(n)[:len(got)]) {
		t.Fatalf("history holds %q, want the first lines in order", got)
	}
	// An unconfirmed line may or may not have been stored.
	if notSent == 0 || len(got)+notSent > n || len(got)+notSent+unconfirmed < n {
		t.Fatalf("%d lines in history, %d not sent, %d unconfirmed: they do not add up to %d", len(got), notSent, unconfirmed, n)
	}
}

// numbered is the lines pipeLines writes.
func numbered(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("line %03d", i))
	}
	return out
}

// SIGINT leaves at once, queue or not: the lines still queued are counted
// as not sent, and the exit status is 1.
func TestRoomChat_InterruptCountsTheQueuedLines(t *testing.T) {
	const n = 20
	c := newCLI(t)
	base, data := chatGateway(t, c, "--rate", "1", "--burst", "1")
	tok := mint(t, c, "--data", data, "--topic", "room:x", "--id", "alice")
	alice := startPiped(t, c, "--json", "room", "chat", "--gateway", base, "--topic", "room:x", "--token", tok)
	pipeLines(t, alice, n, "") // stdin left open: only SIGINT ends it
	alice.expectJSON(t, "chat", func(m map[string]any) bool { return m["text"] == "line 001" })
	if code := alice.Stop(t, syscall.SIGINT); code != exitRemote {
		t.Fatalf("chat exited %d after SIGINT, want 1; stderr: %s", code, alice.Stderr)
	}
	accounted(t, alice, base, tok, n, "interrupted")
}

func TestChatTally_Report(t *testing.T) {
	for _, tc := range []struct {
		tally chatTally
		why   error
		want  string
	}{
		{chatTally{}, errInterrupted, ""},
		{chatTally{notSent: 1}, nil, "1 line was not sent (the gateway's answers are above)"},
		{chatTally{notSent: 3, unconfirmed: 1}, errInterrupted, "3 lines were not sent, and 1 line was sent but not confirmed by the gateway: interrupted"},
		{chatTally{unconfirmed: 2}, errInterrupted, "2 lines were sent but not confirmed by the gateway: interrupted"},
	} {
		err := tc.tally.err(tc.why)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v, want nil", tc.tally, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.want || !errors.As(err, new(remoteError)) {
			t.Errorf("%+v: %v, want the remote failure %q", tc.tally, err, tc.want)
		}
	}
}
