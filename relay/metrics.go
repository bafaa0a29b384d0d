package relay

import (
	"net/http"

	"github.com/cvmgo/cvm/internal/promreg"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are per relay, in a registry of their own, so that two relays in
// one process (tests do this) never share counters.
type metrics struct {
	reg           *promreg.Registry
	connections   prometheus.Gauge
	listeners     prometheus.Gauge
	accepted      *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	stored        prometheus.Counter
	deliveries    prometheus.Counter
	slowConsumers prometheus.Counter
	verified      prometheus.Counter
}

func newMetrics() *metrics {
	r := promreg.New()
	m := &metrics{
		reg:           r,
		connections:   r.Gauge("cvm_relay_connections", "Open websocket connections."),
		listeners:     r.Gauge("cvm_relay_live_filters", "Live subscription filters across all connections."),
		accepted:      r.CounterVec("cvm_relay_events_accepted_total", "Events that passed the relay's policies, by kind class.", "class"),
		rejected:      r.CounterVec("cvm_relay_rejections_total", "Events, requests and connections refused, by reason prefix.", "reason"),
		stored:        r.Counter("cvm_relay_events_stored_total", "Events written to storage."),
		deliveries:    r.Counter("cvm_relay_deliveries_total", "Events sent to live subscribers."),
		slowConsumers: r.Counter("cvm_relay_slow_consumers_total", "Connections dropped because they stopped reading."),
		verified:      r.Counter("cvm_relay_signatures_checked_total", "Event signatures verified: once per event received, however many subscribers it goes to."),
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return m.reg.Handler()
}
