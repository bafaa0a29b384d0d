package roomnats

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/promreg"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/nats-io/nats.go"
)

// logBuffer is a log destination that tests read while the code writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

// shedMetric reads cvm_mcpx_cluster_presence_shed_total{direction=dir}
// from what a gateway on cl would serve.
func shedMetric(t *testing.T, cl *Cluster, dir string) float64 {
	t.Helper()
	r := promreg.New()
	cl.RegisterMetrics(r)
	mfs, err := r.Gather().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cvm_mcpx_cluster_presence_shed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "direction" && l.GetValue() == dir {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("cvm_mcpx_cluster_presence_shed_total{direction=%q} not served", dir)
	return 0
}

func newShedCluster(t *testing.T, srv *natstest.Server, logs *logBuffer, opts ClusterOptions) *Cluster {
	t.Helper()
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(logs, nil))
	conn, err := natsx.Connect(ctx, srv.URL(), natsx.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger, opts.NodeTimeout = log, 500*time.Millisecond
	cl, err := NewCluster(ctx, conn, opts)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); conn.Close() })
	return cl
}

func presenceFrame(id string) room.Delivery {
	e := room.PresenceEnvelope(time.Now(), mcpx.PresenceHeartbeat, mcpx.Participant{ID: id, Name: id, Kind: "agent"}, "")
	return room.Delivery{Topic: "room", Frame: e.AppendJSON(nil)}
}

// Both queues of presence towards and from NATS are bounded: what does not
// fit is shed, counted in cvm_mcpx_cluster_presence_shed_total and
// logged, and nothing blocks the publisher.
func TestNATS_PresenceShedIsCountedAndLogged(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()

	// Out: the writer is stalled on the first message, two more fill the
	// queue, the next five are shed.
	var outLogs logBuffer
	taken := make(chan struct{}, 1)
	unstall := make(chan struct{})
	out := newShedCluster(t, srv, &outLogs, ClusterOptions{PresenceQueue: 2, publishPresence: func(*nats.Msg) error {
		select {
		case taken <- struct{}{}:
		default:
		}
		<-unstall
		return nil
	}})
	defer close(unstall)
	if err := out.Publish(ctx, presenceFrame("a")); err != nil {
		t.Fatal(err)
	}
	<-taken
	for range 7 {
		if err := out.Publish(ctx, presenceFrame("a")); err != nil {
			t.Fatalf("a full queue must shed, not fail: %v", err)
		}
	}
	if v := shedMetric(t, out, "out"); v != 5 {
		t.Fatalf("shed towards NATS: %v, want 5", v)
	}
	testwait.Eventually(t, 10*time.Second, "the out shed's log line", func() bool {
		return outLogs.has("presence shed") && outLogs.has("direction=out") && outLogs.has("dropped=5")
	})

	// In: a topic that does not take its presence (stalled here) makes the
	// client drop what exceeds its pending limit.
	var inLogs logBuffer
	in := newShedCluster(t, srv, &inLogs, ClusterOptions{PresencePending: 4})
	pub := newShedCluster(t, srv, &logBuffer{}, ClusterOptions{})
	stall := make(chan struct{})
	got := make(chan struct{}, 100)
	stop, err := in.Subscribe("room", func(room.Delivery) {
		got <- struct{}{}
		<-stall
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := shedMetric(t, in, "in"); v != 0 {
		t.Fatalf("shed from NATS before any traffic: %v", v)
	}
	if err := pub.Publish(ctx, presenceFrame("b")); err != nil {
		t.Fatal(err)
	}
	<-got // the callback holds the first one
	for range 50 {
		if err := pub.Publish(ctx, presenceFrame("b")); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 10*time.Second, "presence shed from NATS", func() bool { return shedMetric(t, in, "in") >= 50-4 })
	testwait.Eventually(t, 10*time.Second, "the in shed's log line", func() bool {
		return inLogs.has("presence shed") && inLogs.has("direction=in")
	})
	close(stall)
	before := shedMetric(t, in, "in")
	stop()
	if v := shedMetric(t, in, "in"); v != before {
		t.Fatalf("shed count went from %v to %v when the subscription ended; counts never go back", before, v)
	}
}
