package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// unlimited lets a benchmark run at full speed from one address.
var unlimited = relay.Limits{EventsPerSecond: -1, ConnectionsPerSecond: -1, MaxSubscriptions: -1, MaxFilters: -1}

// signedFrames pre-signs n events so that signing stays out of the timed loop.
func signedFrames(b *testing.B, n int, kind nostr.Kind, content string) [][]byte {
	b.Helper()
	id := newIdentity()
	frames := make([][]byte, n)
	for i := range frames {
		evt := id.sign(b, kind, fmt.Sprintf("%d %s", i, content))
		frames[i], _ = json.Marshal([]any{"EVENT", evt})
	}
	return frames
}

// pipeline publishes frames over one connection with up to window events
// awaiting their OK, and fails the benchmark on any rejection.
func pipeline(b *testing.B, url string, frames [][]byte, window int) {
	b.Helper()
	conn, err := dialErr(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.CloseNow()
	ctx := context.Background()
	sem := make(chan struct{}, window)
	errc := make(chan error, 1)
	go func() {
		for range frames {
			_, data, err := conn.Read(ctx)
			if err != nil {
				errc <- err
				return
			}
			var msg []json.RawMessage
			json.Unmarshal(data, &msg)
			if label(msg) != "OK" {
				errc <- fmt.Errorf("unexpected %s", data)
				return
			}
			if string(msg[2]) != "true" {
				errc <- fmt.Errorf("rejected: %s", data)
				return
			}
			<-sem
		}
		errc <- nil
	}()
	for _, f := range frames {
		sem <- struct{}{}
		if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkVerifySignature is the baseline the relay's ingest rate is
// measured against: every accepted event costs one id hash and one Schnorr
// verification.
func BenchmarkVerifySignature(b *testing.B) {
	evt := newIdentity().sign(b, 25910, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	b.ReportAllocs()
	for b.Loop() {
		if !evt.CheckID() || !evt.VerifySignature() {
			b.Fatal("invalid")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifies/s")
}

// BenchmarkEphemeralIngest publishes verified ephemeral events (kind 25910)
// that one live subscriber receives: the ContextVM message path.
func BenchmarkEphemeralIngest(b *testing.B) {
	s := relaytest.Start(b, relay.Options{Limits: unlimited})
	sub := dial(b, s.URL)
	sub.query("s", nostr.Filter{Kinds: []nostr.Kind{25910}})
	go func() {
		for {
			if _, _, err := sub.conn.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	frames := signedFrames(b, b.N, 25910, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	b.ResetTimer()
	pipeline(b, s.URL, frames, 64)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkStoredIngest publishes regular events to storage. bbolt commits
// (and fsyncs) one transaction per event before the OK is sent: an OK true
// means the event survives a crash.
func BenchmarkStoredIngest(b *testing.B) {
	for _, tc := range []struct {
		name string
		db   func(*testing.B) string
	}{
		{"bolt-fsync-per-event", func(b *testing.B) string { return filepath.Join(b.TempDir(), "bench.db") }},
		{"memory", func(*testing.B) string { return "" }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := relaytest.Start(b, relay.Options{DBPath: tc.db(b), Limits: unlimited})
			frames := signedFrames(b, b.N, 1, "a stored note of modest size")
			b.ResetTimer()
			pipeline(b, s.URL, frames, 64)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkFanout publishes events that each go to 100 live subscribers and
// reports deliveries per second, counted when every subscriber has read
// every event.
func BenchmarkFanout(b *testing.B) {
	const subscribers = 100
	s := relaytest.Start(b, relay.Options{Limits: unlimited})
	var wg sync.WaitGroup
	for range subscribers {
		c := dial(b, s.URL)
		c.query("f", nostr.Filter{Kinds: []nostr.Kind{20001}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < b.N; {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_, _, err := c.conn.Read(ctx)
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
				n++
			}
		}()
	}
	frames := signedFrames(b, b.N, 20001, "fan me out")
	b.ResetTimer()
	pipeline(b, s.URL, frames, 16)
	wg.Wait()
	b.ReportMetric(float64(b.N*subscribers)/b.Elapsed().Seconds(), "deliveries/s")
}
