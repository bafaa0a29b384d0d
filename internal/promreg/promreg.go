// Package promreg gives each cvm server (a relay, a room gateway, a
// ContextVM gateway) a Prometheus registry of its own, so that two servers
// in one process (tests do this) never share counters, with the Go runtime
// and process collectors that every cvm /metrics endpoint serves. Metrics
// are declared in one line each.
package promreg

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry registers what it creates. Its methods panic on a name used
// twice: metrics are declared once, at construction.
type Registry struct {
	reg *prometheus.Registry
}

// New returns a registry with the Go runtime and process collectors.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Gauge registers a gauge.
func (r *Registry) Gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	r.reg.MustRegister(g)
	return g
}

// Counter registers a counter.
func (r *Registry) Counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	r.reg.MustRegister(c)
	return c
}

// GaugeFunc registers a gauge whose value f gives at each scrape.
func (r *Registry) GaugeFunc(name, help string, f func() float64) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// CounterFunc registers a counter whose value f gives at each scrape, for
// counts kept elsewhere (by something several servers share). f must
// never decrease.
func (r *Registry) CounterFunc(name, help string, f func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}

// LabeledCounterFunc registers one series of a counter whose value f gives
// at each scrape, with fixed labels: several calls with the same name and
// help and different labels make one metric with several series.
func (r *Registry) LabeledCounterFunc(name, help string, labels map[string]string, f func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f))
}

// CounterVec registers counters by labels.
func (r *Registry) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	r.reg.MustRegister(c)
	return c
}

// HistogramVec registers histograms by labels.
func (r *Registry) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	r.reg.MustRegister(h)
	return h
}

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// Gather is the registry's Gatherer, for tests that read a value.
func (r *Registry) Gather() prometheus.Gatherer { return r.reg }
