package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	goleak.VerifyTestMain(m)
}

// child is an Upstream that runs this test binary as the upstream server.
// Under the race detector a process lingers a second at exit unless told
// not to; restarts and reaping would wait for it.
func child(mode string) *gateway.Command {
	return &gateway.Command{Path: os.Args[0], Env: []string{childEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"}, Stderr: os.Stderr}
}

// bench is a gateway on a contextvm server on an in-memory relay.
type bench struct {
	t     *testing.T
	relay string
	srv   *contextvm.Server
	gw    *gateway.Gateway
	logs  *logBuffer // what the gateway logs
}

// logBuffer is what the gateway logs: what it says it did is the tests'
// handshake with it.
type logBuffer = waitbuf.Buffer

func newBench(t *testing.T, opts gateway.Options) *bench {
	t.Helper()
	return newBenchServer(t, opts, contextvm.ServerOptions{})
}

// newBenchServer is newBench with options for the contextvm server (its
// Signer and Relays are filled in).
func newBenchServer(t *testing.T, opts gateway.Options, sopts contextvm.ServerOptions) *bench {
	t.Helper()
	r := relaytest.Start(t, relay.Options{})
	ctx, cancel := testwait.Context(t, patience)
	defer cancel()
	if opts.Upstream == nil {
		opts.Upstream = child("server")
	}
	if opts.RestartMin == 0 {
		opts.RestartMin = 20 * time.Millisecond
	}
	logs := &logBuffer{}
	if opts.Logger == nil {
		opts.Logger = logs.Logger()
	}
	sopts.Signer = contextvm.NewKeySigner(nostr.Generate())
	sopts.Relays = []string{r.URL}
	opts.Server = sopts
	gw := startGateway(t, ctx, opts)
	return &bench{t: t, relay: r.URL, srv: gw.Server(), gw: gw, logs: logs}
}

// startGateway creates a gateway and serves it until the test ends.
func startGateway(t *testing.T, ctx context.Context, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	gw, err := gateway.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		gw.Serve(context.Background())
	}()
	t.Cleanup(func() {
		gw.Close()
		<-served
	})
	return gw
}

// connect opens a client session (a fresh client key) through the gateway.
func (b *bench) connect(opts *mcp.ClientOptions) *mcp.ClientSession {
	b.t.Helper()
	cs, err := b.tryConnect(opts)
	if err != nil {
		b.t.Fatal(err)
	}
	return cs
}

func (b *bench) tryConnect(opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	return b.tryConnectClient(newClient(opts))
}

func newClient(opts *mcp.ClientOptions) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "gateway-test-client", Version: "1"}, opts)
}

func (b *bench) tryConnectClient(client *mcp.Client) (*mcp.ClientSession, error) {
	ctx, cancel := testwait.Context(b.t, patience)
	defer cancel()
	cs, err := contextvm.Connect(ctx, client, contextvm.ClientOptions{
		Server:         b.srv.PublicKey().Hex(),
		Relays:         []string{b.relay},
		RequestTimeout: testwait.Timeout(patience),
	})
	if err != nil {
		return nil, err
	}
	b.t.Cleanup(func() { cs.Close() })
	return cs, nil
}

// connectStateless opens a stateless client (CEP-35) with a fresh key: its
// requests carry no session, and the server starts one on its behalf.
func (b *bench) connectStateless() *mcp.ClientSession {
	b.t.Helper()
	ctx, cancel := testwait.Context(b.t, patience)
	defer cancel()
	cs, err := contextvm.Connect(ctx, newClient(nil), contextvm.ClientOptions{
		Server: b.srv.PublicKey().Hex(), Relays: []string{b.relay}, Stateless: true, RequestTimeout: testwait.Timeout(patience),
	})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { cs.Close() })
	return cs
}

// metric reads one unlabelled value from the gateway's /metrics.
func (b *bench) metric(name string) float64 {
	b.t.Helper()
	return metricOf(b.t, b.gw, name)
}

func metricOf(t *testing.T, gw *gateway.Gateway, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	gw.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// patience bounds each wait of these tests (a call, a condition, a
// notification), scaled by testwait's knob: long, as it only bounds how
// long a failing test takes to say so.
const patience = 30 * time.Second

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	text, err := tryCall(cs, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return text
}

func tryCall(cs *mcp.ClientSession, tool string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(patience))
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

// rpcError extracts the JSON-RPC error of a failed request.
func rpcError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	return werr
}

// within waits for a value on ch, for patience.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testwait.Timeout(patience)):
		t.Fatalf("no %s within %v", what, testwait.Timeout(patience))
		var zero T
		return zero
	}
}

// inFlight is a client session that can tell when a slow call of its runs
// in the upstream.
type inFlight struct {
	cs      *mcp.ClientSession
	started chan struct{}
}

// connectInFlight connects a client session (with opts, which may be nil)
// whose first progress notification is the signal that its slow call runs.
func (b *bench) connectInFlight(opts *mcp.ClientOptions) *inFlight {
	b.t.Helper()
	f := &inFlight{started: make(chan struct{}, 1)}
	var o mcp.ClientOptions
	if opts != nil {
		o = *opts
	}
	o.ProgressNotificationHandler = func(context.Context, *mcp.ProgressNotificationClientRequest) {
		select {
		case f.started <- struct{}{}:
		default:
		}
	}
	f.cs = b.connect(&o)
	return f
}

// slow starts the slow tool for ms and returns once the upstream runs it;
// the call's outcome arrives on the channel.
func (f *inFlight) slow(t *testing.T, ms int) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(patience))
		defer cancel()
		params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": ms, "started": true}}
		params.SetProgressToken("in-flight")
		res, err := f.cs.CallTool(ctx, params)
		if err == nil && res.IsError {
			err = errors.New(res.Content[0].(*mcp.TextContent).Text)
		}
		done <- err
	}()
	within(t, f.started, "slow call running in the upstream")
	return done
}

func httptestGet(gw *gateway.Gateway, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	gw.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec
}
