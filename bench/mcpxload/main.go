package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

func main() {
	var (
		cvm          = flag.String("cvm", "bin/cvm", "path to the cvm binary")
		participants = flag.Int("participants", 100, "participants in the topic")
		duration     = flag.Duration("duration", 5*time.Second, "length of the fan-out phase")
		window       = flag.Int("window", 16, "broadcasts in flight during the fan-out phase")
		rtts         = flag.Int("rtts", 3000, "directed round trips to time")
		rawHub       = flag.Bool("raw-hub", false, "internal: run the baseline hub and print its address")
		jsonOut      = flag.Bool("json", false, "print the figures as JSON")
		cluster      = flag.Bool("cluster", false, "cluster mode: 1 node without NATS, 1 node with NATS, 3 nodes with NATS, in one run")
		natsSync     = flag.Bool("nats-sync", false, "cluster mode: run nats-server with sync always (default: its own default, a sync every 2 minutes)")
		natsServer   = flag.Bool("nats-server", false, "internal: run an embedded nats-server with JetStream and print its address")
		natsDir      = flag.String("nats-dir", "", "internal: the store directory of -nats-server")
	)
	flag.Parse()
	log.SetFlags(0)
	if *rawHub {
		serveRawHub()
		return
	}
	if *natsServer {
		if err := serveNATS(*natsDir, *natsSync); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *cluster {
		rows, err := runCluster(*cvm, *participants, *duration, *window, *rtts, *natsSync)
		if err != nil {
			log.Fatal(err)
		}
		if *jsonOut {
			json.NewEncoder(os.Stdout).Encode(rows)
			return
		}
		printCluster(os.Stdout, rows, *participants, *natsSync)
		return
	}
	res, err := run(*cvm, *participants, *duration, *window, *rtts)
	if err != nil {
		log.Fatal(err)
	}
	if *jsonOut {
		json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	res.print(os.Stdout)
}

type figures struct {
	Participants      int     `json:"participants"`
	Deliveries        int64   `json:"deliveries"`
	DeliveriesPerSec  float64 `json:"deliveries_per_s"`
	CPUPerDeliveryUS  float64 `json:"cpu_per_delivery_us"`
	DeliveryP50MS     float64 `json:"delivery_latency_p50_ms"`
	DeliveryP99MS     float64 `json:"delivery_latency_p99_ms"`
	DirectedP50MS     float64 `json:"directed_rtt_p50_ms"`
	DirectedP99MS     float64 `json:"directed_rtt_p99_ms"`
	RawHubDeliveries  float64 `json:"raw_hub_deliveries_per_s"`
	RawHubCPUUS       float64 `json:"raw_hub_cpu_per_delivery_us"`
	RawHubP50MS       float64 `json:"raw_hub_latency_p50_ms"`
	RawHubP99MS       float64 `json:"raw_hub_latency_p99_ms"`
	EchoP50MS         float64 `json:"raw_echo_rtt_p50_ms"`
	EchoP99MS         float64 `json:"raw_echo_rtt_p99_ms"`
	JSONEncodeUS      float64 `json:"json_encode_envelope_us"`
	GatewayCPUSeconds float64 `json:"gateway_cpu_s"`
}

func (f *figures) print(w *os.File) {
	fmt.Fprintf(w, "MCPx gateway, %d participants in one topic (load generator in its own process)\n\n", f.Participants)
	fmt.Fprintf(w, "%-34s %12s   %-30s %12s %8s\n", "figure", "cvm", "baseline (same run)", "baseline", "ratio")
	row := func(name string, v float64, unit, bname string, b float64) {
		ratio := "-"
		if b > 0 {
			ratio = fmt.Sprintf("%.2fx", v/b)
		}
		fmt.Fprintf(w, "%-34s %10.3f %s  %-30s %10.3f %s %8s\n", name, v, unit, bname, b, unit, ratio)
	}
	row("deliveries/s", f.DeliveriesPerSec, "  ", "raw hub deliveries/s", f.RawHubDeliveries)
	row("gateway CPU per delivery", f.CPUPerDeliveryUS, "µs", "raw hub CPU per delivery", f.RawHubCPUUS)
	row("gateway CPU per delivery", f.CPUPerDeliveryUS, "µs", "encoding/json of one envelope", f.JSONEncodeUS)
	row("delivery latency p50", f.DeliveryP50MS, "ms", "raw hub latency p50", f.RawHubP50MS)
	row("delivery latency p99", f.DeliveryP99MS, "ms", "raw hub latency p99", f.RawHubP99MS)
	row("directed round trip p50", f.DirectedP50MS, "ms", "raw websocket echo p50", f.EchoP50MS)
	row("directed round trip p99", f.DirectedP99MS, "ms", "raw websocket echo p99", f.EchoP99MS)
	fmt.Fprintf(w, "\nfloor: CPU per delivery <= 4 µs (%s), directed p50 <= 0.15 ms (%s)\n",
		verdict(f.CPUPerDeliveryUS <= 4), verdict(f.DirectedP50MS <= 0.15))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func run(cvm string, n int, d time.Duration, window, rtts int) (*figures, error) {
	data, err := os.MkdirTemp("", "mcpxload-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	gw, url, err := startChild(cvm, "room", "serve", "--listen", "127.0.0.1:0", "--data", data,
		"--rate", "-1", "--heartbeat", "-1s", "--max-participants", strconv.Itoa(n+10),
		"--history-max", "100000", "--log-level", "warn")
	if err != nil {
		return nil, fmt.Errorf("starting the gateway: %w", err)
	}
	defer stopChild(gw)
	f := &figures{Participants: n}

	room, err := newRoom(url, data, n)
	if err != nil {
		return nil, err
	}
	fan, err := room.fanOut([]int{gw.Process.Pid}, d, window)
	if err != nil {
		return nil, err
	}
	f.Deliveries, f.DeliveriesPerSec, f.CPUPerDeliveryUS = fan.deliveries, fan.rate, fan.cpuPerDelivery*1e6
	f.DeliveryP50MS, f.DeliveryP99MS = ms(fan.p50), ms(fan.p99)
	f.GatewayCPUSeconds = fan.cpu
	p50, p99, err := room.directed(rtts)
	if err != nil {
		return nil, err
	}
	f.DirectedP50MS, f.DirectedP99MS = ms(p50), ms(p99)
	room.close()

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	hub, hubURL, err := startChild(self, "-raw-hub")
	if err != nil {
		return nil, fmt.Errorf("starting the raw hub: %w", err)
	}
	defer stopChild(hub)
	raw, err := newRawRoom(hubURL, n)
	if err != nil {
		return nil, err
	}
	rawFan, err := raw.fanOut([]int{hub.Process.Pid}, d, window)
	if err != nil {
		return nil, err
	}
	f.RawHubDeliveries, f.RawHubCPUUS = rawFan.rate, rawFan.cpuPerDelivery*1e6
	f.RawHubP50MS, f.RawHubP99MS = ms(rawFan.p50), ms(rawFan.p99)
	raw.close()
	e50, e99, err := echoRTT(hubURL, rtts)
	if err != nil {
		return nil, err
	}
	f.EchoP50MS, f.EchoP99MS = ms(e50), ms(e99)
	f.JSONEncodeUS = jsonEncodeCost()
	return f, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// startChild runs a long-running command and reads its JSON ready line.
func startChild(name string, args ...string) (*exec.Cmd, string, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, "", fmt.Errorf("no ready line from %s: %w", filepath.Base(name), err)
	}
	var ready struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.URL == "" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, "", fmt.Errorf("ready line %q: %v", line, err)
	}
	return cmd, ready.URL, nil
}

func stopChild(cmd *exec.Cmd) {
	cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// processCPU is the user+system CPU time of pid so far, from /proc.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of pid %d (Linux only): %w", pid, err)
	}
	// The command name (field 2) may contain spaces; fields count from after it.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times; 100 on every
// Linux architecture Go supports.
const clockTicks = 100

func percentiles(samples []time.Duration) (p50, p99 time.Duration) {
	if len(samples) == 0 {
		return 0, 0
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return samples[len(samples)/2], samples[len(samples)*99/100]
}

// jsonEncodeCost is encoding/json's time to encode one envelope like the
// ones the fan-out phase sends, in microseconds.
func jsonEncodeCost() float64 {
	type env struct {
		Protocol string          `json:"protocol"`
		ID       string          `json:"id"`
		TS       string          `json:"ts"`
		From     string          `json:"from"`
		To       []string        `json:"to,omitempty"`
		Kind     string          `json:"kind"`
		Payload  json.RawMessage `json:"payload"`
		Seq      uint64          `json:"seq"`
	}
	e := env{Protocol: "mcp-x/v0", ID: "b-p000-123456", TS: time.Now().UTC().Format(time.RFC3339Nano), From: "p000", Kind: "mcp",
		Payload: json.RawMessage(benchPayload(time.Now().UnixNano(), 123456)), Seq: 123456}
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			json.Marshal(&e)
		}
	})
	return float64(r.NsPerOp()) / 1000
}

func benchPayload(sent int64, i int) string {
	return `{"jsonrpc":"2.0","method":"notifications/bench","params":{"t":` + strconv.FormatInt(sent, 10) + `,"i":` + strconv.Itoa(i) + `,"text":"a typical short chat line for the benchmark"}}`
}

var errTimeout = fmt.Errorf("timed out")

func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
