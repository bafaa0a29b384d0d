package zapsim

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/zap"
)

// Options configure a Server. Network, Zappers and CAFile are required.
type Options struct {
	// Network is the simulator whose wallets the addresses pay.
	Network *lnsim.Network
	// Zappers are the keys that sign each wallet's zap receipts (its
	// nostrPubkey), by wallet name: a wallet without one has no address.
	Zappers map[string]nostr.SecretKey
	// Listen is the address served (default 127.0.0.1:0, a free port).
	Listen string
	// CAFile is where the throw-away CA's certificate is written.
	CAFile string
	// InvoiceExpiry is how long its invoices can be paid (default 5 min).
	InvoiceExpiry time.Duration
	Logger        *slog.Logger
}

// publishTimeout bounds the publishing of one receipt to its relays.
const publishTimeout = 15 * time.Second

// Server serves the Lightning addresses of a simulator's wallets.
type Server struct {
	opts     Options
	srv      *http.Server
	host     string // 127.0.0.1:PORT
	metadata map[string]string
	stop     func()
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu    sync.Mutex
	zaps  map[string]zapAsked     // by payment hash
	pools map[string]*nostrx.Pool // by the relays a receipt goes to, kept until Close
}

// zapAsked is an invoice made for a zap request: to whom the receipt goes.
type zapAsked struct {
	wallet      string
	request     zap.Request
	description string
}

// Start makes the throw-away CA, writes it to opts.CAFile and serves the
// addresses until Close.
func Start(opts Options) (*Server, error) {
	if opts.Network == nil || opts.CAFile == "" {
		return nil, errors.New("zapsim: a network and a CA file are required")
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.InvoiceExpiry <= 0 {
		opts.InvoiceExpiry = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cert, pemCA, err := newCA()
	if err != nil {
		return nil, fmt.Errorf("zapsim: make the CA: %w", err)
	}
	if err := writeCA(opts.CAFile, pemCA); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("zapsim: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, host: ln.Addr().String(), zaps: map[string]zapAsked{}, pools: map[string]*nostrx.Pool{}, metadata: map[string]string{}, ctx: ctx, cancel: cancel}
	for name := range opts.Zappers {
		md, _ := json.Marshal([][2]string{{"text/plain", "Pay " + name + " on cvm wallet-sim (a simulator: not money)"}, {"text/identifier", s.Address(name)}})
		s.metadata[name] = string(md)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/lnurlp/{name}", s.payParams)
	mux.HandleFunc("GET /lnurlp/{name}/callback", s.callback)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	s.wg.Go(func() {
		if err := s.srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			opts.Logger.Error("zapsim: serving stopped", "err", err)
		}
	})
	s.stop = opts.Network.OnSettle(s.settled)
	return s, nil
}

// Address is the Lightning address of wallet name: name@127.0.0.1:PORT.
func (s *Server) Address(name string) string { return name + "@" + s.host }

// Close stops serving and waits for the receipts being published.
func (s *Server) Close() error {
	s.stop()
	err := s.srv.Shutdown(context.Background())
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pools {
		p.Close()
	}
	return err
}

// answer writes v as JSON.
func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// refuse is LUD-06's error answer.
func refuse(w http.ResponseWriter, status int, format string, args ...any) {
	answer(w, status, map[string]string{"status": "ERROR", "reason": fmt.Sprintf(format, args...)})
}

// payParams answers LUD-06's first request, with NIP-57's fields.
func (s *Server) payParams(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	key, ok := s.opts.Zappers[name]
	if !ok {
		refuse(w, http.StatusNotFound, "no wallet %q in the simulator", name)
		return
	}
	answer(w, http.StatusOK, map[string]any{
		"tag": "payRequest", "callback": "https://" + s.host + "/lnurlp/" + name + "/callback",
		"minSendable": 1000, "maxSendable": bolt11.MaxAmountMsat, "metadata": s.metadata[name],
		"allowsNostr": true, "nostrPubkey": key.Public().Hex(),
	})
}

// callback makes the invoice: for a zap request, bound to it by its
// SHA-256 (NIP-57); without one, to the metadata's (LUD-06).
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := s.opts.Zappers[name]; !ok {
		refuse(w, http.StatusNotFound, "no wallet %q in the simulator", name)
		return
	}
	q := r.URL.Query()
	amount, err := strconv.ParseInt(q.Get("amount"), 10, 64)
	if err != nil || amount < 1000 || amount > bolt11.MaxAmountMsat {
		refuse(w, http.StatusOK, "amount %q: want msat from 1000 to %d", q.Get("amount"), int64(bolt11.MaxAmountMsat))
		return
	}
	desc := s.metadata[name]
	var zr zap.Request
	if n := q.Get("nostr"); n != "" {
		if zr, err = zap.ParseRequest(n); err != nil {
			refuse(w, http.StatusOK, "%v", err)
			return
		}
		if zr.AmountMsat != 0 && zr.AmountMsat != amount {
			refuse(w, http.StatusOK, "the zap request's amount %d is not the amount %d", zr.AmountMsat, amount)
			return
		}
		desc = n
	}
	inv, err := s.opts.Network.MakeInvoiceHashed(name, amount, sha256.Sum256([]byte(desc)), s.opts.InvoiceExpiry)
	if err != nil {
		refuse(w, http.StatusOK, "%v", err)
		return
	}
	if desc != s.metadata[name] {
		s.mu.Lock()
		s.zaps[inv.PaymentHash] = zapAsked{wallet: name, request: zr, description: desc}
		s.mu.Unlock()
	}
	answer(w, http.StatusOK, map[string]any{"pr": inv.Bolt11, "routes": []any{}})
}

// settled is the network's word of a payment: a zap's receipt is
// published, on a goroutine the server owns (the network calls it
// synchronously).
func (s *Server) settled(st lnsim.Settlement) {
	s.mu.Lock()
	z, ok := s.zaps[st.Invoice.PaymentHash]
	delete(s.zaps, st.Invoice.PaymentHash)
	s.mu.Unlock()
	if !ok {
		return
	}
	evt := zap.NewReceipt(z.request, z.description, st.Invoice.Bolt11, st.Invoice.Preimage, nostr.Timestamp(st.Invoice.SettledAt.Unix()))
	if err := evt.Sign(s.opts.Zappers[z.wallet]); err != nil {
		s.opts.Logger.Error("zapsim: sign a zap receipt", "err", err)
		return
	}
	s.wg.Go(func() { s.publish(evt, z.request.Relays) })
}

// maxPools bounds the relay sets whose connections are kept: zap
// requests name their relays, and a stranger could name many.
const maxPools = 16

// pool is the relay pool of urls, kept open (up to maxPools sets) so that
// the next receipt to the same relays does not wait for a websocket
// handshake; done releases it.
func (s *Server) pool(urls []string) (p *nostrx.Pool, done func()) {
	key := strings.Join(urls, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pools[key]; ok {
		return p, func() {}
	}
	p = nostrx.NewPool(nostrx.PoolOptions{Relays: urls, Logger: s.opts.Logger})
	if len(s.pools) >= maxPools {
		return p, func() { p.Close() }
	}
	s.pools[key] = p
	return p, func() {}
}

// publish sends a receipt to the zap request's relays (websocket URLs
// only).
func (s *Server) publish(evt nostr.Event, relays []string) {
	var urls []string
	for _, u := range relays {
		if strings.HasPrefix(u, "ws://") || strings.HasPrefix(u, "wss://") {
			urls = append(urls, u)
		}
	}
	pool, done := s.pool(urls)
	defer done()
	ctx, cancel := context.WithTimeout(s.ctx, publishTimeout)
	defer cancel()
	if err := pool.Publish(ctx, evt); err != nil {
		s.opts.Logger.Warn("zapsim: a zap receipt reached no relay", "receipt", evt.ID.Hex(), "relays", urls, "err", err)
		return
	}
	s.opts.Logger.Info("zapsim: zap receipt published", "receipt", evt.ID.Hex(), "relays", urls)
}
