package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// clusterRow is one configuration of the cluster mode: the same load
// against 1 node without NATS, 1 node with NATS, 3 nodes with NATS.
type clusterRow struct {
	Name             string  `json:"name"`
	Nodes            int     `json:"nodes"`
	NATS             bool    `json:"nats"`
	Deliveries       int64   `json:"deliveries"`
	Envelopes        int64   `json:"envelopes"`
	DeliveriesPerSec float64 `json:"deliveries_per_s"`
	DeliveryP50MS    float64 `json:"delivery_latency_p50_ms"`
	DirectedP50MS    float64 `json:"directed_rtt_p50_ms"`
	DirectedP99MS    float64 `json:"directed_rtt_p99_ms"`
	// GatewayCPUUS is the gateways' CPU per delivery; TotalCPUUS adds the
	// NATS server's. PerEnvelope figures divide by envelopes published.
	GatewayCPUUS         float64 `json:"gateway_cpu_per_delivery_us"`
	TotalCPUUS           float64 `json:"total_cpu_per_delivery_us"`
	TotalCPUPerEnvelopeU float64 `json:"total_cpu_per_envelope_us"`
}

// runCluster measures the three configurations one after the other, in
// one run. NATS runs in a child process (this program with -nats-server),
// so that its CPU time is measured as the gateways' is; participants are
// spread over the nodes round-robin (the publisher on the first node, the
// directed responder on the second).
func runCluster(cvm string, n int, d time.Duration, window, rtts int, natsSync bool) ([]clusterRow, error) {
	var rows []clusterRow
	for _, cfg := range []struct {
		name  string
		nodes int
		nats  bool
	}{{"1 node, no NATS", 1, false}, {"1 node, NATS", 1, true}, {"3 nodes, NATS", 3, true}} {
		r, err := clusterCase(cvm, cfg.nodes, cfg.nats, n, d, window, rtts, natsSync)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.name, err)
		}
		r.Name = cfg.name
		rows = append(rows, *r)
	}
	return rows, nil
}

func clusterCase(cvm string, nodes int, withNATS bool, n int, d time.Duration, window, rtts int, natsSync bool) (*clusterRow, error) {
	data, err := os.MkdirTemp("", "mcpxload-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	var pids []int
	args := []string{"room", "serve", "--listen", "127.0.0.1:0", "--data", data,
		"--rate", "-1", "--heartbeat", "-1s", "--max-participants", strconv.Itoa(n + 10),
		"--history-max", "100000", "--log-level", "warn"}
	if withNATS {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		natsArgs := []string{"-nats-server", "-nats-dir", data + "/nats"}
		if natsSync {
			natsArgs = append(natsArgs, "-nats-sync")
		}
		ns, url, err := startChild(self, natsArgs...)
		if err != nil {
			return nil, fmt.Errorf("starting nats-server: %w", err)
		}
		defer stopChild(ns)
		pids = append(pids, ns.Process.Pid)
		args = append(args, "--nats", url)
	}
	var urls []string
	var gwPids []int
	for range nodes {
		gw, url, err := startChild(cvm, args...)
		if err != nil {
			return nil, fmt.Errorf("starting the gateway: %w", err)
		}
		defer stopChild(gw)
		urls = append(urls, url)
		gwPids = append(gwPids, gw.Process.Pid)
	}
	pids = append(pids, gwPids...)
	s, err := newRoomOn(urls, data, n)
	if err != nil {
		return nil, err
	}
	defer s.close()
	gw0, err := cpuOf(gwPids)
	if err != nil {
		return nil, err
	}
	fan, err := s.fanOut(pids, d, window)
	if err != nil {
		return nil, err
	}
	gw1, err := cpuOf(gwPids)
	if err != nil {
		return nil, err
	}
	p50, p99, err := s.directed(rtts)
	if err != nil {
		return nil, err
	}
	envelopes := fan.deliveries / int64(n)
	return &clusterRow{
		Nodes: nodes, NATS: withNATS,
		Deliveries: fan.deliveries, Envelopes: envelopes, DeliveriesPerSec: fan.rate,
		DeliveryP50MS: ms(fan.p50), DirectedP50MS: ms(p50), DirectedP99MS: ms(p99),
		GatewayCPUUS:         (gw1 - gw0) / float64(fan.deliveries) * 1e6,
		TotalCPUUS:           fan.cpuPerDelivery * 1e6,
		TotalCPUPerEnvelopeU: fan.cpu / float64(envelopes) * 1e6,
	}, nil
}

// cpuOf is the CPU time of the processes so far, summed.
func cpuOf(pids []int) (float64, error) {
	var sum float64
	for _, pid := range pids {
		c, err := processCPU(pid)
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}

func printCluster(w io.Writer, rows []clusterRow, n int, natsSync bool) {
	sync := "NATS default sync (every 2 min)"
	if natsSync {
		sync = "NATS sync always"
	}
	fmt.Fprintf(w, "MCPx gateway cluster mode, %d participants in one topic spread over the nodes; %s\n\n", n, sync)
	fmt.Fprintf(w, "%-17s %12s %10s %10s %12s %12s %13s %10s\n", "configuration", "deliveries/s", "lat p50", "direct p50",
		"gw CPU/deliv", "all CPU/deliv", "all CPU/envel", "vs no NATS")
	base := rows[0].TotalCPUUS
	for _, r := range rows {
		fmt.Fprintf(w, "%-17s %12.0f %8.2fms %8.3fms %10.2fµs %11.2fµs %11.1fµs %9.2fx\n", r.Name, r.DeliveriesPerSec, r.DeliveryP50MS,
			r.DirectedP50MS, r.GatewayCPUUS, r.TotalCPUUS, r.TotalCPUPerEnvelopeU, r.TotalCPUUS/base)
	}
	fmt.Fprintf(w, "\n\"vs no NATS\": CPU per delivery (gateways and nats-server) over the single node's without NATS, same run.\n")
	fmt.Fprintf(w, "Coordination overhead per envelope: %.1f µs (1 node) and %.1f µs (3 nodes) of CPU beyond the no-NATS node's %.1f µs.\n",
		rows[1].TotalCPUPerEnvelopeU-rows[0].TotalCPUPerEnvelopeU, rows[2].TotalCPUPerEnvelopeU-rows[0].TotalCPUPerEnvelopeU, rows[0].TotalCPUPerEnvelopeU)
}

// serveNATS runs an embedded nats-server with JetStream storing in dir,
// prints {"url":...} and serves until interrupted.
func serveNATS(dir string, syncAlways bool) error {
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, SyncAlways: syncAlways,
		NoLog: true, NoSigs: true, ServerName: "mcpxload",
	})
	if err != nil {
		return err
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("nats-server not ready in 30 s")
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]string{"url": srv.ClientURL()}); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}
