package gateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are per gateway, in a registry of their own, so that two gateways
// in one process never share counters.
type metrics struct {
	reg              *prometheus.Registry
	mode             SessionMode
	sessions         prometheus.Gauge
	upstreamSessions prometheus.Gauge
	requests         *prometheus.CounterVec
	latency          *prometheus.HistogramVec
	refused          *prometheus.CounterVec
	upstreamExits    prometheus.Counter
	restarts         prometheus.Counter
	sessionsRefused  prometheus.Counter
	sessionsEvicted  prometheus.Counter
	sessionsReaped   prometheus.Counter
}

func newMetrics(mode SessionMode) *metrics {
	m := &metrics{
		reg:  prometheus.NewRegistry(),
		mode: mode,
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cvm_gateway_sessions", Help: "Client sessions being served.",
		}),
		upstreamSessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cvm_gateway_upstream_sessions", Help: "Live upstream sessions (child processes or HTTP sessions).",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cvm_gateway_requests_total", Help: "Client requests answered, by method and outcome (ok, error, upstream_down).",
		}, []string{"method", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cvm_gateway_request_seconds", Help: "Time from a client request reaching the gateway to the upstream's answer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"method"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cvm_gateway_refused_total", Help: "Requests refused by the gateway, by reason (unroutable: a shared upstream's request to no single client).",
		}, []string{"reason"}),
		upstreamExits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_gateway_upstream_exits_total", Help: "Upstream sessions that ended on their own (a child process died).",
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_gateway_upstream_restarts_total", Help: "Upstream sessions restarted after they ended.",
		}),
		sessionsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_gateway_sessions_refused_total", Help: "Client sessions refused because every upstream session was busy.",
		}),
		sessionsEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_gateway_sessions_evicted_total", Help: "Idle client sessions closed to make room for a new one.",
		}),
		sessionsReaped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cvm_gateway_sessions_reaped_total", Help: "Client sessions closed after IdleTimeout without a message.",
		}),
	}
	m.reg.MustRegister(m.sessions, m.upstreamSessions, m.requests, m.latency, m.refused, m.upstreamExits,
		m.restarts, m.sessionsRefused, m.sessionsEvicted, m.sessionsReaped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// knownMethods keeps the method label bounded: a client can send any
// method name, and each would otherwise become a time series.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true, "logging/setLevel": true,
}

func methodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "other"
}

// answered records the outcome of one client request.
func (m *metrics) answered(method string, start time.Time, outcome string) {
	label := methodLabel(method)
	m.requests.WithLabelValues(label, outcome).Inc()
	if outcome != "upstream_down" {
		m.latency.WithLabelValues(label).Observe(time.Since(start).Seconds())
	}
}

// Handler serves /metrics (Prometheus) and /healthz: 200 with
// {"status":"ok",…} while the gateway can serve, 503 while it cannot (it is
// closed, or its shared upstream is down).
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		closed, sessions := g.closed, len(g.sessions)
		g.mu.Unlock()
		status, upstream := "ok", "per-session"
		if g.hub != nil {
			upstream = "up"
			if g.hub.mux.DownReason() != nil {
				upstream = "restarting"
				status = "degraded"
			}
		}
		if closed {
			status = "closed"
		}
		w.Header().Set("Content-Type", "application/json")
		if status != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(map[string]any{
			"status": status, "mode": g.opts.Mode.String(), "sessions": sessions, "upstream": upstream,
		})
	})
	return mux
}
