// Command cvmbench measures ContextVM tools/call round trips over the
// embedded relay on loopback: cvm's client and server, and the reference
// TypeScript pair (@contextvm/sdk) on the same relay in the same run, each
// plaintext and encrypted, next to the crypto floor measured in the same run.
// It also measures a large result (1 MB by default, sent as CEP-22 fragments)
// for each pair and mode, and the memory of idle client sessions on a cvm
// server.
//
//	go run ./bench/cvmbench            # from the repository root; make bench
//
// These machines are shared and noisy: read the ratios, which compare figures
// taken minutes apart on the same machine, rather than the absolute numbers.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/secp"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	calls    = flag.Int("calls", 200, "sequential calls per measurement")
	clients  = flag.Int("clients", 16, "concurrent clients for the throughput measurement")
	duration = flag.Duration("duration", 5*time.Second, "length of each throughput measurement")
	large    = flag.Int("large", 1_000_000, "size in bytes of the large result (0 skips it)")
	larges   = flag.Int("large-calls", 5, "sequential calls for the large result")
	sessions = flag.Int("sessions", 10_000, "idle client sessions for the memory measurement (0 skips it)")
	withTS   = flag.Bool("ts", true, "also measure the reference TypeScript pair (needs make interop-deps)")
	jsonOut  = flag.Bool("json", false, "print the results as JSON")
	cpuprof  = flag.String("cpuprofile", "", "also write the profile of the profiled calls to this file, with the mode before the extension (plaintext, encrypted)")
	profiled = flag.Int("profile-calls", 1000, "sequential calls under the CPU profiler, for the per-call breakdown (0 skips it)")
)

// result is one pair measured in one mode.
type result struct {
	Pair       string  `json:"pair"`
	Mode       string  `json:"mode"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	Throughput float64 `json:"calls_per_second"`
	// LargeMs is the median time of a call returning *large bytes, and
	// LargeMBps the rate it moves them at.
	LargeMs    float64 `json:"large_ms,omitempty"`
	LargeMBps  float64 `json:"large_mb_per_second,omitempty"`
	LargeError string  `json:"large_error,omitempty"`
	Error      string  `json:"error,omitempty"`
	// CPU is cvm's CPU per sequential call (client, relay and server, all
	// in this process) split by category, from a profile of its own calls.
	CPU *breakdown `json:"cpu,omitempty"`
}

func (r *result) setLarge(ms []float64) {
	r.LargeMs = percentile(ms, 0.5)
	r.LargeMBps = float64(*large) / 1e6 / (r.LargeMs / 1000)
}

type report struct {
	Backend         string             `json:"crypto_backend"`
	Floor           map[string]float64 `json:"crypto_per_second"`
	Results         []result           `json:"results"`
	Ratios          map[string]float64 `json:"ratios,omitempty"`
	SessionBytes    float64            `json:"bytes_per_idle_session,omitempty"`
	SessionsCounted int                `json:"sessions,omitempty"`
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	root, err := repoRoot()
	if err != nil {
		log.Fatal(err)
	}
	r, err := relay.Start("127.0.0.1:0", relay.Options{Limits: relay.Limits{
		EventsPerSecond: -1, ConnectionsPerSecond: -1, MaxSubscriptions: -1, MaxFilters: -1,
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	rep := report{Backend: secp.Backend, Floor: cryptoFloor(), Ratios: map[string]float64{}}
	progress("crypto backend %s; crypto floor: %.0f sign/s, %.0f verify/s, %.0f ECDH/s", rep.Floor["sign"], rep.Floor["verify"], rep.Floor["ecdh"])
	for _, mode := range []string{"plaintext", "encrypted"} {
		cvm := measureCVM(r.URL, mode)
		rep.Results = append(rep.Results, cvm)
		progress("cvm %s: p50 %.2f ms, p99 %.2f ms, %.0f calls/s, large %.1f MB/s %s", mode, cvm.P50ms, cvm.P99ms, cvm.Throughput, cvm.LargeMBps, cvm.LargeError)
		if *withTS {
			ts := measureTS(root, r.URL, mode)
			rep.Results = append(rep.Results, ts)
			if ts.Error != "" {
				progress("ts %s: %s", mode, ts.Error)
				continue
			}
			progress("ts %s: p50 %.2f ms, p99 %.2f ms, %.0f calls/s", mode, ts.P50ms, ts.P99ms, ts.Throughput)
			rep.Ratios["p50_cvm_over_ts_"+mode] = cvm.P50ms / ts.P50ms
			rep.Ratios["throughput_cvm_over_ts_"+mode] = cvm.Throughput / ts.Throughput
			if cvm.LargeMs > 0 && ts.LargeMs > 0 {
				rep.Ratios["large_rate_cvm_over_ts_"+mode] = cvm.LargeMBps / ts.LargeMBps
			}
		}
	}
	if *sessions > 0 {
		rep.SessionBytes, rep.SessionsCounted = measureSessions(r.URL, *sessions)
		progress("%d idle sessions: %.1f KiB each", rep.SessionsCounted, rep.SessionBytes/1024)
	}
	print(rep)
}

func progress(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// repoRoot finds the module root, where interop/ lives.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run cvmbench inside the cvm repository")
		}
		dir = parent
	}
}

// cryptoFloor measures what every message costs at least: a signature, a
// verification, and (encrypted) a key agreement.
func cryptoFloor() map[string]float64 {
	sk := nostr.Generate()
	evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", sk.Public().Hex()}},
		Content: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench"}}}`}
	rate := func(f func()) float64 {
		n, start := 0, time.Now()
		for time.Since(start) < time.Second {
			f()
			n++
		}
		return float64(n) / time.Since(start).Seconds()
	}
	other := nostr.Generate().Public()
	return map[string]float64{
		"sign":   rate(func() { evt.Sign(sk) }),
		"verify": rate(func() { evt.VerifySignature() }),
		"ecdh":   rate(func() { secp.ConversationKey(other, sk) }),
	}
}

func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text}}}, nil, nil
	})
	type sizeIn struct {
		Size int `json:"size"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "blob"}, func(ctx context.Context, req *mcp.CallToolRequest, args sizeIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", args.Size)}}}, nil, nil
	})
	return s
}

func clientMode(mode string) contextvm.EncryptionMode {
	if mode == "plaintext" {
		return contextvm.EncryptDisabled
	}
	return contextvm.EncryptRequired
}

func measureCVM(relayURL, mode string) result {
	res := result{Pair: "cvm", Mode: mode}
	ctx := context.Background()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{relayURL}, MaxSessions: 100_000})
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer srv.Close()
	go srv.Serve(ctx, echoServer())
	connect := func() (*mcp.ClientSession, error) {
		return contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil), contextvm.ClientOptions{
			Server: srv.PublicKey().Hex(), Relays: []string{relayURL}, Encryption: clientMode(mode), Signer: contextvm.NewKeySigner(nostr.Generate()),
		})
	}
	echo := func(cs *mcp.ClientSession) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}})
		return err
	}
	one, err := connect()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	for range 5 {
		echo(one)
	}
	var lat []float64
	for range *calls {
		t0 := time.Now()
		if err := echo(one); err != nil {
			res.Error = err.Error()
			return res
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
	}
	res.P50ms, res.P99ms = percentile(lat, 0.50), percentile(lat, 0.99)
	if *profiled > 0 {
		b, err := profileCPU(*profiled, profileFile(mode), func() error {
			for range *profiled {
				if err := echo(one); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			res.Error = "profile: " + err.Error()
			return res
		}
		res.CPU = &b
	}
	if *large > 0 {
		var ms []float64
		for range *larges {
			t0 := time.Now()
			got, err := one.CallTool(ctx, &mcp.CallToolParams{Name: "blob", Arguments: map[string]any{"size": *large}})
			if err == nil && len(got.Content[0].(*mcp.TextContent).Text) != *large {
				err = fmt.Errorf("blob: %d bytes, want %d", len(got.Content[0].(*mcp.TextContent).Text), *large)
			}
			if err != nil {
				res.LargeError = err.Error()
				break
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
		}
		if res.LargeError == "" {
			res.setLarge(ms)
		}
	}
	one.Close()

	var many []*mcp.ClientSession
	for range *clients {
		cs, err := connect()
		if err != nil {
			res.Error = err.Error()
			return res
		}
		defer cs.Close()
		echo(cs)
		many = append(many, cs)
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(*duration)
	for _, cs := range many {
		wg.Go(func() {
			for time.Now().Before(end) {
				if echo(cs) == nil {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res.Throughput = float64(done.Load()) / time.Since(start).Seconds()
	return res
}

func measureTS(root, relayURL, mode string) result {
	res := result{Pair: "ts", Mode: mode}
	node := func(script string, env ...string) *exec.Cmd {
		cmd := exec.Command("node", filepath.Join(root, "interop", "js", script))
		cmd.Dir = filepath.Join(root, "interop")
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}
	server := node("ts-server.mjs", "RELAY_URL="+relayURL, "ENCRYPTION=optional", "READY_DELAY_MS=0")
	stdout, _ := server.StdoutPipe()
	server.Stderr = os.Stderr
	if err := server.Start(); err != nil {
		res.Error = "starting the TS server: " + err.Error() + " (run make interop-deps)"
		return res
	}
	defer func() { server.Process.Signal(os.Interrupt); server.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var ready struct{ Pubkey string }
	if err != nil || json.Unmarshal([]byte(line), &ready) != nil {
		res.Error = fmt.Sprintf("TS server not ready: %q %v", line, err)
		return res
	}
	waitListening(relayURL, ready.Pubkey)

	enc := "disabled"
	if mode == "encrypted" {
		enc = "required"
	}
	client := node("ts-bench.mjs", "RELAY_URL="+relayURL, "SERVER_PUBKEY="+ready.Pubkey, "ENCRYPTION="+enc,
		fmt.Sprint("CALLS=", *calls), fmt.Sprint("CLIENTS=", *clients), fmt.Sprint("DURATION_MS=", duration.Milliseconds()))
	client.Stderr = os.Stderr
	out, err := client.Output()
	var got struct {
		SequentialMs []float64 `json:"sequentialMs"`
		Calls        int       `json:"calls"`
		Seconds      float64   `json:"seconds"`
		Error        string    `json:"error"`
	}
	if jerr := json.Unmarshal(out, &got); jerr != nil || got.Error != "" {
		res.Error = fmt.Sprintf("TS bench client: %v %s %v", err, got.Error, jerr)
		return res
	}
	res.P50ms, res.P99ms = percentile(got.SequentialMs, 0.50), percentile(got.SequentialMs, 0.99)
	res.Throughput = float64(got.Calls) / got.Seconds
	if *large > 0 {
		client := node("ts-bench.mjs", "RELAY_URL="+relayURL, "SERVER_PUBKEY="+ready.Pubkey, "ENCRYPTION="+enc,
			fmt.Sprint("BLOB_SIZE=", *large), fmt.Sprint("BLOB_CALLS=", *larges), "TIMEOUT_MS=20000")
		out, err := client.Output()
		var blob struct {
			BlobMs []float64 `json:"blobMs"`
			Error  string    `json:"error"`
		}
		if jerr := json.Unmarshal(out, &blob); jerr != nil || blob.Error != "" || len(blob.BlobMs) == 0 {
			// Encrypted, @contextvm/sdk 0.11.14 never answers: it encrypts
			// the whole result to measure it and NIP-44 refuses more than
			// 65,535 bytes (pinned in interop's TestOversizedInterop).
			res.LargeError = firstLine(fmt.Sprintf("%s %v %v", blob.Error, err, jerr))
		} else {
			res.setLarge(blob.BlobMs)
		}
	}
	return res
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// waitListening returns once the relay has a live subscription for pubkey:
// the reference server reports ready before its subscription is live.
func waitListening(relayURL, pubkey string) {
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	defer pool.Close()
	probe := nostr.Generate()
	for range 200 {
		evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", pubkey}}, Content: "{}"}
		evt.Sign(probe)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := pool.Publish(ctx, evt)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measureSessions opens n idle client sessions on a cvm server, each by an
// initialize from its own key, and returns the heap and stack the server
// holds per session.
func measureSessions(relayURL string, n int) (float64, int) {
	ctx := context.Background()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{relayURL},
		Encryption: contextvm.EncryptDisabled, MaxSessions: n + 1, IdleTimeout: -1,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	go srv.Serve(ctx, echoServer())

	// A listener for every answer, so that none is unheard (and retried).
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	defer pool.Close()
	answers := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage}, Authors: []nostr.PubKey{srv.PublicKey()}}, 4096)
	<-answers.Ready()
	var answered atomic.Int64
	go func() {
		for range answers.Events() {
			answered.Add(1)
		}
	}()
	events := make([]nostr.Event, n)
	for i := range events {
		events[i] = nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", srv.PublicKey().Hex()}},
			Content: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"idle","version":"0"}}}`, i)}
		events[i].Sign(nostr.Generate())
	}
	before := heapAndStacks()
	jobs := make(chan nostr.Event)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for evt := range jobs {
				pool.Publish(ctx, evt)
			}
		})
	}
	for _, evt := range events {
		jobs <- evt
	}
	close(jobs)
	wg.Wait()
	deadline := time.Now().Add(2 * time.Minute)
	for (srv.Sessions() < n || answered.Load() < int64(n)) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	events = nil
	after := heapAndStacks()
	got := srv.Sessions()
	if got == 0 {
		return 0, 0
	}
	return float64(after-before) / float64(got), got
}

func heapAndStacks() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func print(rep report) {
	if *jsonOut {
		json.NewEncoder(os.Stdout).Encode(rep)
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "crypto floor (this run)\tsign %.0f/s\tverify %.0f/s\tECDH %.0f/s\n\n", rep.Floor["sign"], rep.Floor["verify"], rep.Floor["ecdh"])
	fmt.Fprintf(tw, "PAIR\tMODE\tP50\tP99\tTHROUGHPUT (%d clients)\t%d-BYTE RESULT\n", *clients, *large)
	for _, r := range rep.Results {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\terror: %s\n", r.Pair, r.Mode, r.Error)
			continue
		}
		big := fmt.Sprintf("%.0f ms, %.1f MB/s", r.LargeMs, r.LargeMBps)
		if r.LargeError != "" {
			big = "error: " + r.LargeError
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f ms\t%.2f ms\t%.0f calls/s\t%s\n", r.Pair, r.Mode, r.P50ms, r.P99ms, r.Throughput, big)
	}
	for _, r := range rep.Results {
		if r.CPU == nil {
			continue
		}
		fmt.Fprintf(tw, "\n%s %s CPU per call (%s)\t%.0f µs\n", r.Pair, r.Mode, rep.Backend, r.CPU.CPUPerCallUs)
		for _, c := range breakdownOrder {
			fmt.Fprintf(tw, "  %s\t%.0f µs\t%.0f%%\n", c, r.CPU.Us[c], 100*r.CPU.Us[c]/r.CPU.CPUPerCallUs)
		}
	}
	if len(rep.Ratios) > 0 {
		fmt.Fprintln(tw)
		keys := make([]string, 0, len(rep.Ratios))
		for k := range rep.Ratios {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%.3f\n", strings.ReplaceAll(k, "_", " "), rep.Ratios[k])
		}
	}
	if rep.SessionsCounted > 0 {
		fmt.Fprintf(tw, "\nidle sessions\t%d\t%.1f KiB each (server heap and stacks)\n", rep.SessionsCounted, rep.SessionBytes/1024)
	}
	tw.Flush()
}
