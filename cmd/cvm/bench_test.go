package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The figures of the gateway: run with
//
//	go test -run '^$' -bench Gateway -benchtime 200x ./cmd/cvm
//
// (make bench). Neither asserts anything about time: they report. Both drive the built binaries as users run them, on the
// demo server as upstream, through an in-process relay.

// BenchmarkGatewayOverhead calls the same tool of the same stdio server
// directly (an MCP client over the child's stdin and stdout) and through
// cvm gateway, a relay and a ContextVM client, in plaintext and encrypted,
// interleaved in one run, and reports each per-call latency and its ratio
// to the direct call.
func BenchmarkGatewayOverhead(b *testing.B) {
	ctx := context.Background()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command(demoServer(b))}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()

	r := relaytest.Start(b, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	gw := startBenchGateway(b, r.URL, "per-client")
	plain := benchClient(b, r.URL, gw.Npub, contextvm.EncryptDisabled)
	encrypted := benchClient(b, r.URL, gw.Npub, contextvm.EncryptRequired)

	sessions := []*mcp.ClientSession{direct, plain, encrypted}
	call := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
		if err != nil || res.IsError {
			b.Fatalf("echo: %v", err)
		}
		return time.Since(start)
	}
	for range 20 { // warm every path up: connections, JIT-free but caches and pools
		for _, cs := range sessions {
			call(cs)
		}
	}
	var total [3]time.Duration
	for b.Loop() {
		for i, cs := range sessions {
			total[i] += call(cs)
		}
	}
	per := func(i int) float64 { return float64(total[i].Microseconds()) / float64(b.N) }
	b.ReportMetric(per(0), "direct-µs/call")
	b.ReportMetric(per(1), "gateway-µs/call")
	b.ReportMetric(per(2), "gateway-encrypted-µs/call")
	b.ReportMetric(per(1)/per(0), "ratio")
	b.ReportMetric(per(2)/per(0), "ratio-encrypted")
	b.ReportMetric(0, "ns/op") // an iteration is three calls of different kinds: see the metrics above
}

// sessionsMeasured is how many client sessions BenchmarkGatewaySessionMemory
// opens on top of a warm one.
const sessionsMeasured = 40

// BenchmarkGatewaySessionMemory reports what one more client session costs
// in memory: the resident size of the gateway process and, in per-client
// mode, of its child processes, before and after opening sessionsMeasured
// sessions, and the gateway's Go heap in use. The gateway runs with
// GOGC=10 so that its heap in use stays close to what is live rather than
// to what the next collection will free.
//
// It measures once per run, whatever b.N is: the quantity is a size, not
// a rate.
func BenchmarkGatewaySessionMemory(b *testing.B) {
	for _, mode := range []string{"per-client", "shared"} {
		b.Run(mode, func(b *testing.B) {
			r := relaytest.Start(b, relay.Options{Limits: relay.Limits{EventsPerSecond: -1, ConnectionsPerSecond: -1}})
			gw := startBenchGateway(b, r.URL, mode, "GOGC=10")
			ctx := context.Background()
			echo := func(cs *mcp.ClientSession) {
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
					b.Fatal(err)
				}
			}
			echo(benchClient(b, r.URL, gw.Npub, contextvm.EncryptRequired))
			gwBefore, childrenBefore := settledRSS(b, gw.pid)
			heapBefore := heapInUse(b, gw.Metrics)
			for range sessionsMeasured {
				echo(benchClient(b, r.URL, gw.Npub, contextvm.EncryptRequired))
			}
			gwAfter, childrenAfter := settledRSS(b, gw.pid)
			heapAfter := heapInUse(b, gw.Metrics)
			b.ReportMetric(float64(gwAfter-gwBefore)/sessionsMeasured, "gateway-RSS-KB/session")
			b.ReportMetric(float64(childrenAfter-childrenBefore)/sessionsMeasured, "children-RSS-KB/session")
			b.ReportMetric((heapAfter-heapBefore)/1024/sessionsMeasured, "gateway-heap-KB/session")
			b.ReportMetric(0, "ns/op")
		})
	}
}

type benchGateway struct {
	gatewayReady
	pid int
}

func startBenchGateway(b *testing.B, relayURL, mode string, env ...string) benchGateway {
	b.Helper()
	c := newCLI(b)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		c.env[k] = v
	}
	p := startCVM(b, c, "gateway", "--relay", relayURL, "--session-mode", mode, "--metrics", "127.0.0.1:0",
		"--log-level", "warn", "--", demoServer(b))
	var ready gatewayReady
	p.ReadyLine(b, &ready)
	b.Cleanup(func() { p.Stop(b, syscall.SIGTERM) })
	return benchGateway{ready, p.Cmd.Process.Pid}
}

func benchClient(b *testing.B, relayURL, server string, enc contextvm.EncryptionMode) *mcp.ClientSession {
	b.Helper()
	ctx, cancel := testwait.Context(b, 20*time.Second)
	defer cancel()
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil), contextvm.ClientOptions{
		Server: server, Relays: []string{relayURL}, Encryption: enc, Signer: contextvm.NewKeySigner(nostr.Generate()),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// settledRSS is rssKB once it has stopped changing: the same for 200 ms
// in a row, as the gateway and its children finish what the last call
// started. A size still moving after a minute is taken as it is: the
// benchmark reports, it does not assert.
func settledRSS(b *testing.B, pid int) (self, children int64) {
	b.Helper()
	self, children = rssKB(b, pid)
	since := time.Now()
	testwait.Until(b.Context(), time.Minute, func() bool {
		s, c := rssKB(b, pid)
		if s != self || c != children {
			self, children, since = s, c, time.Now()
		}
		return time.Since(since) >= 200*time.Millisecond
	})
	return self, children
}

// rssKB returns the resident set size of process pid and the sum of its
// children's, in KiB, from /proc.
func rssKB(b *testing.B, pid int) (self, children int64) {
	b.Helper()
	self = statusRSS(b, pid)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid …; comm may contain spaces and parentheses.
		rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			children += statusRSS(b, child)
		}
	}
	return self, children
}

func statusRSS(b *testing.B, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb
		}
	}
	return 0
}

// heapInUse reads go_memstats_heap_inuse_bytes from the gateway's metrics.
func heapInUse(b *testing.B, metricsURL string) float64 {
	b.Helper()
	for _, line := range strings.Split(get(b, metricsURL), "\n") {
		if rest, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	b.Fatal("no go_memstats_heap_inuse_bytes in the gateway's metrics")
	return 0
}
