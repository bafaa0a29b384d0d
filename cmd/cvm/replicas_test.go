package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replicaGroup is cvm gateway processes serving one key through one NATS.
type replicaGroup struct {
	t       *testing.T
	c       *cli
	relay   string
	nats    string
	logPath string
	procs   []*proc
	ready   []gatewayHTTPReady // HTTP and DID set with --http
}

// start runs one more replica, named name, in front of the exec-log server.
func (g *replicaGroup) start(name string, extra ...string) {
	g.t.Helper()
	g.startVia(name, g.nats, extra...)
}

// startVia is start with the replica reaching NATS at natsURL (a proxy).
func (g *replicaGroup) startVia(name, natsURL string, extra ...string) {
	g.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		g.t.Fatal(err)
	}
	args := append([]string{"gateway", "--relay", g.relay, "--nats", natsURL, "--replica-name", name,
		"--membership-timeout", "3s", "--metrics", "127.0.0.1:0", "-e", execLogEnv + "=" + g.logPath}, extra...)
	// The same home (so the same identity), and the replica's name for
	// the upstream it starts.
	c := &cli{t: g.c.t, cfg: g.c.cfg, env: map[string]string{execReplicaEnv: name}}
	for k, v := range g.c.env {
		c.env[k] = v
	}
	p := startCVM(g.t, c, append(args, "--", exe)...)
	var ready gatewayHTTPReady
	p.ReadyLine(g.t, &ready)
	g.procs = append(g.procs, p)
	g.ready = append(g.ready, ready)
	if _, body := g.health(len(g.ready) - 1); body["group"].(map[string]any)["member"] != name {
		g.t.Fatalf("healthz of %s: %v", name, body)
	}
}

// health reads a replica's /healthz.
func (g *replicaGroup) health(i int) (int, map[string]any) {
	resp, err := http.Get(strings.TrimSuffix(g.ready[i].Metrics, "/metrics") + "/healthz")
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// awaitMembers waits until replica i sees n live members and is ready.
func (g *replicaGroup) awaitMembers(i, n int) {
	g.t.Helper()
	var code int
	var body map[string]any
	if !testwait.Until(g.t.Context(), 20*time.Second, func() bool {
		code, body = g.health(i)
		grp, _ := body["group"].(map[string]any)
		members, _ := grp["members"].(map[string]any)
		return code == 200 && len(members) == n
	}) {
		g.t.Fatalf("replica %d: want %d members, healthz %d %v", i, n, code, body)
	}
}

// groupStatus is replica i's /healthz status code and its group view.
func (g *replicaGroup) groupStatus(i int) (int, map[string]any) {
	code, body := g.health(i)
	grp, _ := body["group"].(map[string]any)
	return code, grp
}

// awaitGroup waits until replica i's /healthz status code and group view
// satisfy ok.
func (g *replicaGroup) awaitGroup(i int, what string, ok func(code int, grp map[string]any) bool) {
	g.t.Helper()
	var code int
	var grp map[string]any
	if !testwait.Until(g.t.Context(), 20*time.Second, func() bool {
		code, grp = g.groupStatus(i)
		return ok(code, grp)
	}) {
		g.t.Fatalf("replica %d: not %s in %v: healthz %d, group %v", i, what, testwait.Timeout(20*time.Second), code, grp)
	}
}

// clientOn connects clients until one's first call, "cN-0", runs on
// replica, and returns that client and its name, cN; next numbers the
// clients from one call to the next. The others are closed with the test.
func (g *replicaGroup) clientOn(ctx context.Context, replica string, next *int) (*mcp.ClientSession, string) {
	g.t.Helper()
	for tries := 0; tries < 40; tries++ {
		id := fmt.Sprintf("c%d", *next)
		*next++
		cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: id}, nil),
			contextvm.ClientOptions{Server: g.ready[0].Pubkey, Relays: []string{g.relay}, Signer: contextvm.NewKeySigner(nostr.Generate()), RequestTimeout: 30 * time.Second})
		if err != nil {
			g.t.Fatal(err)
		}
		g.t.Cleanup(func() { cs.Close() })
		if err := callWork(ctx, cs, id+"-0", 0); err != nil {
			g.t.Fatal(err)
		}
		if on := placements(g.t, g.logPath)[id]; len(on) == 1 && on[0] == replica {
			return cs, id
		}
	}
	g.t.Fatalf("40 clients, none served by %s", replica)
	return nil, ""
}

// callWork calls the exec-log server's work tool.
func callWork(ctx context.Context, cs *mcp.ClientSession, rid string, delayMS int) error {
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"rid": rid, "delay_ms": delayMS}})
	return err
}

// executions counts the lines of the exec log.
func executions(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rid, _, _ := strings.Cut(sc.Text(), " ")
		n[rid]++
	}
	return n
}

// placements reads the exec log as, for each client, the replicas its
// calls ran on, in the order of its calls.
func placements(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		n  int
		on string
	}
	byClient := map[string][]run{}
	for line := range strings.Lines(string(b)) {
		rid, on, _ := strings.Cut(strings.TrimSpace(line), " ")
		client, n, ok := strings.Cut(rid, "-")
		if !ok || !strings.HasPrefix(client, "c") {
			continue
		}
		var i int
		fmt.Sscan(n, &i)
		byClient[client] = append(byClient[client], run{i, on})
	}
	out := map[string][]string{}
	for client, runs := range byClient {
		slices.SortFunc(runs, func(a, b run) int { return a.n - b.n })
		for _, r := range runs {
			out[client] = append(out[client], r.on)
		}
	}
	return out
}

// runningOn returns a request id the exec log shows starting on replica
// after its first from bytes, and not answered yet, by answered: a call
// that has just started and has its whole delay to run.
func runningOn(path string, from int, replica string, answered func(rid string) bool) (string, bool) {
	b, _ := os.ReadFile(path)
	if len(b) < from {
		return "", false
	}
	for line := range strings.Lines(string(b[from:])) {
		rid, on, _ := strings.Cut(strings.TrimSpace(line), " ")
		if on == replica && strings.HasPrefix(rid, "c") && !answered(rid) {
			return rid, true
		}
	}
	return "", false
}

// falseDeaths says which replica declared which other dead while it was
// alive, as their logs show ("" if none did): any loss but r0's, any loss
// seen by r0 (it was killed, not lost), or r0 lost more than once by a
// survivor (it was taken for dead, came back, then was killed).
func falseDeaths(g *replicaGroup) string {
	const lostMsg = `msg="replica lost: its clients move"`
	var out []string
	for i, p := range g.procs {
		seen := 0
		for line := range strings.Lines(p.Stderr.String()) {
			if !strings.Contains(line, lostMsg) {
				continue
			}
			member := ""
			for f := range strings.FieldsSeq(line) {
				if v, ok := strings.CutPrefix(f, "member="); ok {
					member = v
				}
			}
			if member == "r0" {
				seen++
			}
			if i == 0 || member != "r0" || seen > 1 {
				out = append(out, fmt.Sprintf("r%d declared %s dead", i, member))
			}
		}
	}
	return strings.Join(out, "; ")
}

func errorCode(err error) int64 {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr.Code
	}
	return 0
}

// Three cvm gateway processes serve one key as a replica group on an
// embedded JetStream NATS, in front of a stdio server that logs every
// execution. 20 clients make 12 calls each (240, 150 ms of work each); one
// replica is killed with SIGKILL once 80 calls are answered. Then NATS is
// stopped and started again, and the reference TypeScript client is
// served by the group.
func TestGatewayReplicas_KillNineMidRun(t *testing.T) {
	const (
		clients = 20
		calls   = 12
		delayMS = 150
		killAt  = 80
	)
	ns := natstest.Start(t)
	r := relaytest.Start(t, relay.Options{})
	g := &replicaGroup{t: t, c: newCLI(t), relay: r.URL, nats: ns.URL(), logPath: filepath.Join(t.TempDir(), "exec.log")}
	// The first creates the identity the others share.
	for _, name := range []string{"r0", "r1", "r2"} {
		g.start(name)
	}
	for i := range 3 {
		g.awaitMembers(i, 3)
	}
	server := g.ready[0].Pubkey

	ctx, cancel := testwait.Context(t, 90*time.Second)
	defer cancel()
	sessions := make([]*mcp.ClientSession, clients)
	for i := range clients {
		cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("c%d", i)}, nil),
			contextvm.ClientOptions{Server: server, Relays: []string{r.URL}, Signer: contextvm.NewKeySigner(nostr.Generate()), RequestTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		sessions[i] = cs
	}

	var (
		answered, inflight atomic.Int64
		killed             = make(chan struct{})
		killOnce           sync.Once
		inflightAtKill     int64
		mu                 sync.Mutex
		ok                 = map[string]bool{}
		failed             = map[string]int64{} // rid -> code
		nextAfterFailure   = map[int]bool{}     // client -> its call after a failure succeeded
	)
	kill := func() {
		killOnce.Do(func() {
			inflightAtKill = inflight.Load()
			g.procs[0].Kill()
			close(killed)
		})
	}
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Go(func() {
			hadFailure := false
			for n := range calls {
				rid := fmt.Sprintf("c%d-%d", i, n)
				inflight.Add(1)
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"rid": rid, "delay_ms": delayMS}})
				inflight.Add(-1)
				mu.Lock()
				if err != nil {
					failed[rid] = errorCode(err)
					if code := errorCode(err); code != contextvm.CodeReplicaLost && code != contextvm.CodeReplicaUnavailable {
						t.Errorf("%s: %v", rid, err)
					}
					hadFailure = true
				} else {
					ok[rid] = true
					if hadFailure {
						nextAfterFailure[i] = true
						hadFailure = false
					}
				}
				mu.Unlock()
				if answered.Add(1) == killAt {
					// Killed while a call of one of its clients runs in
					// its upstream (the exec log says so).
					wg.Go(func() {
						seen, _ := os.ReadFile(g.logPath)
						testwait.Until(ctx, 10*time.Second, func() bool {
							rid, ok := runningOn(g.logPath, len(seen), "r0", func(rid string) bool {
								mu.Lock()
								defer mu.Unlock()
								_, failed := failed[rid]
								return ok[rid] || failed
							})
							if ok {
								t.Logf("killing r0 while %s runs there", rid)
							}
							return ok
						})
						kill()
					})
				}
			}
			if hadFailure {
				t.Errorf("client %d: its last call failed and none followed", i)
			}
		})
	}
	wg.Wait()
	<-killed
	if t.Failed() {
		for i := 1; i < 3; i++ {
			t.Logf("replica %d stderr:\n%s", i, g.procs[i].Stderr)
		}
	}
	g.awaitMembers(1, 2)
	g.awaitMembers(2, 2)

	runs := executions(t, g.logPath)
	var executed int
	for rid, n := range runs {
		if !strings.HasPrefix(rid, "c") {
			continue
		}
		executed++
		if n > 1 {
			t.Errorf("%s executed %d times", rid, n)
		}
	}
	for rid := range ok {
		if runs[rid] != 1 {
			t.Errorf("%s answered but executed %d times", rid, runs[rid])
		}
	}
	if d := executed - len(ok); int64(d) > inflightAtKill || d < 0 {
		t.Errorf("executions %d - answers %d = %d, more than the %d calls in flight at the kill", executed, len(ok), d, inflightAtKill)
	}
	if len(ok)+len(failed) != clients*calls {
		t.Errorf("%d answered + %d failed != %d calls", len(ok), len(failed), clients*calls)
	}
	t.Logf("%d calls: %d answered, %d failed (%v), %d executed, %d in flight at the kill; %d clients failed over by an error",
		clients*calls, len(ok), len(failed), failed, executed, inflightAtKill, len(nextAfterFailure))
	// Affinity: a client's calls ran on one replica while it lived; only
	// the killed replica's clients moved, each once, to one survivor. A
	// replica unheard for the membership timeout under load is "dead" to
	// the others even if it is not; then its clients move too. So the
	// check is strict unless the replicas' logs prove such a false death,
	// and only logged then.
	falseDeath := falseDeaths(g)
	for i := 1; i < 3; i++ {
		_, body := g.health(i)
		grp, _ := body["group"].(map[string]any)
		if n, _ := grp["members_lost"].(float64); n != 1 && falseDeath == "" {
			t.Errorf("replica r%d counts %v members lost, its log none but r0: %v", i, n, grp)
		}
	}
	affinity := t.Errorf
	if falseDeath != "" {
		t.Logf("affinity only logged: %s", falseDeath)
		affinity = t.Logf
	}
	for client, on := range placements(t, g.logPath) {
		moves := 0
		for i := 1; i < len(on); i++ {
			if on[i] != on[i-1] {
				moves++
				if on[i-1] != "r0" {
					affinity("client %s moved from live replica %s: %v", client, on[i-1], on)
				}
			}
		}
		if moves > 1 {
			affinity("client %s moved %d times: %v", client, moves, on)
		}
	}
	var lost int
	for _, code := range failed {
		if code == contextvm.CodeReplicaLost {
			lost++
		}
	}
	if lost == 0 {
		t.Errorf("no call in flight on the killed replica was answered %d", contextvm.CodeReplicaLost)
	}
	for i := 1; i < 3; i++ {
		_, body := g.health(i)
		t.Logf("replica %d: %v", i, body["group"])
	}

	// Every replica cut off: a call is held, neither run uncoordinated
	// nor refused (no replica can know that another will not run it);
	// once NATS is back, it runs once, or, held too long, is claimed and
	// refused with -32018 and never runs. Then calls succeed again.
	held := func() (n float64) {
		for i := 1; i < 3; i++ {
			_, grp := g.groupStatus(i)
			v, _ := grp["held"].(float64)
			n += v
		}
		return n
	}
	heldBefore := held()
	ns.Stop()
	for i := 1; i < 3; i++ {
		g.awaitGroup(i, "cut off", func(code int, _ map[string]any) bool { return code != 200 })
	}
	cutOff := make(chan error, 1)
	go func() { cutOff <- callWork(ctx, sessions[0], "cut-off", 0) }()
	testwait.Eventually(t, 20*time.Second, "a replica holding the call made with NATS down", func() bool { return held() != heldBefore })
	ns.Restart()
	err := <-cutOff
	for i := 1; i < 3; i++ {
		g.awaitMembers(i, 2)
	}
	if err := callWork(ctx, sessions[0], "back", 0); err != nil {
		t.Fatalf("call after NATS came back: %v", err)
	}
	switch runs := executions(t, g.logPath); {
	case err == nil && runs["cut-off"] == 1:
		t.Log("the call held while NATS was down ran once NATS was back")
	case errorCode(err) == contextvm.CodeReplicaUnavailable && runs["cut-off"] == 0:
		t.Log("the call held while NATS was down was held too long, and refused")
	default:
		t.Errorf("call held while NATS was down: %v, and it ran %d times", err, runs["cut-off"])
	}
	if runs := executions(t, g.logPath); runs["back"] != 1 {
		t.Errorf("executions: back %d", runs["back"])
	}

	// The reference SDK's client, served by the group unchanged.
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH")
	}
	code, out, stderr := cvmtest.Run(t, node, cvmtest.Options{Env: append(os.Environ(), "RELAY_URL="+r.URL, "SERVER_PUBKEY="+server)}, "../../interop/js/ts-client.mjs")
	var res struct {
		OK   bool   `json:"ok"`
		Echo string `json:"echo"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.OK || res.Echo != "héllo 🌍" {
		t.Fatalf("reference client: exit %d, %v %s (stderr: %s)", code, err, out, stderr)
	}
}

// NATS unreachable at start: a clear error and exit 2, before serving.
func TestGatewayReplicas_NATSUnreachableExits2(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	code, out, errOut := c.run("gateway", "--relay", r.URL, "--nats", "nats://127.0.0.1:1", "--", demoServer(t))
	if code != 2 || out != "" || !strings.Contains(errOut, "--nats") || !strings.Contains(errOut, "unreachable") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Two replicas in shared session mode: each serves its clients through
// one upstream session of its own. When one is killed, its call in flight
// is answered -32019 by the other, which then serves its clients through
// its own shared upstream (sessions rebuilt, no re-initialize by the
// client); the other replica's clients notice nothing, and nothing runs
// twice.
func TestGatewayReplicas_SharedSessionMode(t *testing.T) {
	ns := natstest.Start(t)
	r := relaytest.Start(t, relay.Options{})
	g := &replicaGroup{t: t, c: newCLI(t), relay: r.URL, nats: ns.URL(), logPath: filepath.Join(t.TempDir(), "exec.log")}
	for _, name := range []string{"r0", "r1"} {
		g.start(name, "--session-mode", "shared", "--membership-timeout", "2s")
	}
	g.awaitMembers(0, 2)
	g.awaitMembers(1, 2)
	if _, body := g.health(0); body["mode"] != "shared" || body["upstream"] != "up" {
		t.Fatalf("healthz %v; want mode shared, upstream up", body)
	}
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	work := func(cs *mcp.ClientSession, rid string, delayMS int) error { return callWork(ctx, cs, rid, delayMS) }
	// A client on each replica: victim on r0, bystander on r1.
	var next int
	victim, victimID := g.clientOn(ctx, "r0", &next)
	bystander, bystanderID := g.clientOn(ctx, "r1", &next)
	seen, _ := os.ReadFile(g.logPath)
	victimErr, bystanderErr := make(chan error, 1), make(chan error, 1)
	go func() { victimErr <- work(victim, victimID+"-1", 5000) }()
	go func() { bystanderErr <- work(bystander, bystanderID+"-1", 500) }()
	testwait.Eventually(t, 10*time.Second, "the victim's call starting on r0", func() bool {
		_, ok := runningOn(g.logPath, len(seen), "r0", func(string) bool { return false })
		return ok
	})
	g.procs[0].Kill()
	if err := <-bystanderErr; err != nil {
		t.Errorf("the other replica's client: %v", err)
	}
	if err := <-victimErr; errorCode(err) != contextvm.CodeReplicaLost {
		t.Fatalf("call in flight on the killed replica: %v; want %d", err, contextvm.CodeReplicaLost)
	}
	if err := work(victim, victimID+"-2", 0); err != nil {
		t.Fatalf("the killed replica's client after the failover: %v", err)
	}
	if err := work(bystander, bystanderID+"-2", 0); err != nil {
		t.Fatalf("the other client after the failover: %v", err)
	}
	if on := placements(t, g.logPath)[victimID]; !slices.Equal(on, []string{"r0", "r0", "r1"}) {
		t.Errorf("the victim's calls ran on %v; want r0, r0 (lost), r1", on)
	}
	for rid, n := range executions(t, g.logPath) {
		if n != 1 {
			t.Errorf("%s executed %d times", rid, n)
		}
	}
	if _, body := g.health(1); body["group"].(map[string]any)["sessions_rebuilt"].(float64) < 1 {
		t.Errorf("no session rebuilt on the survivor: %v", body["group"])
	}
}

// One replica of two is cut off from NATS, and not from the relays, by a
// proxy between it and NATS. It receives every request still, cannot
// coordinate any, and cannot know whether the other replica will run them:
// it holds them and says nothing, while the other takes it for dead after
// the membership timeout and runs them. 20 calls of clients it served: each
// gets one outcome, its result; none runs twice; no replica answers
// -32018 (each call ran). Let back, it drops what it held (claimed by the
// other), and the moved clients stay on the other. Before, the cut
// replica answered -32018 at once to every call that the other then ran.
func TestGatewayReplicas_CutFromNATSAnswersOnce(t *testing.T) {
	const calls = 20
	ns := natstest.Start(t)
	proxy := natstest.NewProxy(t, ns)
	r := relaytest.Start(t, relay.Options{})
	g := &replicaGroup{t: t, c: newCLI(t), relay: r.URL, nats: ns.URL(), logPath: filepath.Join(t.TempDir(), "exec.log")}
	g.startVia("r0", proxy.URL())
	g.start("r1")
	g.awaitMembers(0, 2)
	g.awaitMembers(1, 2)
	ctx, cancel := testwait.Context(t, 2*time.Minute)
	defer cancel()
	var next int
	clients := make([]*mcp.ClientSession, 2)
	ids := make([]string, 2)
	for i := range clients {
		clients[i], ids[i] = g.clientOn(ctx, "r0", &next)
	}
	refused := func() (n float64) {
		for i := range g.procs {
			_, grp := g.groupStatus(i)
			v, _ := grp["refused"].(float64)
			n += v
		}
		return n
	}
	// run makes n calls per client, numbered from first, the clients side
	// by side, reports the ones that failed and logs how long they took.
	run := func(what string, first, n int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var took []time.Duration
		for i, cs := range clients {
			wg.Go(func() {
				for k := first; k < first+n; k++ {
					rid := fmt.Sprintf("%s-%d", ids[i], k)
					start := time.Now()
					if err := callWork(ctx, cs, rid, 0); err != nil {
						t.Errorf("%s: %v (code %d)", rid, err, errorCode(err))
					}
					mu.Lock()
					took = append(took, time.Since(start))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(took)
		t.Logf("%s: %d calls, median %v, slowest %v", what, len(took), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	}

	proxy.Cut()
	g.awaitGroup(0, "cut off", func(code int, grp map[string]any) bool { return code != 200 && grp["ready"] == false })
	run("r0 cut off", 1, calls/len(clients))
	if _, grp := g.groupStatus(0); grp["held"].(float64) < calls {
		t.Errorf("the cut replica held %v requests; want its clients' %d calls", grp["held"], calls)
	}

	proxy.Restore()
	g.awaitGroup(0, "back, with nothing held", func(code int, grp map[string]any) bool {
		return code == 200 && grp["ready"] == true && grp["holding"].(float64) == 0
	})
	run("r0 back", 1+calls/len(clients), 2)

	for rid, n := range executions(t, g.logPath) {
		if n != 1 {
			t.Errorf("%s executed %d times", rid, n)
		}
	}
	for _, id := range ids {
		want := []string{"r0"}
		for range calls/len(clients) + 2 {
			want = append(want, "r1")
		}
		if on := placements(t, g.logPath)[id]; !slices.Equal(on, want) {
			t.Errorf("client %s ran on %v; want its first call on r0, then all on r1", id, on)
		}
	}
	if n := refused(); n != 0 {
		t.Errorf("the replicas answered %v calls -32018; every call ran", n)
	}
	if t.Failed() {
		t.Logf("r0 stderr:\n%s", g.procs[0].Stderr)
		t.Logf("r1 stderr:\n%s", g.procs[1].Stderr)
	}
}

// Over HTTP, a replica group keeps one replay guard: a request signed for
// the gateway's DID (which every replica answers to) and replayed to
// another replica within the auth window is refused there as it is on the
// first. Before, each replica kept its nonces in its own memory.
func TestGatewayReplicas_HTTPNoncesAreGroupWide(t *testing.T) {
	ns := natstest.Start(t)
	r := relaytest.Start(t, relay.Options{})
	g := &replicaGroup{t: t, c: newCLI(t), relay: r.URL, nats: ns.URL(), logPath: filepath.Join(t.TempDir(), "exec.log")}
	for _, name := range []string{"r0", "r1"} {
		g.start(name, "--http", "127.0.0.1:0")
	}
	g.awaitMembers(0, 2)
	g.awaitMembers(1, 2)
	if g.ready[0].DID == "" || g.ready[0].DID != g.ready[1].DID {
		t.Fatalf("replica DIDs %q and %q; want one", g.ready[0].DID, g.ready[1].DID)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"replayed","version":"1"}}}`)
	signer := did.NostrSigner(nostr.Generate())
	header, err := didauth.SignPayload(t.Context(), signer, didauth.Payload{
		Audience: g.ready[0].DID, BodySHA256: didauth.BodyHash(body), Method: "POST",
		Nonce: didauth.NewNonce(), Path: "/mcp", Timestamp: time.Now().Unix(),
	})
	if err != nil {
		t.Fatal(err)
	}
	post := func(url string) (int, string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Code
	}
	if status, code := post(g.ready[0].HTTP); status != http.StatusOK {
		t.Fatalf("the signed request on r0: %d %s", status, code)
	}
	for i, url := range []string{g.ready[1].HTTP, g.ready[0].HTTP} {
		if status, code := post(url); status != http.StatusUnauthorized || code != didauth.CodeReplayed {
			t.Errorf("the same request replayed to r%d: %d %q; want 401 %s", 1-i, status, code, didauth.CodeReplayed)
		}
	}
}

// A replica group serves priced tools over HTTP too, its quotations in the
// group's bucket (before, a gateway with --nats, --http and --price did not
// start): each replica sells a call, paid once and run once.
func TestGatewayReplicas_PricedOverHTTP(t *testing.T) {
	ns := natstest.Start(t)
	r := relaytest.Start(t, relay.Options{})
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.json")
	ledger := payments.OpenLedger(ledgerPath)
	if err := ledger.Fund(context.Background(), "alice", 100); err != nil {
		t.Fatal(err)
	}
	srvWallet := writeSecret(t, dir, "srv.wallet", "fake://srv?ledger="+ledgerPath)
	aliceWallet := writeSecret(t, dir, "alice.wallet", "fake://alice?ledger="+ledgerPath)
	g := &replicaGroup{t: t, c: newCLI(t), relay: r.URL, nats: ns.URL(), logPath: filepath.Join(dir, "exec.log")}
	for _, name := range []string{"r0", "r1"} {
		g.start(name, "--http", "127.0.0.1:0", "--price", "tool:work=5", "--wallet-file", srvWallet)
	}
	g.awaitMembers(0, 2)
	for i, rd := range g.ready {
		rid := fmt.Sprintf("paid-%d", i)
		code, out, errOut := g.c.run("call", rd.HTTP, "work", "rid="+rid, "--wallet-file", aliceWallet, "--max-sats", "10", "--yes")
		if code != 0 || !strings.Contains(out, rid) || !strings.Contains(errOut, "paid 5 sats") {
			t.Fatalf("paid call on r%d: %d %q %q", i, code, out, errOut)
		}
	}
	a, _ := ledger.Balance(context.Background(), "alice")
	s, _ := ledger.Balance(context.Background(), "srv")
	if a != 90 || s != 10 {
		t.Fatalf("balances alice %d srv %d; want 90 and 10", a, s)
	}
	if n := executions(t, g.logPath); n["paid-0"] != 1 || n["paid-1"] != 1 {
		t.Fatalf("executions %v; want each paid call once", n)
	}
}

// falseDeaths reads the replicas' logs: the killed r0 lost once by each
// survivor is no false death; anything else is.
func TestFalseDeathsReadsTheReplicasLogs(t *testing.T) {
	lost := func(member string) string {
		return `time=2026-01-01T00:00:00Z level=WARN msg="replica lost: its clients move" replica=rX member=` + member + " live=2\n"
	}
	group := func(logs ...string) *replicaGroup {
		g := &replicaGroup{}
		for _, l := range logs {
			p := &proc{Stderr: &syncBuffer{}}
			p.Stderr.Write([]byte(`level=INFO msg="replica joined" member=r1` + "\n" + l))
			g.procs = append(g.procs, p)
		}
		return g
	}
	for _, c := range []struct {
		logs []string
		want string
	}{
		{[]string{"", lost("r0"), lost("r0")}, ""},
		{[]string{"", lost("r0") + lost("r2"), lost("r0")}, "r1 declared r2 dead"},
		{[]string{lost("r1"), lost("r0"), lost("r0")}, "r0 declared r1 dead"},
		{[]string{"", lost("r0") + lost("r0"), lost("r0")}, "r1 declared r0 dead"},
	} {
		if got := falseDeaths(group(c.logs...)); got != c.want {
			t.Errorf("logs %q: %q; want %q", c.logs, got, c.want)
		}
	}
}
