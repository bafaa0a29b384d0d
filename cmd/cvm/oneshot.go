package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// announcementWait bounds the read of a server's announcement: it saves
// round trips when it comes, and costs one when it does not.
const announcementWait = 2 * time.Second

// oneShot is the session of a one-shot command (call, tools, resources,
// prompts) with a server. It asks as little of the network as it can: a
// server known to take stateless requests (CEP-35), because it announces
// itself or answered before, is sent them, without an initialize; a tool's
// input schema comes from its announcement or from the last tools/list,
// remembered in the cache directory. What it learns is remembered by Close.
type oneShot struct {
	*mcp.ClientSession
	a         *app
	tg        target
	relays    []string
	opts      contextvm.ClientOptions // the transport's, its Payer among them
	transport *contextvm.ClientTransport
	stateless bool

	memo contacts
	rec  contact // as remembered, updated by what this run learns

	// ann is the server's announcement, when known before connecting;
	// fresh delivers the one read while the command runs, when it was not.
	ann     *discovery.Server
	fresh   chan *discovery.Server
	stop    context.CancelFunc
	reading sync.WaitGroup

	// httpURL is set for a server over MCP streamable HTTP (httpclient.go),
	// with what buys its quotations.
	httpURL string
	buyer   *quotation.Buyer
}

// dialOptions are what a command asks of its session.
type dialOptions struct {
	client *mcp.ClientOptions
	stream bool // the command reads a CEP-41 open stream
}

// dial locates the server, decides how to talk to it and connects.
func (a *app) dial(ctx context.Context, cf clientFlags, serverArg string, do dialOptions) (*oneShot, error) {
	if isHTTPServer(serverArg) {
		return a.dialHTTP(ctx, cf, serverArg, do)
	}
	tg, err := a.locate(ctx, cf, serverArg)
	if err != nil {
		return nil, err
	}
	opts, err := a.clientOptions(cf, tg)
	if err != nil {
		return nil, err
	}
	s := &oneShot{a: a, tg: tg, relays: opts.Relays, memo: a.contacts(), ann: tg.loc.Announcement}
	s.rec = s.memo.get(tg.key.Key)
	known := s.ann != nil || !s.rec.Answered.IsZero()
	if !cf.stateful && !cf.stateless && !known {
		// First contact: whether it announces itself decides how many round
		// trips follow, and its tools type the arguments.
		s.ann = a.fetchAnnouncement(ctx, tg)
		known = s.ann != nil
	} else if s.ann == nil {
		// What was remembered is used now; the announcement, read
		// meanwhile, says whether it is still right, for next time.
		s.readAnnouncement(ctx)
	}
	switch {
	case cf.stateless:
		s.stateless = true
	case cf.stateful:
	case do.stream && (s.ann == nil || !s.ann.OpenStreams):
		// Whether the server offers streams is in its answer to initialize.
	default:
		s.stateless = known
	}
	opts.Stateless = s.stateless
	opts.OpenStreams = do.stream
	opts.KnownEncryption = s.knownEncryption()
	s.opts = opts
	if s.transport, err = contextvm.NewClientTransport(opts); err != nil {
		s.Close()
		return nil, err
	}
	var copts mcp.ClientOptions
	if do.client != nil {
		copts = *do.client
	}
	// A one-shot command answers no requests (roots, sampling,
	// elicitation) and is gone before the server could ask: saying
	// otherwise makes servers ask, and log that nobody listened.
	copts.Capabilities = &mcp.ClientCapabilities{}
	client := mcp.NewClient(&mcp.Implementation{Name: "cvm", Version: currentVersion().Version}, &copts)
	cs, err := client.Connect(ctx, relayStage{s.transport, opts.Relays, relayWaitFor(cf.timeout)}, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		s.Close()
		if errors.Is(err, errNoRelay) {
			return nil, err
		}
		return nil, remoteFailure(ctx, "initialize", serverArg, opts.Relays, err)
	}
	s.ClientSession = cs
	if !s.stateless {
		s.rec.Answered = time.Now() // it answered initialize
	}
	a.log.Debug("connected", "server", opts.Server, "stateless", s.stateless)
	return s, nil
}

// contacts is the store of what one-shot commands remember of servers.
func (a *app) contacts() contacts {
	dir, err := config.CacheDir(a.getenv)
	if err != nil {
		return contacts{now: time.Now}
	}
	return contacts{dir: dir, now: time.Now}
}

// announcementPool is a pool on the server's relays and the discovery
// relays: a server may announce itself on either.
func announcementRelays(tg target) []string {
	relays := slices.Clone(tg.loc.Relays)
	for _, r := range tg.discovery {
		if !slices.Contains(relays, r) {
			relays = append(relays, r)
		}
	}
	return relays
}

// fetchAnnouncement reads the server's announcement, nil when it has none
// or no relay answered in time.
func (a *app) fetchAnnouncement(ctx context.Context, tg target) *discovery.Server {
	ctx, cancel := context.WithTimeout(ctx, announcementWait)
	defer cancel()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: announcementRelays(tg), Logger: a.log})
	defer pool.Close()
	srv, ok, err := discovery.FetchServer(ctx, pool, tg.key.Key)
	if err != nil || !ok {
		a.log.Debug("no announcement read", "server", nostrx.EncodeNpub(tg.key.Key), "err", err)
		return nil
	}
	return &srv
}

// readAnnouncement reads the announcement in the background; Close waits
// for it, or stops it.
func (s *oneShot) readAnnouncement(ctx context.Context) {
	ctx, s.stop = context.WithCancel(ctx)
	s.fresh = make(chan *discovery.Server, 1)
	s.reading.Go(func() { s.fresh <- s.a.fetchAnnouncement(ctx, s.tg) })
}

// knownEncryption is what is known, before connecting, of whether the
// server reads gift wraps: what its announcement says, else what the last
// run learned. The client transport corrects it if it is out of date.
func (s *oneShot) knownEncryption() contextvm.ServerEncryption {
	var encrypts bool
	switch {
	case s.ann != nil:
		encrypts = s.ann.Encryption
	case s.rec.Encrypts != nil:
		encrypts = *s.rec.Encrypts
	default:
		return contextvm.EncryptionUnknown
	}
	if encrypts {
		return contextvm.EncryptionSupported
	}
	return contextvm.EncryptionUnsupported
}

// rememberEncryption keeps what the transport knows now of the server's
// encryption for the next run, and says so when that corrects what was
// remembered: the server changed its settings since.
func (s *oneShot) rememberEncryption() {
	enc := s.transport.ServerEncryption()
	if enc == contextvm.EncryptionUnknown {
		return
	}
	encrypts := enc == contextvm.EncryptionSupported
	if was := s.rec.Encrypts; was != nil && *was != encrypts {
		s.a.log.Info("the server has changed its encryption since it was remembered; remembered now for next time",
			"server", nostrx.EncodeNpub(s.tg.key.Key), "encryption", enc)
	}
	s.rec.Encrypts = &encrypts
}

// announced returns the announcement's version: 0 for none.
func announced(srv *discovery.Server) int64 {
	if srv == nil {
		return 0
	}
	return srv.UpdatedAt.Unix()
}

// tool returns the tool name as the server describes it: from its
// announcement (kind 11317), else from the tools/list remembered under the
// same announcement, else from tools/list. ok is false when the server does
// not list it; tools are then the server's tools, live.
func (s *oneShot) tool(ctx context.Context, name string) (tool *mcp.Tool, tools []*mcp.Tool, err error) {
	find := func(tools []*mcp.Tool) *mcp.Tool {
		if i := slices.IndexFunc(tools, func(t *mcp.Tool) bool { return t.Name == name }); i >= 0 {
			return tools[i]
		}
		return nil
	}
	switch {
	case s.ann != nil && len(s.ann.Tools) > 0:
		if tools := announcedTools(s.ann.Tools); find(tools) != nil {
			s.rec.Tools, s.rec.Announced, s.rec.Prices = tools, announced(s.ann), announcedPrices(s.ann.Tools)
			s.knowPrices()
			return find(tools), tools, nil
		}
	case s.rec.Tools != nil && (s.ann == nil || s.rec.Announced == announced(s.ann)):
		// With the announcement still being read, Close drops these if it
		// turns out to have changed.
		if t := find(s.rec.Tools); t != nil {
			s.knowPrices()
			return t, s.rec.Tools, nil
		}
	}
	// Unknown or unlisted: the server says what it has now.
	if tools, err = all(s.Tools(ctx, nil)); err != nil {
		return nil, nil, err
	}
	s.rec.Tools = tools
	if s.transport != nil {
		s.rec.Prices = s.transport.Prices()
	}
	if s.ann != nil {
		s.rec.Announced = announced(s.ann)
	}
	return find(tools), tools, nil
}

// knowPrices tells the transport the prices stated with the tools read
// from the announcement or the cache, as tools/list would have: the payer
// holds what a usd-priced call is asked to them.
func (s *oneShot) knowPrices() {
	if s.transport != nil {
		s.transport.KnowPrices(s.rec.Prices)
	}
}

// announcedPrices are the prices of an announcement's tools.
func announcedPrices(tools []discovery.Tool) []contextvm.Price {
	var out []contextvm.Price
	for _, t := range tools {
		if t.Price != nil && t.Price.Unknown == "" {
			out = append(out, contextvm.Price{Capability: "tool:" + t.Name, Amount: t.Price.Amount, Unit: t.Price.Unit})
		}
	}
	return out
}

// announcedTools reads an announcement's tools as tools/list gives them.
func announcedTools(in []discovery.Tool) []*mcp.Tool {
	out := make([]*mcp.Tool, 0, len(in))
	for _, t := range in {
		var tool mcp.Tool
		raw, err := json.Marshal(struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			InputSchema json.RawMessage `json:"inputSchema,omitempty"`
		}{t.Name, t.Description, t.InputSchema})
		if err != nil || json.Unmarshal(raw, &tool) != nil {
			continue
		}
		out = append(out, &tool)
	}
	return out
}

// answered records the outcome of a request: the server answered (err is
// nil or a JSON-RPC error), or did not. Invalid params (the go-sdk's
// answer to an unknown tool, too) mean the tools remembered are wrong.
func (s *oneShot) answered(err error) {
	var werr *jsonrpc.Error
	switch {
	case err == nil:
		s.rec.Answered = time.Now()
	case errors.As(err, &werr) && werr.Code == contextvm.CodeRequestTimeout:
		if s.stateless {
			// Perhaps it takes no stateless requests: ask it properly next
			// time.
			s.rec.Answered = time.Time{}
		}
	case errors.As(err, &werr):
		s.rec.Answered = time.Now()
		if werr.Code == jsonrpc.CodeInvalidParams {
			s.rec.Tools = nil
		}
	}
}

// Close ends the session and remembers what was learned.
func (s *oneShot) Close() error {
	var err error
	if s.ClientSession != nil {
		err = s.ClientSession.Close()
	}
	if s.httpURL != "" {
		return err // nothing remembered of HTTP servers
	}
	if s.transport != nil {
		s.rememberEncryption()
	}
	if s.stop != nil {
		s.stop()
		s.reading.Wait()
		if fresh := <-s.fresh; fresh != nil && announced(fresh) != s.rec.Announced {
			s.rec.Tools = nil // read under another announcement
		}
	}
	if s.rec.Answered.IsZero() {
		s.memo.forget(s.tg.key.Key)
	} else if perr := s.memo.put(s.tg.key.Key, s.rec); perr != nil {
		s.a.log.Debug("could not remember the server", "err", perr)
	}
	return err
}
