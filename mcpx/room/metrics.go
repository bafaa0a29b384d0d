package room

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are per gateway, in a registry of their own, so that two gateways
// in one process (tests do this) never share counters.
type metrics struct {
	reg          *prometheus.Registry
	connections  prometheus.Gauge
	participants prometheus.Gauge
	accepted     prometheus.Counter
	rejected     *prometheus.CounterVec
	deliveries   prometheus.Counter
	dropped      *prometheus.CounterVec
	refused      *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cvm_mcpx_connections", Help: "Open WebSocket connections.",
		}),
		participants: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cvm_mcpx_participants", Help: "Participants present, over all topics.",
		}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_mcpx_envelopes_accepted_total", Help: "Envelopes published to a topic.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cvm_mcpx_envelopes_rejected_total", Help: "Frames answered with an error envelope, by code.",
		}, []string{"code"}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_mcpx_deliveries_total", Help: "Envelopes queued to a participant's connection.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cvm_mcpx_disconnects_total", Help: "Connections ended, by leave reason.",
		}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cvm_mcpx_http_refusals_total", Help: "WebSocket upgrades and REST calls refused, by code.",
		}, []string{"code"}),
	}
	m.reg.MustRegister(m.connections, m.participants, m.accepted, m.rejected, m.deliveries, m.dropped, m.refused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
