package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// formServer is a server without relays for the client's choice between
// gift wraps and plaintext. What it cannot read it drops without a word,
// as the reference does; what it reads it answers in the form it came in,
// nothing before wake (a cold upstream), and a request other than ping
// work after that; a gift-wrapped answer wrapLag after a plaintext one due
// at the same time (decryption and encryption take a moment). Its answers
// carry no discovery tags, as the reference's to a client it has answered
// before: only the forms tell.
type formServer struct {
	fakePool
	ep     endpoint
	reads  [2]bool // [0] plaintext, [1] gift wraps
	wake   time.Time
	work   time.Duration
	client *clientConn
	start  time.Time

	answering sync.WaitGroup
	mu        sync.Mutex
	got       []sighting
}

// sighting is one message that reached the server.
type sighting struct {
	method  string
	wrapped bool
	after   time.Duration // since the server started
}

func (s sighting) String() string {
	f := "plain"
	if s.wrapped {
		f = "wrapped"
	}
	return fmt.Sprintf("%s/%s@%s", s.method, f, s.after)
}

func (s *formServer) Publish(ctx context.Context, evt nostr.Event) error {
	s.fakePool.Publish(ctx, evt)
	inner, wrapKind, err := s.ep.open(ctx, evt)
	if err != nil {
		return nil
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal([]byte(inner.Content), &req) != nil {
		return nil
	}
	s.mu.Lock()
	s.got = append(s.got, sighting{req.Method, wrapKind != 0, time.Since(s.start)})
	s.mu.Unlock()
	if !s.reads[form(wrapKind != 0)] || req.ID == nil {
		return nil
	}
	result := `{}`
	due := s.wake
	if req.Method != mcpmsg.MethodPing {
		result, due = `{"content":[]}`, maxTime(due, time.Now()).Add(s.work)
	}
	if wrapKind != 0 {
		due = maxTime(due, time.Now()).Add(wrapLag)
	}
	s.answering.Go(func() {
		time.Sleep(time.Until(due)) // the server's own pace is the point
		content := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + `}`
		_, out, err := s.ep.seal(context.Background(), s.client.me, content, nostr.Tags{{"p", s.client.me.Hex()}, {"e", inner.ID.Hex()}}, wrapKind)
		if err == nil {
			s.client.handle(out)
		}
	})
	return nil
}

// wrapLag is how much later than a plaintext one a formServer's gift-wrapped
// answer comes: enough that the client reads the plaintext answer first.
const wrapLag = 10 * time.Millisecond

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sightings returns what reached the server, as "method/form@when".
func (s *formServer) sightings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.got))
	for i, g := range s.got {
		out[i] = g.String()
	}
	return out
}

// newFormClient is an optional-mode client connection to srv, which knows
// enc of it beforehand.
func newFormClient(t *testing.T, srv *formServer, enc ServerEncryption) *clientConn {
	t.Helper()
	sk := nostr.Generate()
	srv.ep = testEndpoint(t, &srv.fakePool)
	srv.ep.signer, srv.ep.me = NewKeySigner(sk), sk.Public()
	srv.start = time.Now()
	c := newClientConn(ClientOptions{
		Encryption:         EncryptOptional,
		RequestTimeout:     20 * time.Second,
		PlaintextFallback:  3 * time.Second,
		OversizedThreshold: DefaultOversizedThreshold,
		KnownEncryption:    enc,
	}, testEndpoint(t, srv), sk.Public())
	close(c.announcement)
	srv.client = c
	return c
}

// An optional-mode client sends a request in the form the server reads,
// and in the other only once the server has shown that it dropped the
// first unopened: a server that is merely slow is waited for, and a server
// known to read gift wraps is not pinged in plaintext before it has had
// twice PlaintextFallback to answer a gift-wrapped ping.
func TestClientConn_ChoiceOfForm(t *testing.T) {
	reads := func(p, w bool) [2]bool { return [2]bool{p, w} }
	for _, tc := range []struct {
		name   string
		method string
		known  ServerEncryption
		reads  [2]bool
		wake   time.Duration // the server answers nothing before
		work   time.Duration // a request other than ping takes
		want   []string      // what reaches the server
		learnt ServerEncryption
	}{
		{
			name: "slow server known to read gift wraps", method: "tools/call", known: EncryptionSupported, reads: reads(true, true), wake: 5 * time.Second,
			want:   []string{"tools/call/wrapped@0s", "ping/wrapped@3s"},
			learnt: EncryptionSupported,
		},
		{
			name: "slow server known to read gift wraps, repeatable request", method: "initialize", known: EncryptionSupported, reads: reads(true, true), wake: 5 * time.Second,
			want:   []string{"initialize/wrapped@0s", "ping/wrapped@3s"},
			learnt: EncryptionSupported,
		},
		{
			// Its answers to both pings come at once, the plaintext one
			// first: that does not make the client send the call again.
			name: "slower server known to read gift wraps", method: "tools/call", known: EncryptionSupported, reads: reads(true, true), wake: 8 * time.Second,
			want:   []string{"tools/call/wrapped@0s", "ping/wrapped@3s", "ping/plain@6s"},
			learnt: EncryptionSupported,
		},
		{
			name: "slow tool, nothing known", method: "tools/call", reads: reads(true, true), work: 10 * time.Second,
			want:   []string{"tools/call/wrapped@0s", "ping/wrapped@3s", "ping/plain@3s"},
			learnt: EncryptionSupported,
		},
		{
			name: "encryption disabled, remembered as reading gift wraps", method: "tools/call", known: EncryptionSupported, reads: reads(true, false),
			want:   []string{"tools/call/wrapped@0s", "ping/wrapped@3s", "ping/plain@6s", "tools/call/plain@6.5s"},
			learnt: EncryptionUnsupported,
		},
		{
			name: "encryption disabled, nothing known", method: "tools/call", reads: reads(true, false),
			want:   []string{"tools/call/wrapped@0s", "ping/wrapped@3s", "ping/plain@3s", "tools/call/plain@3.5s"},
			learnt: EncryptionUnsupported,
		},
		{
			name: "encryption disabled, nothing known, repeatable request", method: "tools/list", reads: reads(true, false),
			want:   []string{"tools/list/wrapped@0s", "tools/list/plain@3s"},
			learnt: EncryptionUnsupported,
		},
		{
			name: "encryption required, remembered as reading none", method: "tools/call", known: EncryptionUnsupported, reads: reads(false, true),
			want:   []string{"tools/call/plain@0s", "ping/plain@3s", "ping/wrapped@3s", "tools/call/wrapped@3.51s"},
			learnt: EncryptionSupported,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &formServer{reads: tc.reads, work: tc.work}
				c := newFormClient(t, srv, tc.known)
				defer c.Close()
				srv.wake = srv.start.Add(tc.wake)
				c.Write(context.Background(), &jsonrpc.Request{ID: mcpmsg.IntID(1), Method: tc.method, Params: json.RawMessage(`{}`)})
				msg := <-c.incoming
				if resp, ok := msg.(*jsonrpc.Response); !ok || resp.Error != nil || resp.ID != mcpmsg.IntID(1) {
					t.Fatalf("the go-sdk got %+v, want the answer", msg)
				}
				srv.answering.Wait()
				synctest.Wait()
				if got := srv.sightings(); strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("the server saw %v, want %v", got, tc.want)
				}
				if got := c.view.encryption(); got != tc.learnt {
					t.Errorf("learnt %v, want %v", got, tc.learnt)
				}
			})
		})
	}
}

// A request nobody answers times out with a message that says whom it
// waited for, how long, and how it was sent.
func TestClientConn_TimeoutSaysWhatWasWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &formServer{}
		c := newFormClient(t, srv, EncryptionSupported)
		defer c.Close()
		c.Write(context.Background(), &jsonrpc.Request{ID: mcpmsg.IntID(1), Method: "tools/call", Params: json.RawMessage(`{}`)})
		resp := (<-c.incoming).(*jsonrpc.Response)
		var werr *jsonrpc.Error
		if !errors.As(resp.Error, &werr) || werr.Code != CodeRequestTimeout {
			t.Fatalf("got %+v, want a timeout", resp)
		}
		want := "contextvm: tools/call: no answer from npub1"
		if !strings.HasPrefix(werr.Message, want) || !strings.HasSuffix(werr.Message, "within 20s (sent gift-wrapped; no ping was answered either)") {
			t.Errorf("timeout message %q", werr.Message)
		}
	})
}
