package gateway

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/promreg"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are per gateway, in a registry of their own, so that two gateways
// in one process never share counters.
type metrics struct {
	reg              *promreg.Registry
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
	replicasOnce     sync.Once // registers the replica group's figures, once
}

func newMetrics(mode SessionMode) *metrics {
	r := promreg.New()
	m := &metrics{
		reg:              r,
		mode:             mode,
		sessions:         r.Gauge("cvm_gateway_sessions", "Client sessions being served."),
		upstreamSessions: r.Gauge("cvm_gateway_upstream_sessions", "Live upstream sessions (child processes or HTTP sessions)."),
		requests:         r.CounterVec("cvm_gateway_requests_total", "Client requests answered, by method and outcome (ok, error, upstream_down, cancelled).", "method", "outcome"),
		latency:          r.HistogramVec("cvm_gateway_request_seconds", "Time from a client request reaching the gateway to the upstream's answer.", prometheus.ExponentialBuckets(0.0005, 4, 10), "method"),
		refused:          r.CounterVec("cvm_gateway_refused_total", "Requests refused by the gateway, by reason (unroutable: a shared upstream's request to no single client).", "reason"),
		upstreamExits:    r.Counter("cvm_gateway_upstream_exits_total", "Upstream sessions that ended on their own (a child process died)."),
		restarts:         r.Counter("cvm_gateway_upstream_restarts_total", "Upstream sessions restarted after they ended."),
		sessionsRefused:  r.Counter("cvm_gateway_sessions_refused_total", "Client sessions refused because every upstream session was busy."),
		sessionsEvicted:  r.Counter("cvm_gateway_sessions_evicted_total", "Idle client sessions closed to make room for a new one."),
		sessionsReaped:   r.Counter("cvm_gateway_sessions_reaped_total", "Client sessions closed after IdleTimeout without a message."),
	}
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
	g.metrics.replicasOnce.Do(func() { g.metrics.replicas(g.srv) })
	mux := http.NewServeMux()
	mux.Handle("/metrics", g.metrics.reg.Handler())
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
		body := map[string]any{
			"status": status, "mode": g.opts.Mode.String(), "sessions": sessions, "upstream": upstream,
		}
		if grp, ok := groupStatus(g.srv); ok {
			// A replica that cannot coordinate runs no request (it
			// holds them): the group (or its load balancer) should look
			// elsewhere.
			body["group"] = grp
			if !grp.Ready && status == "ok" {
				status = "degraded"
				body["status"] = status
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if status != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(body)
	})
	return mux
}
