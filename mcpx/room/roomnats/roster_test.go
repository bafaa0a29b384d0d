package roomnats

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
)

// Many participants joining and leaving one topic at once, on two nodes:
// each node writes the topic's roster key once per group of changes, not
// once per change (which, the key growing with the topic, was quadratic),
// and every change lands exactly as it would alone.
func TestNATS_RosterChangesAreGroupCommitted(t *testing.T) {
	tc := startCluster(t, 2, room.Options{})
	const topic, perNode = "crowd", 100
	ctx, cancel := testwait.Context(t, time.Minute)
	defer cancel()
	each := func(f func(c *Cluster, id, conn string) error) {
		var wg sync.WaitGroup
		for n, c := range tc.cls {
			for i := range perNode {
				id := fmt.Sprintf("p%d-%d", n, i)
				wg.Go(func() {
					if err := f(c, id, "conn-"+id); err != nil {
						t.Error(id, err)
					}
				})
			}
		}
		wg.Wait()
	}
	writes := func() (w [2]uint64) {
		for n, c := range tc.cls {
			w[n] = c.stats.rosterWrites.Load()
		}
		return w
	}
	before := writes()
	each(func(c *Cluster, id, conn string) error {
		old, snap, err := c.claim(ctx, topic, mcpx.Participant{ID: id, Kind: "robot"}, conn, 1000)
		switch {
		case err != nil:
			return err
		case old != nil:
			return errors.New("replaced someone")
		case snap.members[id].Conn != conn:
			return errors.New("the roster returned lacks the claim")
		}
		return nil
	})
	joined := writes()
	ids := make([]string, 0, 2*perNode)
	for n := range tc.cls {
		for i := range perNode {
			ids = append(ids, fmt.Sprintf("p%d-%d", n, i))
		}
	}
	tc.waitRoster(topic, ids...)
	each(func(c *Cluster, id, conn string) error {
		removed, err := c.release(ctx, topic, id, conn)
		if err == nil && !removed {
			err = errors.New("not removed")
		}
		return err
	})
	left := writes()
	tc.waitRoster(topic)
	for n := range tc.cls {
		j, l := joined[n]-before[n], left[n]-joined[n]
		t.Logf("node %d: %d joins in %d writes, %d leaves in %d writes", n, perNode, j, perNode, l)
		if j > perNode/4 || l > perNode/4 {
			t.Errorf("node %d wrote the roster %d times for %d joins and %d times for %d leaves: not grouped", n, j, perNode, l, perNode)
		}
	}
}

// A group of claims keeps --max-participants: of 20 claimed at once for
// 5 places, exactly 5 get one.
func TestNATS_GroupedClaimsKeepTheLimit(t *testing.T) {
	tc := startCluster(t, 1, room.Options{})
	ctx, cancel := testwait.Context(t, time.Minute)
	defer cancel()
	var won, full atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			id := fmt.Sprintf("p%d", i)
			_, _, err := tc.cls[0].claim(ctx, "small", mcpx.Participant{ID: id}, "c-"+id, 5)
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, room.ErrTopicFull):
				full.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 5 || full.Load() != 15 {
		t.Fatalf("%d claims won and %d refused as full, want 5 and 15", won.Load(), full.Load())
	}
	snap, err := tc.cls[0].update(ctx, "small", func(map[string]room.Member) (bool, error) { return false, nil })
	if err != nil || len(snap.members) != 5 {
		t.Fatalf("roster %v, %v", snap, err)
	}
}

// A topic whose roster would outgrow one NATS message refuses the joins
// that do not fit (room.ErrRosterFull, 403 topic_full at the upgrade), each
// alone: the other changes of their group, leaves above all, still land.
func TestNATS_RosterAtTheMessageLimitRefusesOnlyWhatDoesNotFit(t *testing.T) {
	tc := &testCluster{t: t, nats: natstest.Start(t)}
	tc.addNodeWith(gatewaytest.NewKeys(t), room.Options{}, ClusterOptions{rosterMax: 2000})
	c := tc.cls[0]
	ctx, cancel := testwait.Context(t, time.Minute)
	defer cancel()
	claimAll := func(ids []string) (won []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				_, _, err := c.claim(ctx, "big", mcpx.Participant{ID: id, Name: "a participant", Kind: "robot"}, "c-"+id, 1000)
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, id)
					mu.Unlock()
				case !errors.Is(err, room.ErrRosterFull):
					t.Error(id, err)
				}
			})
		}
		wg.Wait()
		return won
	}
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("first-%02d", i))
	}
	won := claimAll(ids)
	if len(won) == 0 || len(won) == len(ids) {
		t.Fatalf("%d of %d claims won under a 2000-byte roster", len(won), len(ids))
	}
	tc.waitRoster("big", won...)
	// Leaves and joins together: every leave lands, and the joins fill
	// the room they make.
	var wg sync.WaitGroup
	for _, id := range won[:5] {
		wg.Go(func() {
			if ok, err := c.release(ctx, "big", id, "c-"+id); err != nil || !ok {
				t.Error("release", id, ok, err)
			}
		})
	}
	var again []string
	wg.Go(func() {
		var more []string
		for i := range 20 {
			more = append(more, fmt.Sprintf("second-%02d", i))
		}
		again = claimAll(more)
	})
	wg.Wait()
	snap, err := c.update(ctx, "big", func(map[string]room.Member) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range won[:5] {
		if _, ok := snap.members[id]; ok {
			t.Errorf("%s released but still in the roster", id)
		}
	}
	if want := len(won) - 5 + len(again); len(snap.members) != want {
		t.Errorf("roster of %d, want %d", len(snap.members), want)
	}
	if b, _ := json.Marshal(snap.members); len(b) > 2000 {
		t.Errorf("roster of %d bytes", len(b))
	}
}

// At the upgrade, a roster at its size limit is 403 topic_full, saying
// why, not 503 as if NATS were unreachable.
func TestNATS_RosterAtTheMessageLimitIsTopicFull(t *testing.T) {
	tc := &testCluster{t: t, nats: natstest.Start(t)}
	g := tc.addNodeWith(gatewaytest.NewKeys(t), room.Options{}, ClusterOptions{rosterMax: 400})
	g.Join("room", "a")
	g.Join("room", "b")
	code, body := g.DialStatus("?topic=room", http.Header{"Authorization": {"Bearer " + g.Token("room", "c")}})
	if code != http.StatusForbidden || body["code"] != string(mcpx.CodeTopicFull) || !strings.Contains(fmt.Sprint(body["error"]), "max_payload") {
		t.Fatalf("third participant: %d %v, want 403 topic_full naming max_payload", code, body)
	}
}
