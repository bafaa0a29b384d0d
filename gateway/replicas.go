package gateway

import (
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/replica"
)

// groupStatus is the view of srv's replica group; false for a server that
// is no replica (cvm gateway without --nats), and for a nil server.
func groupStatus(srv *contextvm.Server) (replica.Status, bool) {
	if srv == nil {
		return replica.Status{}, false
	}
	g, ok := srv.Replicas().(*replica.Group)
	if !ok {
		return replica.Status{}, false
	}
	return g.Status(), true
}

// replicas adds the replica group's figures to the gateway's metrics when
// its server is one replica of a group (cvm gateway --nats): this
// replica's counters, and its view of the group (live members, and the
// sessions each last reported). srv may be nil (a gateway without Nostr).
func (m *metrics) replicas(srv *contextvm.Server) {
	if _, ok := groupStatus(srv); !ok {
		return
	}
	get := func(f func(replica.Status) int64) func() float64 {
		return func() float64 { st, _ := groupStatus(srv); return float64(f(st)) }
	}
	ready := func(st replica.Status) int64 {
		if st.Ready {
			return 1
		}
		return 0
	}
	sessions := func(st replica.Status) int64 {
		var n int
		for _, s := range st.Members {
			n += s
		}
		return int64(n)
	}
	r := m.reg
	r.GaugeFunc("cvm_replica_ready", "1 while this replica can coordinate with its group (NATS up), 0 while it runs no request (it holds those it owns).", get(ready))
	r.GaugeFunc("cvm_replica_members", "Live replicas of the group, this one included, as this replica sees them.", get(func(st replica.Status) int64 { return int64(len(st.Members)) }))
	r.GaugeFunc("cvm_replica_group_sessions", "Client sessions over the whole group, as the members last reported them.", get(sessions))
	r.CounterFunc("cvm_replica_claims_won_total", "Requests this replica claimed in the shared store and ran.", get(func(st replica.Status) int64 { return st.ClaimsWon }))
	r.CounterFunc("cvm_replica_claims_lost_total", "Requests this replica tried to claim that were already claimed (by another replica, or a replay).", get(func(st replica.Status) int64 { return st.ClaimsLost }))
	r.CounterFunc("cvm_replica_skipped_total", "Requests that belonged to another replica's client.", get(func(st replica.Status) int64 { return st.Skipped }))
	r.CounterFunc("cvm_replica_refused_total", "Requests answered CodeReplicaUnavailable (-32018): claimed here, and not run.", get(func(st replica.Status) int64 { return st.Refused }))
	r.CounterFunc("cvm_replica_held_total", "Requests held, unanswered, while this replica could not coordinate them.", get(func(st replica.Status) int64 { return st.Held }))
	r.GaugeFunc("cvm_replica_holding", "Requests held now.", get(func(st replica.Status) int64 { return int64(st.Holding) }))
	r.CounterFunc("cvm_replica_orphans_answered_total", "Calls of lost replicas answered CodeReplicaLost (-32019).", get(func(st replica.Status) int64 { return st.Orphans }))
	r.CounterFunc("cvm_replica_rerouted_total", "Requests a lost replica never claimed, taken over and run here.", get(func(st replica.Status) int64 { return st.Rerouted }))
	r.CounterFunc("cvm_replica_sessions_rebuilt_total", "Client sessions rebuilt here from the shared store after their replica was lost.", get(func(st replica.Status) int64 { return st.Rebuilt }))
	r.CounterFunc("cvm_replica_members_lost_total", "Replicas declared dead after the membership timeout.", get(func(st replica.Status) int64 { return st.MembersLost }))
}
