package roomnats

import (
	"sync/atomic"

	"github.com/cvmgo/cvm/internal/promreg"
)

// clusterStats are a Cluster's counts. They live in the Cluster, which
// gateways may share, and each gateway using it serves them in its
// /metrics.
type clusterStats struct {
	appends         atomic.Uint64
	appendMessages  atomic.Uint64
	appendConflicts atomic.Uint64
	appendFailures  atomic.Uint64
	rosterWrites    atomic.Uint64
	rosterConflicts atomic.Uint64
	deadLeaves      atomic.Uint64
	presenceShedOut atomic.Uint64
}

func (s *clusterStats) register(r *promreg.Registry, cl *Cluster) {
	conn := cl.conn
	count := func(v *atomic.Uint64) func() float64 { return func() float64 { return float64(v.Load()) } }
	r.GaugeFunc("cvm_mcpx_nats_up", "1 while the link to NATS is up, 0 while it is down.", func() float64 {
		if conn.Up() {
			return 1
		}
		return 0
	})
	r.CounterFunc("cvm_mcpx_cluster_appends_total",
		"Envelopes this node appended to the JetStream log (acknowledged).", count(&s.appends))
	r.CounterFunc("cvm_mcpx_cluster_append_messages_total",
		"JetStream messages this node appended to the log (acknowledged), each holding one envelope or a batch: appends_total over this is the envelopes per message.", count(&s.appendMessages))
	r.CounterFunc("cvm_mcpx_cluster_append_conflicts_total",
		"Appends JetStream refused because another node had taken the seq (Nats-Expected-Last-Subject-Sequence), then retried.", count(&s.appendConflicts))
	r.CounterFunc("cvm_mcpx_cluster_append_failures_total",
		"Appends that failed (NATS unavailable, or an error), answered with an error envelope.", count(&s.appendFailures))
	r.CounterFunc("cvm_mcpx_cluster_roster_writes_total",
		"Roster changes (claims and releases) this node wrote by compare-and-set.", count(&s.rosterWrites))
	r.CounterFunc("cvm_mcpx_cluster_roster_conflicts_total",
		"Roster compare-and-set writes refused because another write came first, then retried.", count(&s.rosterConflicts))
	r.CounterFunc("cvm_mcpx_cluster_dead_node_leaves_total",
		"Participants of dead nodes (or of a stopped gateway of this node, not back within the node timeout) this node removed from the roster and reported left.", count(&s.deadLeaves))
	const shedHelp = "Presence messages shed: out, the bounded queue towards NATS was full (or NATS went down before it was written); in, this node's topics did not take them from NATS in time."
	r.LabeledCounterFunc("cvm_mcpx_cluster_presence_shed_total", shedHelp, map[string]string{"direction": "out"}, count(&s.presenceShedOut))
	r.LabeledCounterFunc("cvm_mcpx_cluster_presence_shed_total", shedHelp, map[string]string{"direction": "in"}, func() float64 { return float64(cl.presenceShedIn()) })
}
