package reputation_test

import (
	"fmt"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/cvmgo/cvm/reputation"
	"github.com/cvmgo/cvm/social"
)

// rankingLoad is the closing note's case: 2,000 servers and a web of 500
// keys (the root follows 100, who follow 400 more), each server reviewed
// by 5 keys of the web and 5 outside it, 200 of them called 50 times.
type rankingLoad struct {
	root    nostr.SecretKey
	follows []nostr.SecretKey
	fofs    []nostr.SecretKey
	servers []discovery.Server
	history *discovery.History
}

func newRankingLoad() *rankingLoad {
	l := &rankingLoad{root: nostr.Generate(), follows: keys(100), fofs: keys(400), history: discovery.OpenHistory("")}
	now := time.Now()
	for i := range 2000 {
		pk := nostr.Generate().Public()
		l.servers = append(l.servers, discovery.Server{Name: fmt.Sprint("server", i), Pubkey: pk, ToolsAnnouncedAt: now.Add(-time.Duration(i) * time.Hour)})
		if i%10 == 0 {
			for j := range 50 {
				l.history.Succeeded(pk, time.Duration(50+j)*time.Millisecond, now)
			}
		}
	}
	return l
}

func (l *rankingLoad) web() *reputation.Web {
	var lists []reputation.FollowList
	for i, f := range l.follows {
		lists = append(lists, reputation.FollowList{Author: f.Public(), Follows: publics(l.fofs[4*i : 4*i+4])})
	}
	return reputation.NewWeb(reputation.FollowList{Author: l.root.Public(), Follows: publics(l.follows)}, lists)
}

// reviewer is the j-th of the 5 web keys reviewing server i.
func (l *rankingLoad) reviewer(i, j int) nostr.SecretKey {
	all := append(l.follows[:len(l.follows):len(l.follows)], l.fofs...)
	return all[(5*i+j)%len(all)]
}

func BenchmarkRank_2000Servers500KeyWeb(b *testing.B) {
	l := newRankingLoad()
	web := l.web()
	var reviews []social.Review
	for i, s := range l.servers {
		for j := range 5 {
			reviews = append(reviews, social.Review{Author: l.reviewer(i, j).Public(), Server: s.Pubkey, Rating: 1 + (i+j)%5, CreatedAt: nostr.Now()})
			reviews = append(reviews, social.Review{Author: nostr.Generate().Public(), Server: s.Pubkey, Rating: 5, CreatedAt: nostr.Now()})
		}
	}
	in := reputation.Inputs{Web: web, Reviews: reviews, History: l.history}
	servers := make([]discovery.Server, len(l.servers))
	b.ResetTimer()
	for b.Loop() {
		copy(servers, l.servers)
		reputation.Sort(servers, reputation.Rank(in, servers))
	}
}

// BenchmarkLoadAndRank_2000Servers500KeyWeb is the same with the web and
// the reviews (10,000 of them, from the web) read from the embedded relay
// on loopback each time, without the web's cache.
func BenchmarkLoadAndRank_2000Servers500KeyWeb(b *testing.B) {
	l := newRankingLoad()
	r := relaytest.Start(b, relay.Options{Limits: relay.Limits{EventsPerSecond: 1e6, EventBurst: 1e6}})
	evts := []nostr.Event{followList(b, l.root, nostr.Now()-60, publics(l.follows)...)}
	for i, f := range l.follows {
		evts = append(evts, followList(b, f, nostr.Now()-60, publics(l.fofs[4*i:4*i+4])...))
	}
	// Written over time, as reviews are: one a minute.
	for i, s := range l.servers {
		for j := range 5 {
			evts = append(evts, review(b, l.reviewer(i, j), s.Pubkey, 1+(i+j)%5, nostr.Now()-nostr.Timestamp(60*(5*i+j+1))))
		}
	}
	publishAll(b, r, evts...)
	p := newPool(b, r)
	servers := make([]discovery.Server, len(l.servers))
	b.ResetTimer()
	for b.Loop() {
		in, notes, err := reputation.Load(testContext(b), reputation.LoadOptions{Pool: p, Root: l.root.Public(), History: l.history})
		if err != nil || len(notes) > 0 || len(in.Reviews) != 5*len(l.servers) {
			b.Fatalf("%d reviews, notes %q, %v", len(in.Reviews), notes, err)
		}
		copy(servers, l.servers)
		reputation.Sort(servers, reputation.Rank(in, servers))
	}
}
