package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// testReader is a StreamReader whose outbound frames are recorded. Its
// background sends run on goroutines of their own: inside a synctest
// bubble, synctest.Wait waits for them.
func testReader(limits StreamLimits) (*StreamReader, *[]streamFrame, *sync.Mutex) {
	var mu sync.Mutex
	var sent []streamFrame
	r := newStreamReader(mcpmsg.StringToken("t"), limits)
	r.send = func(ctx context.Context, frame *jsonrpc.Request) error {
		p, _, _ := parseStreamFrame(frame.Params)
		mu.Lock()
		sent = append(sent, *p.CVM)
		mu.Unlock()
		return nil
	}
	r.async = func(f func(context.Context)) { go f(context.Background()) }
	return r, &sent, &mu
}

// afterFunc arms a plain timer, for a reader outside a connection.
func afterFunc(d time.Duration, f func(context.Context)) *time.Timer {
	return time.AfterFunc(d, func() { f(context.Background()) })
}

func chunk(i int, data string) *streamFrame {
	return &streamFrame{Type: openStreamType, FrameType: "chunk", ChunkIndex: &i, Data: &data}
}

func TestStreamReader_OrdersChunksAndEnds(t *testing.T) {
	r, _, _ := testReader(StreamLimits{})
	r.frame(&streamFrame{FrameType: "start"})
	for _, i := range []int{2, 0, 3, 1} {
		if err := r.frame(chunk(i, string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	last := 3
	r.frame(&streamFrame{FrameType: "close", LastChunkIndex: &last})
	var got string
	for {
		c, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got += c
	}
	if got != "abcd" {
		t.Fatalf("read %q", got)
	}
}

func TestStreamReader_Violations(t *testing.T) {
	last := 5
	for name, frames := range map[string][]*streamFrame{
		"chunk before start": {chunk(0, "x")},
		"repeated chunk":     {{FrameType: "start"}, chunk(0, "x"), chunk(0, "x")},
		"close with a gap":   {{FrameType: "start"}, chunk(0, "x"), {FrameType: "close", LastChunkIndex: &last}},
	} {
		t.Run(name, func(t *testing.T) {
			r, _, _ := testReader(StreamLimits{})
			var err error
			for _, f := range frames {
				if err = r.frame(f); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrStreamAborted) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	t.Run("buffer limit", func(t *testing.T) {
		r, _, _ := testReader(StreamLimits{MaxBufferedChunks: 3})
		r.frame(&streamFrame{FrameType: "start"})
		var err error
		for i := range 5 {
			if err = r.frame(chunk(i, "x")); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrStreamAborted) {
			t.Fatalf("an unread stream grew past its buffer: %v", err)
		}
	})
}

func TestStreamReader_ProbesAndAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sent, mu := testReader(StreamLimits{IdleTimeout: 20 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond})
		r.arm(afterFunc)
		r.frame(&streamFrame{FrameType: "start"})
		_, err := r.Next(context.Background())
		if !errors.Is(err, ErrStreamAborted) {
			t.Fatalf("a silent server: %v, want an abort", err)
		}
		synctest.Wait() // the abort frame goes out on its own goroutine
		mu.Lock()
		defer mu.Unlock()
		var kinds []string
		for _, f := range *sent {
			kinds = append(kinds, f.FrameType)
		}
		if len(kinds) != 2 || kinds[0] != "ping" || kinds[1] != "abort" {
			t.Fatalf("frames sent %v, want a ping then an abort", kinds)
		}
	})
}

// A pong in time keeps the stream alive; the next silence is probed again.
func TestStreamReader_PongKeepsItAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sent, mu := testReader(StreamLimits{IdleTimeout: 20 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond})
		r.arm(afterFunc)
		r.frame(&streamFrame{FrameType: "start"})
		time.Sleep(30 * time.Millisecond) // the first ping went out at 20 ms
		synctest.Wait()
		mu.Lock()
		nonce := (*sent)[0].Nonce
		mu.Unlock()
		r.frame(&streamFrame{FrameType: "pong", Nonce: nonce})
		time.Sleep(45 * time.Millisecond) // the probe's deadline, had the pong not come
		r.frame(chunk(0, "still here"))
		if got, err := r.Next(context.Background()); err != nil || got != "still here" {
			t.Fatalf("after a pong: %q, %v", got, err)
		}
		r.end(nil)
	})
}

// Before start the server may not have reached the tool: no ping, no abort.
func TestStreamReader_NoProbeBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sent, mu := testReader(StreamLimits{IdleTimeout: 10 * time.Millisecond, ProbeTimeout: 10 * time.Millisecond})
		r.arm(afterFunc)
		defer r.end(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		if _, err := r.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a stream not yet started: %v, want to keep waiting", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(*sent) != 0 {
			t.Fatalf("sent %d frames before start", len(*sent))
		}
	})
}

func FuzzStreamFrames(f *testing.F) {
	for _, s := range []string{
		`{"progressToken":"t","progress":1,"cvm":{"type":"open-stream","frameType":"start"}}`,
		`{"progressToken":"t","progress":2,"cvm":{"type":"open-stream","frameType":"chunk","chunkIndex":0,"data":"x"}}`,
		`{"progressToken":"t","progress":3,"cvm":{"type":"open-stream","frameType":"close","lastChunkIndex":0}}`,
		`{"progressToken":"t","progress":3,"cvm":{"type":"open-stream","frameType":"chunk","chunkIndex":-4,"data":"x"}}`,
		`{"progressToken":"t","progress":3,"cvm":{"type":"open-stream","frameType":"ping","nonce":"1"}}`,
	} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		r, _, _ := testReader(StreamLimits{MaxBufferedChunks: 8, MaxBufferedBytes: 1 << 10})
		r.frame(&streamFrame{FrameType: "start"})
		for _, params := range []string{a, b, a} {
			p, ok, err := parseStreamFrame(json.RawMessage(params))
			if !ok || err != nil {
				continue
			}
			r.frame(p.CVM)
			r.mu.Lock()
			n, bytes := len(r.buffered)+len(r.queue), r.bytes
			r.mu.Unlock()
			if n > 8 || bytes > 1<<10 {
				t.Fatalf("reader holds %d chunks, %d bytes", n, bytes)
			}
		}
	})
}
