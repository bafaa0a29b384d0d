package room_test

import (
	"fmt"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
)

// The whole cursor space of the history endpoint, against a model: every
// cursor kind (seq, envelope id, receive time) at 0 or before the first
// envelope, at the first, in the middle, at the last and beyond it, in
// both directions, read by the sender of a directed envelope, its
// recipient and a third participant, in both visibility modes. Then a walk
// forward from after=0, as a client resuming from the very beginning does.
func TestGateway_HistoryCursorSpace(t *testing.T) {
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Hour) // within the retention age
	type rec struct {
		seq      uint64
		id, from string
		to       []string
		received time.Time
	}
	traffic := []struct {
		from string
		to   []string
	}{
		{"alice", nil},             // 1
		{"alice", []string{"bob"}}, // 2
		{"bob", []string{"alice"}}, // 3
		{"carol", nil},             // 4
		{"bob", []string{"carol"}}, // 5
		{"alice", []string{"bob"}}, // 6
		{"alice", nil},             // 7
	}
	const limit = 2
	for _, vis := range []room.Visibility{room.VisibilityDirected, room.VisibilityTopic} {
		t.Run(string(vis), func(t *testing.T) {
			var tick atomic.Int64 // seconds after base; envelope n is received at base+10n s
			g := gatewaytest.Start(t, room.Options{Visibility: vis, Now: func() time.Time { return base.Add(time.Duration(tick.Load()) * time.Second) }})
			clients := map[string]*gatewaytest.Client{}
			for _, id := range []string{"alice", "bob", "carol"} {
				clients[id], _ = g.Join("room:x", id)
			}
			var recs []rec
			for i, m := range traffic {
				seq := uint64(i + 1)
				tick.Store(int64(10 * seq))
				e := clients[m.from].Env(m.to, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
				clients[m.from].Send(e)
				// Wait until it is published (and so received at this
				// tick): its echo, or its first recipient's copy.
				reader := clients[m.from]
				if len(m.to) > 0 {
					reader = clients[m.to[0]]
				}
				if got := reader.ReadUntil(func(x *gatewaytest.Msg) bool { return x.ID == e["id"] }); got.Seq != seq {
					t.Fatalf("envelope %d got seq %d", seq, got.Seq)
				}
				recs = append(recs, rec{seq, e["id"].(string), m.from, m.to, base.Add(time.Duration(10*seq) * time.Second)})
			}
			tick.Store(1000)
			visible := func(reader string, r rec) bool {
				return vis == room.VisibilityTopic || len(r.to) == 0 || r.from == reader || slices.Contains(r.to, reader)
			}
			type cursor struct {
				name, value string
				in          func(r rec, after bool) bool // r lies beyond the cursor in that direction
				idOf        *rec                         // an id cursor names this record
			}
			bySeq := func(n uint64) cursor {
				return cursor{fmt.Sprint("seq ", n), fmt.Sprint(n), func(r rec, after bool) bool {
					if after {
						return r.seq > n
					}
					return r.seq < n
				}, nil}
			}
			byTime := func(name string, at time.Time) cursor {
				return cursor{"time " + name, at.Format(time.RFC3339Nano), func(r rec, after bool) bool {
					if after {
						return r.received.After(at)
					}
					return r.received.Before(at)
				}, nil}
			}
			byID := func(r *rec) cursor {
				c := bySeq(r.seq)
				c.name, c.value, c.idOf = fmt.Sprintf("id of %d", r.seq), r.id, r
				return c
			}
			cursors := []cursor{
				bySeq(0), bySeq(1), bySeq(4), bySeq(7), bySeq(8), bySeq(1<<64 - 1),
				byID(&recs[0]), byID(&recs[1]), byID(&recs[3]), byID(&recs[4]), byID(&recs[6]),
				byTime("zero", time.Time{}), byTime("before the first", base), byTime("of the first", recs[0].received),
				byTime("between", base.Add(45*time.Second)), byTime("of the last", recs[6].received), byTime("beyond", base.Add(time.Hour)),
			}
			for _, reader := range []string{"alice", "bob", "carol"} {
				tok := g.Token("room:x", reader)
				for _, c := range cursors {
					for _, dir := range []string{"after", "before"} {
						query := fmt.Sprintf("?limit=%d&%s=%s", limit, dir, url.QueryEscape(c.value))
						var body struct {
							History []gatewaytest.Msg `json:"history"`
							HasMore bool              `json:"has_more"`
							Code    string            `json:"code"`
						}
						status, _ := g.Get("/v0/topics/room:x/history"+query, tok, &body)
						if c.idOf != nil && !visible(reader, *c.idOf) {
							// A record the reader may not see is no cursor
							// for it: the answer must not tell it exists.
							if status != 400 || body.Code != string(mcpx.CodeUnknownCursor) {
								t.Errorf("%s %s=%s (%s): %d %s, want 400 unknown_cursor", reader, dir, c.value, c.name, status, body.Code)
							}
							continue
						}
						var match []rec // in walking order
						for _, r := range recs {
							if visible(reader, r) && c.in(r, dir == "after") {
								match = append(match, r)
							}
						}
						if dir == "before" {
							slices.Reverse(match)
						}
						page := match[:min(limit, len(match))]
						if dir == "after" {
							page = slices.Clone(page)
							slices.Reverse(page) // pages are newest first
						}
						want := []string{}
						for _, r := range page {
							want = append(want, r.id)
						}
						if status != 200 || fmt.Sprint(gatewaytest.IDs(body.History)) != fmt.Sprint(want) || body.HasMore != (len(match) > limit) {
							t.Errorf("%s %s=%s (%s): %d %v more=%v, want %v more=%v",
								reader, dir, c.value, c.name, status, gatewaytest.IDs(body.History), body.HasMore, want, len(match) > limit)
						}
					}
				}

				// Resuming from the very beginning reads everything, in order.
				var walked, want []string
				after := uint64(0)
				for range len(recs) + 1 {
					page, more := g.HistoryPage("room:x", reader, fmt.Sprintf("?limit=%d&after=%d", limit, after))
					for i := len(page) - 1; i >= 0; i-- {
						walked = append(walked, page[i].ID)
						after = page[i].Seq
					}
					if !more {
						break
					}
				}
				for _, r := range recs {
					if visible(reader, r) {
						want = append(want, r.id)
					}
				}
				if fmt.Sprint(walked) != fmt.Sprint(want) {
					t.Errorf("%s walking forward from after=0: %v, want %v", reader, walked, want)
				}
			}
		})
	}
}
