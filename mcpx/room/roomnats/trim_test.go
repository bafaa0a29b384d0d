package roomnats

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
	"github.com/nats-io/nats.go/jetstream"
)

// With MaxAge on a cluster, envelopes older than it are purged from the
// stream, except each topic's newest (its next seq is read from it), and
// history serves none older than MaxAge; a topic that went quiet goes on
// with the next seq, gap-free.
func TestNATS_HistoryMaxAgeKeepsEachTopicsNewest(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	conn, err := natsx.Connect(ctx, srv.URL(), natsx.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	const maxAge = 1500 * time.Millisecond
	cl, err := NewCluster(ctx, conn, ClusterOptions{MaxAge: maxAge, NodeTimeout: time.Second, Logger: log})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); conn.Close() })
	g := gatewaytest.Start(t, room.Options{Tokens: gatewaytest.NewKeys(t), Backend: cl})

	a, _ := g.Join("quiet", "a")
	b, _ := g.Join("busy", "b")
	for range 3 {
		e := a.Chat("old")
		a.ReadUntil(func(m *gatewaytest.Msg) bool { return m.ID == e["id"] })
	}
	for range 2 {
		e := b.Chat("old")
		b.ReadUntil(func(m *gatewaytest.Msg) bool { return m.ID == e["id"] })
	}
	// Once they are older than MaxAge, busy gets a fresh envelope (seq 3).
	testwait.Eventually(t, 20*time.Second, "the envelopes to age past MaxAge", func() bool {
		return agedOut(ctx, t, cl, "quiet", "busy")
	})
	fresh := b.Chat("new")
	if m := b.ReadUntil(func(m *gatewaytest.Msg) bool { return m.ID == fresh["id"] }); m.Seq != 3 {
		t.Fatalf("busy's fresh envelope has seq %d, want 3", m.Seq)
	}
	counts := func() map[string]uint64 {
		info, err := cl.stream.Info(ctx, jetstream.WithSubjectFilter(logPrefix+">"))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects
	}
	// The trimmer leaves one message per topic: quiet's newest (seq 3,
	// too old, kept for its seq) and busy's fresh one.
	testwait.Eventually(t, 20*time.Second, "the old envelopes to be purged", func() bool {
		c := counts()
		return c[logSubject("quiet")] == 1 && c[logSubject("busy")] == 1
	})
	if seq, err := cl.LatestSeq("quiet"); err != nil || seq != 3 {
		t.Fatalf("quiet's latest seq %d (%v), want 3: its newest message must stay", seq, err)
	}
	// History serves nothing older than MaxAge, not even the kept one.
	if page, err := cl.Query(ctx, "quiet", history.Query{Limit: 100}); err != nil || len(page.Records) != 0 {
		t.Fatalf("quiet's history: %d records (%v), want none: all are older than MaxAge", len(page.Records), err)
	}
	if page, err := cl.Query(ctx, "busy", history.Query{Limit: 100}); err != nil || len(page.Records) != 1 || page.Records[0].Seq != 3 {
		t.Fatalf("busy's history: %+v (%v), want only seq 3", page.Records, err)
	}
	// The quiet topic goes on where it was.
	e := a.Chat("back")
	if m := a.ReadUntil(func(m *gatewaytest.Msg) bool { return m.ID == e["id"] }); m.Seq != 4 {
		t.Fatalf("quiet's next envelope has seq %d, want 4", m.Seq)
	}
}

// agedOut reports whether history serves none of the topics' envelopes:
// all are older than the cluster's MaxAge. Their age is what the trimmer
// goes by, so a test waits for it, not for a clock.
func agedOut(ctx context.Context, t *testing.T, cl *Cluster, topics ...string) bool {
	t.Helper()
	for _, topic := range topics {
		page, err := cl.Query(ctx, topic, history.Query{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) > 0 {
			return false
		}
	}
	return true
}
