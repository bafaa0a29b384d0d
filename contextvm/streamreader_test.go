package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// testReader is a StreamReader whose outbound frames are recorded.
func testReader(limits StreamLimits) (*StreamReader, *[]streamFrame, *sync.Mutex) {
	var mu sync.Mutex
	var sent []streamFrame
	r := &StreamReader{token: mcpmsg.StringToken("t"), limits: limits.withDefaults(), ready: make(chan struct{}, 1), buffered: map[int]string{}, lastSeen: time.Now()}
	r.send = func(ctx context.Context, frame *jsonrpc.Request) error {
		p, _, _ := parseStreamFrame(frame.Params)
		mu.Lock()
		sent = append(sent, *p.CVM)
		mu.Unlock()
		return nil
	}
	return r, &sent, &mu
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
	r, sent, mu := testReader(StreamLimits{IdleTimeout: 20 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond})
	r.timer = time.AfterFunc(r.limits.IdleTimeout, r.watch)
	r.frame(&streamFrame{FrameType: "start"})
	_, err := r.Next(context.Background())
	if !errors.Is(err, ErrStreamAborted) {
		t.Fatalf("a silent server: %v, want an abort", err)
	}
	time.Sleep(20 * time.Millisecond) // the abort frame goes out on its own goroutine
	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	for _, f := range *sent {
		kinds = append(kinds, f.FrameType)
	}
	if len(kinds) < 2 || kinds[0] != "ping" || kinds[len(kinds)-1] != "abort" {
		t.Fatalf("frames sent %v, want a ping then an abort", kinds)
	}
}

// Before start the server may not have reached the tool: no ping, no abort.
func TestStreamReader_NoProbeBeforeStart(t *testing.T) {
	r, sent, mu := testReader(StreamLimits{IdleTimeout: 10 * time.Millisecond, ProbeTimeout: 10 * time.Millisecond})
	r.timer = time.AfterFunc(r.limits.IdleTimeout, r.watch)
	defer r.timer.Stop()
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
