package replica_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/contextvm/replica"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkReplicas compares, in one run, one server without NATS (its
// replay guard in memory), one replica on NATS and a group of three, all
// served 8 concurrent gift-wrapping clients through one embedded relay and
// one embedded JetStream (NATS's default fsync interval, as a production
// nats-server runs). It reports
// calls/s, p50 latency, the time spent in the shared store per call
// (coord-µs/call: session lookup, in-flight record, claim, and the
// record's removal when it is made on the answering goroutine),
// and, in the unwrap case, what every other replica pays to open a gift
// wrap it will not run. The removal=inline cases remove each answered
// call's in-flight record on the answering goroutine, as replicas did
// before the removals were queued: the baseline of the queued removal.
// Run: go test -run '^$' -bench Replicas -benchtime
// 2000x ./contextvm
func BenchmarkReplicas(b *testing.B) {
	const clients = 8
	b.Run("unwrap", func(b *testing.B) {
		server, client := nostr.Generate(), nostr.Generate()
		inner := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Content: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench"}}}`,
			Tags: nostr.Tags{{"p", server.Public().Hex()}}}
		inner.Sign(client)
		wrap, err := contextvm.Wrap(inner, server.Public(), contextvm.KindEphemeralGiftWrap)
		if err != nil {
			b.Fatal(err)
		}
		signer := contextvm.NewKeySigner(server)
		ctx := context.Background()
		for b.Loop() {
			if _, err := contextvm.Unwrap(ctx, signer, server.Public(), wrap); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tc := range []struct {
		name     string
		nats     bool
		replicas int
		inline   bool // removal of in-flight records on the answering goroutine
	}{{"nats=off/replicas=1", false, 1, false},
		{"nats=on/replicas=1/removal=inline", true, 1, true}, {"nats=on/replicas=1", true, 1, false},
		{"nats=on/replicas=3/removal=inline", true, 3, true}, {"nats=on/replicas=3", true, 3, false}} {
		b.Run(tc.name, func(b *testing.B) {
			r := relaytest.Start(b, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
			signer := contextvm.NewKeySigner(nostr.Generate())
			var url string
			if tc.nats {
				url = natstest.StartDefaultSync(b).URL()
			}
			var srvs []*contextvm.Server
			for i := range tc.replicas {
				opts := contextvm.ServerOptions{Signer: signer, Relays: []string{r.URL}, SessionRate: -1}
				var grp *replica.Group
				if tc.nats {
					conn, err := natsx.Connect(context.Background(), url, natsx.Options{Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(conn.Close)
					grp = replica.New(replica.Options{Conn: conn, Member: fmt.Sprint("r", i)})
					opts.Replicas = grp
				}
				srv := peertest.Serve(b, opts, peertest.EchoServer())
				if tc.inline {
					replica.RemoveRecordsInline(grp)
				}
				srvs = append(srvs, srv)
			}
			if tc.nats {
				awaitGroup(b, tc.replicas, srvs...)
			}
			var sessions []*mcp.ClientSession
			for range clients {
				sessions = append(sessions, peertest.Connect(b, contextvm.ClientOptions{Server: srvs[0].PublicKey().Hex(), Relays: []string{r.URL},
					Encryption: contextvm.EncryptRequired, RequestTimeout: testwait.Timeout(30 * time.Second)}))
			}
			coord := func() (n, ns int64) {
				for _, s := range srvs {
					if st, ok := status(s); ok {
						n, ns = n+st.Coordinations, ns+st.CoordinationNS
					}
				}
				return
			}
			_, ns0 := coord()
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}}
			var next atomic.Int64
			lat := make([][]time.Duration, clients)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i, cs := range sessions {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						if _, err := cs.CallTool(context.Background(), params); err != nil {
							b.Error(err)
							return
						}
						lat[i] = append(lat[i], time.Since(t0))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			}
			_, ns1 := coord()
			b.ReportMetric(float64(ns1-ns0)/1e3/float64(b.N), "coord-µs/call")
		})
	}
}
