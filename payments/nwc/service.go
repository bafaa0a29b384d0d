package nwc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/lnsim"
)

// ServiceOptions configure a Service.
type ServiceOptions struct {
	// Encryptions are the schemes the service accepts and announces
	// (default both, NIP-44 first). A request in another scheme gets
	// UNSUPPORTED_ENCRYPTION.
	Encryptions []string
	// OmitEncryptionTag publishes the info event without an encryption
	// tag, as wallets that predate it do: clients then use NIP-04.
	OmitEncryptionTag bool
	// NoNotifications makes the service announce no notifications and
	// send none, as wallets without them: clients then look up payments.
	NoNotifications bool
	// Mute makes the service announce notifications and never send one:
	// a wallet that breaks its word, for tests.
	Mute bool
	// Methods are the methods the service serves and lists in its info
	// event (default all of them); others are answered RESTRICTED, as a
	// connection a wallet grants fewer permissions (say, receive only).
	Methods []string
	// OnRequest, if set, is called for each request the service answers,
	// with its method and scheme (for tests and metrics).
	OnRequest func(method, encryption string)
	Logger    *slog.Logger
}

// Service is a NIP-47 wallet service in front of the wallets of an lnsim
// network: a simulator, for tests and demos. Each connection has its own
// service key and its own client key; requests from any other key are
// ignored.
//
// Add connections, then Run.
type Service struct {
	net  *lnsim.Network
	pool *nostrx.Pool
	opts ServiceOptions
	log  *slog.Logger

	ready chan struct{}

	mu    sync.Mutex
	conns map[nostr.PubKey]*connection // by service public key
}

type connection struct {
	wallet  string
	service nostr.SecretKey
	client  nostr.PubKey
	keys    *keys // the service's, to the client
}

// NewService returns a service for net on the relays of pool.
func NewService(net *lnsim.Network, pool *nostrx.Pool, opts ServiceOptions) *Service {
	if len(opts.Encryptions) == 0 {
		opts.Encryptions = []string{EncryptionNIP44, EncryptionNIP04}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Methods == nil {
		opts.Methods = serviceMethods
	}
	return &Service{net: net, pool: pool, opts: opts, log: opts.Logger, conns: map[nostr.PubKey]*connection{}, ready: make(chan struct{})}
}

// Ready is closed once Run listens for requests and has published every
// connection's info event: from then on clients can use it.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Connect opens a connection to wallet: requests signed by clientSecret's
// public key and addressed to serviceKey's are served from it. It returns
// the connection URI (see URI.Reveal). Call it before Run.
func (s *Service) Connect(wallet string, serviceKey, clientSecret nostr.SecretKey) (URI, error) {
	if _, err := s.net.Wallet(wallet); err != nil {
		return URI{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pub := serviceKey.Public()
	if _, ok := s.conns[pub]; ok {
		return URI{}, fmt.Errorf("nwc: service key %s is already connected", pub.Hex())
	}
	s.conns[pub] = &connection{wallet: wallet, service: serviceKey, client: clientSecret.Public(),
		keys: newKeys(serviceKey, clientSecret.Public())}
	return NewURI(pub, s.pool.Relays(), clientSecret), nil
}

var serviceMethods = []string{MethodPayInvoice, MethodMakeInvoice, MethodLookupInvoice, MethodGetBalance, MethodGetInfo}

// Run publishes every connection's info event, serves requests and sends
// notifications until ctx ends. It returns once everything it started has
// stopped.
func (s *Service) Run(ctx context.Context) error {
	s.mu.Lock()
	var keys []nostr.PubKey
	var hexKeys []string
	for pub := range s.conns {
		keys = append(keys, pub)
		hexKeys = append(hexKeys, pub.Hex())
	}
	s.mu.Unlock()
	if len(keys) == 0 {
		return errors.New("nwc: no connections to serve")
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	sub := s.pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{KindRequest}, Tags: nostr.TagMap{"p": hexKeys}, Since: nostr.Now() - 60}, 0)
	defer sub.Close()
	select {
	case <-sub.Ready():
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, pub := range keys {
		if err := s.publishInfo(ctx, s.connection(pub)); err != nil {
			return err
		}
	}

	settlements := make(chan lnsim.Settlement, 64)
	stop := s.net.OnSettle(func(st lnsim.Settlement) {
		select {
		case settlements <- st:
		default:
			s.log.Warn("nwc: notification dropped: the notifier is behind", "payment_hash", st.Invoice.PaymentHash)
		}
	})
	defer stop()
	wg.Go(func() {
		for {
			select {
			case st := <-settlements:
				s.notify(ctx, st)
			case <-ctx.Done():
				return
			}
		}
	})

	close(s.ready)
	s.log.Info("nwc wallet service ready", "connections", len(keys), "relays", s.pool.Relays())
	for {
		select {
		case evt, ok := <-sub.Events():
			if !ok {
				return errors.New("nwc: request subscription closed")
			}
			wg.Go(func() { s.handle(ctx, evt) })
		case <-ctx.Done():
			return nil
		}
	}
}

func (s *Service) publishInfo(ctx context.Context, c *connection) error {
	var tags nostr.Tags
	capabilities := slices.Clone(s.opts.Methods)
	if !s.opts.NoNotifications {
		tags = append(tags, nostr.Tag{"notifications", NotificationReceived + " " + NotificationSent})
		capabilities = append(capabilities, "notifications")
	}
	if !s.opts.OmitEncryptionTag {
		tags = append(tags, nostr.Tag{"encryption", strings.Join(s.opts.Encryptions, " ")})
	}
	evt := nostr.Event{Kind: KindInfo, CreatedAt: nostr.Now(), Tags: tags, Content: strings.Join(capabilities, " ")}
	if err := c.keys.sign(&evt); err != nil {
		return err
	}
	if err := s.pool.Publish(ctx, evt); err != nil {
		return fmt.Errorf("nwc: publishing the info event of wallet %q: %w", c.wallet, err)
	}
	return nil
}

func (s *Service) connection(pub nostr.PubKey) *connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[pub]
}

// handle answers one request event.
func (s *Service) handle(ctx context.Context, evt nostr.Event) {
	p := evt.Tags.Find("p")
	if len(p) < 2 {
		return
	}
	pub, err := nostr.PubKeyFromHex(p[1])
	if err != nil {
		return
	}
	c := s.connection(pub)
	if c == nil || evt.PubKey != c.client {
		s.log.Info("nwc: request from an unknown client ignored", "id", evt.ID.Hex(), "author", evt.PubKey.Hex())
		return
	}
	if t := evt.Tags.Find("expiration"); len(t) >= 2 {
		if exp, err := strconv.ParseInt(t[1], 10, 64); err == nil && exp <= time.Now().Unix() {
			s.log.Info("nwc: expired request ignored", "id", evt.ID.Hex())
			return
		}
	}
	scheme := requestEncryption(evt)
	var resp Response
	method := ""
	if !slices.Contains(s.opts.Encryptions, scheme) {
		resp = Response{ResultType: "", Error: &ErrorBody{Code: payments.CodeUnsupportedEncryption,
			Message: fmt.Sprintf("encryption %q is not supported; use one of: %s", scheme, strings.Join(s.opts.Encryptions, " "))}}
		// Answer in a scheme the client can read.
		if scheme = EncryptionNIP04; !slices.Contains(s.opts.Encryptions, scheme) {
			scheme = s.opts.Encryptions[0]
		}
	} else {
		plain, err := c.keys.decrypt(scheme, evt.Content)
		if err != nil {
			s.log.Info("nwc: undecryptable request ignored", "id", evt.ID.Hex(), "encryption", scheme)
			return
		}
		req, err := DecodeRequest([]byte(plain))
		if err != nil {
			resp = Response{Error: &ErrorBody{Code: payments.CodeOther, Message: err.Error()}}
		} else {
			method = req.Method
			resp = s.dispatch(ctx, c, req)
		}
	}
	if resp.ResultType == "" {
		resp.ResultType = method
		if method == "" {
			resp.ResultType = "unknown"
		}
	}
	if s.opts.OnRequest != nil {
		s.opts.OnRequest(method, scheme)
	}
	body, err := json.Marshal(resp)
	if err != nil {
		s.log.Error("nwc: encoding a response", "err", err)
		return
	}
	content, err := c.keys.encrypt(scheme, string(body))
	if err != nil {
		s.log.Error("nwc: encrypting a response", "err", err)
		return
	}
	out := nostr.Event{
		Kind: KindResponse, CreatedAt: nostr.Now(), Content: content,
		Tags: nostr.Tags{{"p", c.client.Hex()}, {"e", evt.ID.Hex()}},
	}
	if err := c.keys.sign(&out); err != nil {
		return
	}
	if err := s.pool.Publish(ctx, out); err != nil {
		level := slog.LevelInfo
		if errors.Is(err, nostrx.ErrUnheard) {
			level = slog.LevelDebug // the client gave up on its request: no news
		}
		s.log.Log(ctx, level, "nwc: response not delivered", "method", method, "err", err)
		return
	}
	s.log.Debug("nwc: request answered", "wallet", c.wallet, "method", method, "encryption", scheme)
}

func errorResponse(method string, err error) Response {
	var we *payments.WalletError
	if errors.As(err, &we) {
		return Response{ResultType: method, Error: &ErrorBody{Code: we.Code, Message: we.Message}}
	}
	return Response{ResultType: method, Error: &ErrorBody{Code: payments.CodeInternal, Message: err.Error()}}
}

func resultResponse(method string, v any) Response {
	b, err := json.Marshal(v)
	if err != nil {
		return errorResponse(method, err)
	}
	return Response{ResultType: method, Result: b}
}

func (s *Service) dispatch(ctx context.Context, c *connection, req Request) Response {
	params := req.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	bad := func(err error) Response {
		return Response{ResultType: req.Method, Error: &ErrorBody{Code: payments.CodeOther, Message: "bad params: " + err.Error()}}
	}
	if slices.Contains(serviceMethods, req.Method) && !slices.Contains(s.opts.Methods, req.Method) {
		return Response{ResultType: req.Method, Error: &ErrorBody{Code: payments.CodeRestricted,
			Message: fmt.Sprintf("this connection may not use %s", req.Method)}}
	}
	switch req.Method {
	case MethodGetInfo:
		node, err := s.net.NodeID(c.wallet)
		if err != nil {
			return errorResponse(req.Method, err)
		}
		info := Info{Alias: "lnsim " + c.wallet + " (simulator)", Pubkey: node, Network: "regtest", Methods: s.opts.Methods}
		if !s.opts.NoNotifications {
			info.Notifications = []string{NotificationReceived, NotificationSent}
		}
		return resultResponse(req.Method, info)
	case MethodGetBalance:
		bal, err := s.net.Balance(c.wallet)
		if err != nil {
			return errorResponse(req.Method, err)
		}
		return resultResponse(req.Method, map[string]int64{"balance": bal})
	case MethodMakeInvoice:
		var p struct {
			Amount      int64  `json:"amount"`
			Description string `json:"description"`
			Expiry      int64  `json:"expiry"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return bad(err)
		}
		if p.Expiry < 0 || p.Expiry > 365*24*3600 {
			return bad(fmt.Errorf("expiry %d s is out of range", p.Expiry))
		}
		inv, err := s.net.MakeInvoice(c.wallet, p.Amount, p.Description, time.Duration(p.Expiry)*time.Second)
		if err != nil {
			return errorResponse(req.Method, err)
		}
		return resultResponse(req.Method, s.transaction(c.wallet, inv))
	case MethodLookupInvoice:
		var p struct {
			PaymentHash string `json:"payment_hash"`
			Invoice     string `json:"invoice"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return bad(err)
		}
		if p.PaymentHash == "" && p.Invoice != "" {
			dec, err := bolt11.Decode(p.Invoice)
			if err != nil {
				return bad(err)
			}
			p.PaymentHash = dec.PaymentHash()
		}
		inv, err := s.net.LookupInvoice(c.wallet, p.PaymentHash)
		if err != nil {
			return errorResponse(req.Method, err)
		}
		return resultResponse(req.Method, s.transaction(c.wallet, inv))
	case MethodPayInvoice:
		var p struct {
			Invoice string `json:"invoice"`
			Amount  int64  `json:"amount"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return bad(err)
		}
		if p.Amount != 0 {
			dec, err := bolt11.Decode(p.Invoice)
			if err == nil && dec.AmountMsat() != p.Amount {
				return Response{ResultType: req.Method, Error: &ErrorBody{Code: payments.CodePaymentFailed,
					Message: fmt.Sprintf("amount %d msat differs from the invoice's %d msat", p.Amount, dec.AmountMsat())}}
			}
		}
		preimage, err := s.net.Pay(c.wallet, p.Invoice)
		if err != nil {
			return errorResponse(req.Method, err)
		}
		return resultResponse(req.Method, map[string]any{"preimage": preimage, "fees_paid": 0})
	}
	return Response{ResultType: req.Method, Error: &ErrorBody{Code: payments.CodeNotImplemented,
		Message: fmt.Sprintf("method %q is not implemented by the simulator", req.Method)}}
}

// transaction describes inv as wallet sees it.
func (s *Service) transaction(wallet string, inv payments.Invoice) Transaction {
	t := Transaction{
		Type: transactionTypeIncoming, State: transactionStatePending, Invoice: inv.Bolt11,
		Description: inv.Description, PaymentHash: inv.PaymentHash, Amount: inv.AmountMsat,
		CreatedAt: inv.CreatedAt.Unix(), ExpiresAt: inv.ExpiresAt.Unix(), Preimage: inv.Preimage,
	}
	if incoming, ok := s.net.Direction(wallet, inv.PaymentHash); ok && !incoming {
		t.Type = transactionTypeOutgoing
	}
	switch {
	case inv.Settled():
		t.State, t.SettledAt = transactionStateSettled, inv.SettledAt.Unix()
	case !time.Now().Before(inv.ExpiresAt):
		t.State = transactionStateExpired
	}
	return t
}

// notify tells the connections of payer and payee about a settlement, as
// kind 23197 (NIP-44) and, for NIP-04 clients, 23196.
func (s *Service) notify(ctx context.Context, st lnsim.Settlement) {
	if s.opts.NoNotifications || s.opts.Mute {
		return
	}
	s.mu.Lock()
	// The payee's connections first: a server waits for its
	// payment_received to run the call it was paid for, while the payer
	// learns of its payment from its own response.
	var targets, payers []*connection
	for _, c := range s.conns {
		switch c.wallet {
		case st.Payee:
			targets = append(targets, c)
		case st.Payer:
			payers = append(payers, c)
		}
	}
	s.mu.Unlock()
	targets = append(targets, payers...)
	for _, c := range targets {
		typ := NotificationSent
		tx := s.transaction(c.wallet, st.Invoice)
		if c.wallet == st.Payee {
			typ, tx.Type = NotificationReceived, transactionTypeIncoming
		} else {
			tx.Type = transactionTypeOutgoing
		}
		body, err := json.Marshal(map[string]any{"notification_type": typ, "notification": tx})
		if err != nil {
			continue
		}
		for _, scheme := range s.opts.Encryptions {
			kind := KindNotificationNIP44
			if scheme == EncryptionNIP04 {
				kind = KindNotificationNIP04
			}
			content, err := c.keys.encrypt(scheme, string(body))
			if err != nil {
				continue
			}
			evt := nostr.Event{Kind: kind, CreatedAt: nostr.Now(), Content: content, Tags: nostr.Tags{{"p", c.client.Hex()}}}
			if c.keys.sign(&evt) != nil {
				continue
			}
			if err := s.pool.Publish(ctx, evt); err != nil && !errors.Is(err, nostrx.ErrUnheard) {
				s.log.Info("nwc: notification not delivered", "type", typ, "wallet", c.wallet, "err", err)
			}
		}
	}
}
