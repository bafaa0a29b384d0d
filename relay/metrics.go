package relay

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are per relay, in a registry of their own, so that two relays in
// one process (tests do this) never share counters.
type metrics struct {
	reg           *prometheus.Registry
	connections   prometheus.Gauge
	listeners     prometheus.Gauge
	accepted      *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	stored        prometheus.Counter
	deliveries    prometheus.Counter
	slowConsumers prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cvm_relay_connections", Help: "Open websocket connections.",
		}),
		listeners: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cvm_relay_live_filters", Help: "Live subscription filters across all connections.",
		}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cvm_relay_events_accepted_total", Help: "Events that passed the relay's policies, by kind class.",
		}, []string{"class"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cvm_relay_rejections_total", Help: "Events, requests and connections refused, by reason prefix.",
		}, []string{"reason"}),
		stored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_relay_events_stored_total", Help: "Events written to storage.",
		}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_relay_deliveries_total", Help: "Events sent to live subscribers.",
		}),
		slowConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_relay_slow_consumers_total", Help: "Connections dropped because they stopped reading.",
		}),
	}
	m.reg.MustRegister(m.connections, m.listeners, m.accepted, m.rejected, m.stored, m.deliveries, m.slowConsumers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
