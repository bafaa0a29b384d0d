package nwc_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// payee is a wallet service with a payee ("bob") whose keys the test
// knows, to sign notifications of its own, and a payer ("alice").
type payee struct {
	net     *lnsim.Network
	pool    *nostrx.Pool // the test's, to publish hand-made events
	service nostr.SecretKey
	secret  nostr.SecretKey // bob's connection key
	client  *nwc.Client     // bob's
	log     *waitbuf.Buffer // bob's client's
	mu      sync.Mutex
	methods map[string]int // requests answered, by method
}

func startPayee(t *testing.T, opts nwc.ServiceOptions) *payee {
	t.Helper()
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	net.AddWallet("alice", 100_000_000)
	net.AddWallet("bob", 0)
	p := &payee{net: net, service: nostr.Generate(), secret: nostr.Generate(), log: &waitbuf.Buffer{}, methods: map[string]int{}}
	opts.OnRequest = func(method, _ string) {
		p.mu.Lock()
		p.methods[method]++
		p.mu.Unlock()
	}
	p.pool = nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	svc := nwc.NewService(net, p.pool, opts)
	u, err := svc.Connect("bob", p.service, p.secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("service: %v", err)
		}
		p.pool.Close()
	})
	select {
	case <-svc.Ready():
	case err := <-done:
		t.Fatalf("service: %v", err)
	}
	p.client = nwc.NewClient(u, nwc.ClientOptions{Timeout: testwait.Timeout(10 * time.Second), Logger: p.log.Logger()})
	t.Cleanup(func() { p.client.Close() })
	return p
}

func (p *payee) requests(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.methods[method]
}

// publish signs a notification of kind with signer, encrypted from signer
// to the key of `to` with scheme, p-tagged to `to`, and publishes it.
func (p *payee) publish(t *testing.T, signer nostr.SecretKey, to nostr.PubKey, kind nostr.Kind, scheme string, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	content, err := nwc.EncryptForTest(scheme, string(b), signer, to)
	if err != nil {
		t.Fatal(err)
	}
	evt := nostr.Event{Kind: kind, CreatedAt: nostr.Now(), Content: content, Tags: nostr.Tags{{"p", to.Hex()}}}
	if err := evt.Sign(signer); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	// Unheard is fine: the relay's filters keep some away from the client.
	if err := p.pool.Publish(ctx, evt); err != nil && !errors.Is(err, nostrx.ErrUnheard) {
		t.Fatal(err)
	}
}

func received(hash string, msat int64) map[string]any {
	return map[string]any{"notification_type": "payment_received",
		"notification": map[string]any{"type": "incoming", "payment_hash": hash, "amount": msat, "settled_at": time.Now().Unix()}}
}

// heardBy returns what Received says of hash without waiting: the notice
// if it was heard, else an error.
func heardBy(c *nwc.Client, hash string) (int64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	inv, err := c.Received(ctx, hash)
	return inv.AmountMsat, err
}

// TestListenHearsPaymentReceived: the client listens on the kind of its
// scheme (23197 for NIP-44, 23196 for NIP-04), and Received returns the
// payment as the wallet announced it, settled, without a lookup_invoice;
// a notification heard before Received was called counts.
func TestListenHearsPaymentReceived(t *testing.T) {
	for _, enc := range []string{nwc.EncryptionNIP44, nwc.EncryptionNIP04} {
		t.Run(enc, func(t *testing.T) {
			p := startPayee(t, nwc.ServiceOptions{Encryptions: []string{enc}})
			ctx, cancel := testwait.Context(t, 20*time.Second)
			defer cancel()
			if ok, err := p.client.Listen(ctx); !ok || err != nil {
				t.Fatalf("Listen: %v %v", ok, err)
			}
			inv, err := p.client.MakeInvoice(ctx, 21_000, "x", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.net.Pay("alice", inv.Bolt11); err != nil {
				t.Fatal(err)
			}
			if err := p.log.WaitFor(ctx, "nwc: payment received", inv.PaymentHash); err != nil {
				t.Fatal(err)
			}
			got, err := p.client.Received(ctx, inv.PaymentHash)
			if err != nil || !got.Settled() || got.AmountMsat != 21_000 || got.PaymentHash != inv.PaymentHash || got.Preimage == "" {
				t.Fatalf("Received: %+v %v", got, err)
			}
			if n := p.requests("lookup_invoice"); n != 0 {
				t.Errorf("%d lookup_invoice requests; the notification should do", n)
			}
		})
	}
}

// TestListenWalletWithoutNotifications: a wallet whose info event offers
// no notifications is not listened to, and Received says so at once.
func TestListenWalletWithoutNotifications(t *testing.T) {
	p := startPayee(t, nwc.ServiceOptions{NoNotifications: true})
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	if ok, err := p.client.Listen(ctx); ok || err != nil {
		t.Fatalf("Listen: %v %v; want false, nil", ok, err)
	}
	if _, err := p.client.Received(ctx, strings.Repeat("ab", 32)); !errors.Is(err, nwc.ErrNotListening) {
		t.Fatalf("Received: %v", err)
	}
}

// TestNotificationsBadInput: a notification from another key, p-tagged to
// another connection, of a payment sent, undecryptable, without an amount
// or with a malformed hash is heard as nothing; a second notification of a
// payment already heard (a replay, or a wallet that changes its story)
// changes nothing. Every one of them is logged or filtered out; the URI's
// secret is never logged.
func TestNotificationsBadInput(t *testing.T) {
	p := startPayee(t, nwc.ServiceOptions{})
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	if ok, err := p.client.Listen(ctx); !ok || err != nil {
		t.Fatalf("Listen: %v %v", ok, err)
	}
	me := p.secret.Public()
	h := func(c byte) string { return strings.Repeat(string([]byte{c, c}), 32) }
	kind, scheme := nwc.KindNotificationNIP44, nwc.EncryptionNIP44
	stranger := nostr.Generate()
	p.publish(t, stranger, me, kind, scheme, received(h('1'), 5_000))                                    // another key
	p.publish(t, p.service, nostr.Generate().Public(), kind, scheme, received(h('2'), 5_000))            // another connection
	p.publish(t, p.service, me, nwc.KindNotificationNIP04, nwc.EncryptionNIP04, received(h('3'), 5_000)) // the other kind: not listened to
	p.publish(t, p.service, me, kind, scheme, map[string]any{"notification_type": "payment_sent",
		"notification": map[string]any{"type": "outgoing", "payment_hash": h('4'), "amount": 5_000}})
	p.publish(t, p.service, me, kind, scheme, received(h('5'), 0))
	p.publish(t, p.service, me, kind, scheme, received("ABCD", 5_000))
	p.publish(t, p.service, me, kind, nwc.EncryptionNIP04, received(h('6'), 5_000)) // NIP-04 content on the NIP-44 kind
	p.publish(t, p.service, me, kind, scheme, received(h('7'), 5_000))
	p.publish(t, p.service, me, kind, scheme, received(h('7'), 9_000)) // a second word on h7
	// A relay delivers in order: once the last is heard, all were read.
	p.publish(t, p.service, me, kind, scheme, received(h('8'), 1_000))
	if err := p.log.WaitFor(ctx, "payment_hash="+h('8')); err != nil {
		t.Fatal(err)
	}
	for _, c := range "1234567" {
		msat, err := heardBy(p.client, h(byte(c)))
		switch {
		case c == '7' && (err != nil || msat != 5_000):
			t.Errorf("h7: %d msat, %v; want the first notification's 5000", msat, err)
		case c != '7' && err == nil:
			t.Errorf("h%c heard (%d msat) from a notification that should have been ignored", c, msat)
		}
	}
	logs := p.log.String()
	for _, want := range []string{"not a payment received", "amount 0 msat", `payment_hash \"ABCD\"`, "undecryptable", "already heard"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line says %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, p.secret.Hex()) {
		t.Error("the connection secret was logged")
	}
}

// TestListenEndsWithClose: Close ends the listener (goleak checks that its
// reader is gone), and a closed client does not listen again.
func TestListenEndsWithClose(t *testing.T) {
	p := startPayee(t, nwc.ServiceOptions{})
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	if ok, err := p.client.Listen(ctx); !ok || err != nil {
		t.Fatalf("Listen: %v %v", ok, err)
	}
	p.client.Close()
	if ok, err := p.client.Listen(ctx); ok || err == nil {
		t.Fatalf("Listen after Close: %v %v", ok, err)
	}
}

// silentRelay serves the wallet's info event to whoever asks for it and
// never answers any other subscription: a relay on which notifications
// cannot be listened to.
func silentRelay(t *testing.T, info nostr.Event) string {
	return relaytest.Scripted(t, func(filters []nostr.Filter) relaytest.Answer {
		if len(filters) > 0 && slices.Contains(filters[0].Kinds, nwc.KindInfo) {
			return relaytest.Answer{Events: []nostr.Event{info}, EOSE: true}
		}
		return relaytest.Answer{}
	})
}

// TestListenGivesUpOnASilentRelay: a relay that never confirms the
// notification subscription fails Listen within its deadline (the error
// names the relay, not the secret), and for a while after that Listen
// says at once that there is nothing to listen to, so that paid calls
// look their payments up rather than wait for that relay again.
func TestListenGivesUpOnASilentRelay(t *testing.T) {
	wallet, secret := nostr.Generate(), nostr.Generate()
	info := nostr.Event{Kind: nwc.KindInfo, CreatedAt: nostr.Now(), Content: "make_invoice lookup_invoice notifications",
		Tags: nostr.Tags{{"notifications", "payment_received"}, {"encryption", "nip44_v2"}}}
	if err := info.Sign(wallet); err != nil {
		t.Fatal(err)
	}
	url := silentRelay(t, info)
	c := nwc.NewClient(nwc.NewURI(wallet.Public(), []string{url}, secret), nwc.ClientOptions{Timeout: testwait.Timeout(10 * time.Second)})
	defer c.Close()
	// The deadline is what this test is about: Listen waits that long.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ok, err := c.Listen(ctx)
	if ok || !errors.Is(err, nwc.ErrNoAnswer) || !strings.Contains(err.Error(), url) || strings.Contains(err.Error(), secret.Hex()) {
		t.Fatalf("Listen on a silent relay: %v, %v", ok, err)
	}
	if ok, err := c.Listen(context.Background()); ok || err != nil {
		t.Fatalf("Listen again at once: %v, %v; want false, nil", ok, err)
	}
}

// The payee's connection hears of a payment before the payer's: a server
// waits on its payment_received to run the call it was paid for.
func TestServiceNotifiesThePayeeFirst(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	net.AddWallet("alice", 1_000_000)
	net.AddWallet("bob", 0)
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()
	svc := nwc.NewService(net, pool, nwc.ServiceOptions{Encryptions: []string{nwc.EncryptionNIP44}})
	bob, _ := svc.Connect("bob", nostr.Generate(), nostr.Generate())
	var payers []string
	for range 5 { // the payer's connections outnumber the payee's
		u, _ := svc.Connect("alice", nostr.Generate(), nostr.Generate())
		payers = append(payers, u.Client().Hex())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-svc.Ready()
	watch := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{nwc.KindNotificationNIP44},
		Tags: nostr.TagMap{"p": append([]string{bob.Client().Hex()}, payers...)}}, 0)
	defer watch.Close()
	<-watch.Ready()
	payee, err := net.Wallet("bob")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		inv, err := payee.MakeInvoice(context.Background(), 1000, "first", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := net.Pay("alice", inv.Bolt11); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := testwait.Context(t, 10*time.Second)
		for n := 0; n < 1+len(payers); n++ {
			select {
			case evt := <-watch.Events():
				if to := evt.Tags.Find("p"); n == 0 && (len(to) < 2 || to[1] != bob.Client().Hex()) {
					t.Fatalf("payment %d: the first notification went to %v, not the payee", i, to)
				}
			case <-wctx.Done():
				t.Fatalf("payment %d: %d of %d notifications", i, n, 1+len(payers))
			}
		}
		wcancel()
	}
}
