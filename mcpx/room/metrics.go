package room

import (
	"net/http"

	"github.com/cvmgo/cvm/internal/promreg"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are per gateway, in a registry of their own, so that two gateways
// in one process (tests do this) never share counters.
type metrics struct {
	reg          *promreg.Registry
	connections  prometheus.Gauge
	participants prometheus.Gauge
	accepted     prometheus.Counter
	rejected     *prometheus.CounterVec
	deliveries   prometheus.Counter
	dropped      *prometheus.CounterVec
	refused      *prometheus.CounterVec
	// publisherWaits counts the read loop's waits for a connection's
	// bounds on what it has awaiting commit, by bound (boundCount,
	// boundBytes): the backpressure publishers meet.
	publisherWaits *prometheus.CounterVec
}

// The bounds a publisher's read loop waits for (cvm_mcpx_publisher_waits_total).
const (
	boundCount = "count" // Options.MaxUncommitted envelopes
	boundBytes = "bytes" // maxFlightBytes on their way into the log
)

func newMetrics(b Backend) *metrics {
	r := promreg.New()
	m := &metrics{
		reg:          r,
		connections:  r.Gauge("cvm_mcpx_connections", "Open WebSocket connections."),
		participants: r.Gauge("cvm_mcpx_participants", "Participants present, over all topics."),
		accepted:     r.Counter("cvm_mcpx_envelopes_accepted_total", "Envelopes published to a topic."),
		rejected:     r.CounterVec("cvm_mcpx_envelopes_rejected_total", "Frames answered with an error envelope, by code.", "code"),
		deliveries:   r.Counter("cvm_mcpx_deliveries_total", "Envelopes queued to a participant's connection."),
		dropped:      r.CounterVec("cvm_mcpx_disconnects_total", "Connections ended, by leave reason.", "reason"),
		refused:      r.CounterVec("cvm_mcpx_http_refusals_total", "WebSocket upgrades and REST calls refused, by code.", "code"),
		publisherWaits: r.CounterVec("cvm_mcpx_publisher_waits_total",
			"Times a connection's next frame waited to be read because its envelopes awaiting commit were at a bound: count (MaxUncommitted) or bytes (4 MiB on their way into the log).", "bound"),
	}
	// A backend's own figures (a cluster's) are served with the gateway's.
	if b, ok := b.(interface{ RegisterMetrics(*promreg.Registry) }); ok {
		b.RegisterMetrics(r)
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return m.reg.Handler()
}
