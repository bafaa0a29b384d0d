// Command cvmbench measures ContextVM tools/call round trips over the
// embedded relay on loopback: cvm's client and server, and the reference
// TypeScript pair (@contextvm/sdk) on the same relay in the same run, each
// plaintext and encrypted, next to the crypto floor measured in the same run.
// It also measures a large result (1 MB by default, sent as CEP-22 fragments)
// for each pair and mode; free and paid calls (CEP-8, Lightning through cvm
// wallet-sim) of cvm's client and cvm gateway, by invoice and over a
// prepaid payment channel, of the reference pair and of the reference client
// and cvm gateway, each peer a process of its own on one cvm relay; and the
// memory of idle client sessions on a cvm server.
//
//	go run ./bench/cvmbench            # from the repository root; make bench
//	go run ./bench/cvmbench -only paid # make bench-pay
//
// These machines are shared and noisy: read the ratios, which compare figures
// taken minutes apart on the same machine, rather than the absolute numbers.
// A figure that could not be taken is reported as not measured, never as a
// number, and the exit status is then 1.
//
// main.go runs the round trips and prints the report; profile.go splits
// their CPU by category; paid.go runs the paid calls, in processes that
// child.go starts and stops, and paidzap.go adds the zap-paid path (a
// gateway with --zap-address) and paiddirect.go the Cashu direct path (a
// gateway with --cashu-mint, over cvm mint-sim); sessions.go measures the
// idle sessions.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
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
	calls     = flag.Int("calls", 200, "sequential calls per measurement")
	clients   = flag.Int("clients", 16, "concurrent clients for the throughput measurement")
	duration  = flag.Duration("duration", 5*time.Second, "length of each throughput measurement")
	large     = flag.Int("large", 1_000_000, "size in bytes of the large result (0 skips it)")
	larges    = flag.Int("large-calls", 5, "sequential calls for the large result")
	paidCalls = flag.Int("paid-calls", 20, "free and paid calls per path through cvm wallet-sim (0 skips them)")
	sessions  = flag.Int("sessions", 10_000, "idle client sessions for the memory measurement (0 skips it)")
	only      = flag.String("only", "", "measure only one part: roundtrips, paid or sessions (default: every part)")
	withTS    = flag.Bool("ts", true, "also measure the reference TypeScript pair (needs make interop-deps)")
	jsonOut   = flag.Bool("json", false, "print the results as JSON")
	cpuprof   = flag.String("cpuprofile", "", "also write the profile of the profiled calls to this file, with the mode before the extension (plaintext, encrypted)")
	profiled  = flag.Int("profile-calls", 1000, "sequential calls under the CPU profiler, for the per-call breakdown (0 skips it)")
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
	Floor           map[string]float64 `json:"crypto_per_second,omitempty"`
	Results         []result           `json:"results,omitempty"`
	Paid            []paidResult       `json:"paid,omitempty"`
	PaidError       string             `json:"paid_error,omitempty"`
	Ratios          map[string]float64 `json:"ratios,omitempty"`
	SessionBytes    float64            `json:"bytes_per_idle_session,omitempty"`
	SessionsCounted int                `json:"sessions,omitempty"`
	SessionsError   string             `json:"sessions_error,omitempty"`
}

// measured reports whether every figure asked for was taken. A large
// result the reference pair cannot send (encrypted, see measureTS) is a
// known limit of the reference, reported with its reason, and does not
// count.
func (rep report) measured() bool {
	for _, r := range rep.Results {
		if r.Error != "" {
			return false
		}
	}
	for _, r := range rep.Paid {
		if r.Error != "" {
			return false
		}
	}
	return rep.PaidError == "" && rep.SessionsError == ""
}

// The parts of a run, in order.
const (
	partRoundTrips = "roundtrips"
	partPaid       = "paid"
	partSessions   = "sessions"
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	parts := map[string]bool{partRoundTrips: true, partPaid: *paidCalls > 0, partSessions: *sessions > 0}
	if *only != "" {
		if !parts[*only] {
			log.Fatalf("-only %q: want %s, %s (with -paid-calls above 0) or %s (with -sessions above 0)", *only, partRoundTrips, partPaid, partSessions)
		}
		for k := range parts {
			parts[k] = k == *only
		}
	}
	root, err := repoRoot()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, root, parts)
	if err != nil {
		log.Fatal(err)
	}
	printReport(os.Stdout, rep)
	if !rep.measured() {
		stop()
		os.Exit(1)
	}
}

// run measures the parts asked for on an embedded relay (the paid calls
// have a cvm relay of their own).
func run(ctx context.Context, root string, parts map[string]bool) (report, error) {
	rep := report{Backend: secp.Backend, Ratios: map[string]float64{}}
	r, err := relay.Start("127.0.0.1:0", relay.Options{Limits: relay.Limits{
		EventsPerSecond: -1, ConnectionsPerSecond: -1, MaxSubscriptions: -1, MaxFilters: -1,
	}})
	if err != nil {
		return rep, err
	}
	defer r.Close()

	if parts[partRoundTrips] {
		rep.Floor = cryptoFloor()
		progressf("crypto backend %s; crypto floor: %.0f sign/s, %.0f verify/s, %.0f ECDH/s", rep.Backend, rep.Floor["sign"], rep.Floor["verify"], rep.Floor["ecdh"])
		roundTrips(ctx, root, r.URL, &rep)
	}
	if parts[partPaid] {
		dir, err := os.MkdirTemp("", "cvmbench-bin-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
		bins, err := buildPaidBinaries(ctx, root, dir)
		if err == nil {
			var ratios map[string]float64
			rep.Paid, ratios, err = measurePaid(ctx, root, bins, *paidCalls)
			for k, v := range ratios {
				rep.Ratios[k] = v
			}
		}
		if err != nil {
			rep.PaidError = err.Error()
			progressf("paid calls: not measured: %v", err)
		}
	}
	if parts[partSessions] {
		progressf("idle sessions: the server's admission limits opened up for the benchmark's throwaway keys (MaxSessions %d, SessionRate unlimited)", *sessions+1)
		b, err := measureSessions(ctx, *sessions, idleSessionOptions(r.URL, *sessions))
		if err != nil {
			rep.SessionsError = err.Error()
			progressf("idle sessions: %v", err)
		} else {
			rep.SessionBytes, rep.SessionsCounted = b, *sessions
			progressf("%d idle sessions: %.1f KiB each", rep.SessionsCounted, rep.SessionBytes/1024)
		}
	}
	return rep, nil
}

// roundTrips measures cvm's pair and the reference pair, plaintext and
// encrypted.
func roundTrips(ctx context.Context, root, relayURL string, rep *report) {
	for _, mode := range []string{"plaintext", "encrypted"} {
		cvm := measureCVM(relayURL, mode)
		rep.Results = append(rep.Results, cvm)
		if cvm.Error != "" {
			progressf("cvm %s: %s", mode, cvm.Error)
		} else {
			progressf("cvm %s: p50 %.2f ms, p99 %.2f ms, %.0f calls/s, large %s", mode, cvm.P50ms, cvm.P99ms, cvm.Throughput, cvm.large())
		}
		if !*withTS {
			continue
		}
		ts := measureTS(ctx, root, relayURL, mode)
		rep.Results = append(rep.Results, ts)
		if ts.Error != "" {
			progressf("ts %s: %s", mode, ts.Error)
			continue
		}
		progressf("ts %s: p50 %.2f ms, p99 %.2f ms, %.0f calls/s", mode, ts.P50ms, ts.P99ms, ts.Throughput)
		if cvm.Error != "" {
			continue
		}
		rep.Ratios["p50_cvm_over_ts_"+mode] = cvm.P50ms / ts.P50ms
		rep.Ratios["throughput_cvm_over_ts_"+mode] = cvm.Throughput / ts.Throughput
		if cvm.LargeMs > 0 && ts.LargeMs > 0 {
			rep.Ratios["large_rate_cvm_over_ts_"+mode] = cvm.LargeMBps / ts.LargeMBps
		}
	}
}

// large is the large result's figure, or why there is none.
func (r result) large() string {
	if r.LargeError != "" {
		return "error: " + r.LargeError
	}
	if r.LargeMs == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.0f ms, %.1f MB/s", r.LargeMs, r.LargeMBps)
}

// buildPaidBinaries builds cvm and the demo server into dir, with this
// benchmark's crypto backend.
func buildPaidBinaries(ctx context.Context, root, dir string) (paidBinaries, error) {
	bins := paidBinaries{CVM: filepath.Join(dir, "cvm"), DemoServer: filepath.Join(dir, "demoserver")}
	for out, pkg := range map[string]string{bins.CVM: "./cmd/cvm", bins.DemoServer: "./examples/demoserver/cmd"} {
		// Tag cvmtest: cvm trusts the loopback Lightning addresses of the
		// zap path (cmd/cvm/outboundtrust_cvmtest.go).
		tags := "cvmtest"
		if secp.Backend == "libsecp256k1" {
			tags += ",libsecp256k1"
		}
		args := []string{"build", "-o", out, "-tags", tags}
		cmd := exec.CommandContext(ctx, goCommand(), append(args, pkg)...)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return bins, fmt.Errorf("building %s: %v\n%s", pkg, err, msg)
		}
	}
	return bins, nil
}

// goCommand is the go command: $GO (as make passes it), else go.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// progressf reports progress on stderr, a line at a time.
func progressf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format, args...)
	fmt.Fprintln(os.Stderr)
}

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
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{relayURL},
		// Every client is a throwaway key, all connecting at once.
		MaxSessions: 100_000, SessionRate: -1,
	})
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

func measureTS(ctx context.Context, root, relayURL, mode string) result {
	res := result{Pair: "ts", Mode: mode}
	server, err := startNode(root, "ts-server.mjs", "RELAY_URL="+relayURL, "ENCRYPTION=optional", "READY_DELAY_MS=0")
	if err != nil {
		res.Error = err.Error() + " (run make interop-deps)"
		return res
	}
	defer server.stop()
	var ready struct{ Pubkey string }
	if err := server.ready(ctx, &ready); err != nil {
		res.Error = err.Error()
		return res
	}
	if err := waitListening(ctx, relayURL, ready.Pubkey); err != nil {
		res.Error = err.Error()
		return res
	}

	enc := "disabled"
	if mode == "encrypted" {
		enc = "required"
	}
	env := []string{"RELAY_URL=" + relayURL, "SERVER_PUBKEY=" + ready.Pubkey, "ENCRYPTION=" + enc}
	var got struct {
		SequentialMs []float64 `json:"sequentialMs"`
		Calls        int       `json:"calls"`
		Seconds      float64   `json:"seconds"`
		Error        string    `json:"error"`
	}
	err = runNode(ctx, root, "ts-bench.mjs", &got, append(env,
		fmt.Sprint("CALLS=", *calls), fmt.Sprint("CLIENTS=", *clients), fmt.Sprint("DURATION_MS=", duration.Milliseconds()))...)
	switch {
	case err != nil:
		res.Error = err.Error()
		return res
	case got.Error != "":
		res.Error = "ts-bench.mjs: " + got.Error
		return res
	case len(got.SequentialMs) != *calls || got.Seconds <= 0:
		res.Error = fmt.Sprintf("ts-bench.mjs timed %d calls of %d and ran %.1f s: not measured", len(got.SequentialMs), *calls, got.Seconds)
		return res
	}
	res.P50ms, res.P99ms = percentile(got.SequentialMs, 0.50), percentile(got.SequentialMs, 0.99)
	res.Throughput = float64(got.Calls) / got.Seconds
	if *large > 0 {
		var blob struct {
			BlobMs []float64 `json:"blobMs"`
			Error  string    `json:"error"`
		}
		err := runNode(ctx, root, "ts-bench.mjs", &blob, append(env,
			fmt.Sprint("BLOB_SIZE=", *large), fmt.Sprint("BLOB_CALLS=", *larges), "TIMEOUT_MS=20000")...)
		if err != nil || blob.Error != "" || len(blob.BlobMs) == 0 {
			// Encrypted, @contextvm/sdk 0.11.14 never answers: it encrypts
			// the whole result to measure it and NIP-44 refuses more than
			// 65,535 bytes (pinned in interop's TestOversizedInterop).
			res.LargeError = firstLine(fmt.Sprintf("%s %v", blob.Error, err))
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

// waitListening returns once the relay has a live subscription for pubkey
// (it answers "mute" to an event nobody listens for): the reference server
// reports ready before its subscription is live.
func waitListening(ctx context.Context, relayURL, pubkey string) error {
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	defer pool.Close()
	probe := nostr.Generate()
	var err error
	for range 200 {
		evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", pubkey}}, Content: "{}"}
		evt.Sign(probe)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = pool.Publish(pctx, evt)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("nobody listens for %s on the relay: %w", pubkey, err)
	}
	return nil
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

// printReport writes the report: as JSON with -json, else as tables.
func printReport(w io.Writer, rep report) {
	if *jsonOut {
		json.NewEncoder(w).Encode(rep)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	if rep.Floor != nil {
		fmt.Fprintf(tw, "crypto floor (this run)\tsign %.0f/s\tverify %.0f/s\tECDH %.0f/s\n\n", rep.Floor["sign"], rep.Floor["verify"], rep.Floor["ecdh"])
	}
	if len(rep.Results) > 0 {
		fmt.Fprintf(tw, "PAIR\tMODE\tP50\tP99\tTHROUGHPUT (%d clients)\t%d-BYTE RESULT\n", *clients, *large)
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\tnot measured: %s\n", r.Pair, r.Mode, r.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f ms\t%.2f ms\t%.0f calls/s\t%s\n", r.Pair, r.Mode, r.P50ms, r.P99ms, r.Throughput, r.large())
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
	if rep.PaidError != "" {
		fmt.Fprintf(tw, "\nfree and paid calls\tnot measured: %s\n", rep.PaidError)
	}
	if len(rep.Paid) > 0 {
		fmt.Fprintf(tw, "\nfree and paid calls, %d of each per path (echo free, add %d sat paid through cvm wallet-sim)\n", rep.Paid[0].Calls, price)
		fmt.Fprintf(tw, "PATH\tFREE P50\tP90\tPAID P50\tP90\tPAID/FREE\n")
	}
	for _, r := range rep.Paid {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\tnot measured: %s\n", r.Path, r.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f\n", r.Path, r.FreeP50ms, r.FreeP90ms, r.PaidP50ms, r.PaidP90ms, r.PaidOverFree)
	}
	if len(rep.Ratios) > 0 {
		fmt.Fprintln(tw)
		for _, k := range slices.Sorted(maps.Keys(rep.Ratios)) {
			fmt.Fprintf(tw, "%s\t%.3f\n", strings.ReplaceAll(k, "_", " "), rep.Ratios[k])
		}
	}
	switch {
	case rep.SessionsError != "":
		fmt.Fprintf(tw, "\nidle sessions\t%s\n", rep.SessionsError)
	case rep.SessionsCounted > 0:
		fmt.Fprintf(tw, "\nidle sessions\t%d\t%.1f KiB each (server heap and stacks)\n", rep.SessionsCounted, rep.SessionBytes/1024)
	}
}
