package nwc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// world is a relay, a simulated network with alice (100 000 sat) and bob
// (nothing), an NWC service for both, and a client per wallet.
type world struct {
	net     *lnsim.Network
	alice   *nwc.Client
	bob     *nwc.Client
	uris    map[string]nwc.URI
	relay   string
	mu      sync.Mutex
	schemes map[string]int // encryption → requests answered
}

func (w *world) seen() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.schemes {
		out[k] = v
	}
	return out
}

func startWorld(t *testing.T, opts nwc.ServiceOptions) *world {
	t.Helper()
	r := relaytest.Start(t, relay.Options{})
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	net.AddWallet("alice", 100_000_000)
	net.AddWallet("bob", 0)
	w := &world{net: net, relay: r.URL, uris: map[string]nwc.URI{}, schemes: map[string]int{}}
	opts.OnRequest = func(method, enc string) {
		w.mu.Lock()
		w.schemes[enc]++
		w.mu.Unlock()
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	svc := nwc.NewService(net, pool, opts)
	for _, name := range []string{"alice", "bob"} {
		u, err := svc.Connect(name, nostr.Generate(), nostr.Generate())
		if err != nil {
			t.Fatal(err)
		}
		w.uris[name] = u
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("service: %v", err)
		}
		pool.Close()
	})
	select {
	case <-svc.Ready():
	case err := <-done:
		t.Fatalf("service: %v", err)
	}
	w.alice = nwc.NewClient(w.uris["alice"], nwc.ClientOptions{Timeout: 10 * time.Second})
	w.bob = nwc.NewClient(w.uris["bob"], nwc.ClientOptions{Timeout: 10 * time.Second})
	t.Cleanup(func() { w.alice.Close(); w.bob.Close() })
	return w
}

func wantWalletError(t *testing.T, err error, code string) {
	t.Helper()
	var we *payments.WalletError
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("error %v, want *payments.WalletError %s", err, code)
	}
}

// payBetween exercises every method: bob invoices, alice pays, both look
// it up settled, balances move by exactly the amount.
func payBetween(t *testing.T, w *world) {
	t.Helper()
	ctx := context.Background()
	info, err := w.bob.GetInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node, _ := w.net.NodeID("bob")
	if info.Pubkey != node || info.Network != "regtest" || !strings.Contains(info.Alias, "simulator") {
		t.Fatalf("get_info %+v", info)
	}
	inv, err := w.bob.MakeInvoice(ctx, 42_000, "tool call", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if inv.AmountMsat != 42_000 || !strings.HasPrefix(inv.Bolt11, "lnbcrt") || inv.Settled() {
		t.Fatalf("invoice %+v", inv)
	}
	pending, err := w.bob.LookupInvoice(ctx, inv.PaymentHash)
	if err != nil || pending.Settled() {
		t.Fatalf("lookup before payment: %+v %v", pending, err)
	}
	pre, err := w.alice.PayInvoice(ctx, inv.Bolt11)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*nwc.Client{w.alice, w.bob} {
		got, err := c.LookupInvoice(ctx, inv.PaymentHash)
		if err != nil || !got.Settled() || got.Preimage != pre {
			t.Fatalf("lookup after payment: %+v %v", got, err)
		}
	}
	a, err := w.alice.GetBalance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.bob.GetBalance(ctx)
	if a != 100_000_000-42_000 || b != 42_000 {
		t.Fatalf("balances %d %d", a, b)
	}
}

// TestNIP44 runs every method through a relay with a service that
// announces both schemes: the client picks NIP-44 and only NIP-44 is used.
func TestNIP44(t *testing.T) {
	w := startWorld(t, nwc.ServiceOptions{})
	caps, err := w.alice.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if enc, _ := caps.Encryption(); enc != nwc.EncryptionNIP44 || len(caps.Notifications) != 2 {
		t.Fatalf("capabilities %+v", caps)
	}
	payBetween(t, w)
	if s := w.seen(); s[nwc.EncryptionNIP04] != 0 || s[nwc.EncryptionNIP44] < 7 {
		t.Fatalf("schemes used: %v", s)
	}
}

// TestNIP04WithoutEncryptionTag: a service whose info event has no
// encryption tag is a NIP-04 wallet; the client speaks NIP-04 to it.
func TestNIP04WithoutEncryptionTag(t *testing.T) {
	w := startWorld(t, nwc.ServiceOptions{OmitEncryptionTag: true, Encryptions: []string{nwc.EncryptionNIP04}})
	payBetween(t, w)
	if s := w.seen(); s[nwc.EncryptionNIP44] != 0 || s[nwc.EncryptionNIP04] < 7 {
		t.Fatalf("schemes used: %v", s)
	}
}

// TestServiceAnswersNIP04AndNIP44 checks that one service answers a
// NIP-04 client (the reference SDK's choice) and a NIP-44 one alike.
func TestServiceAnswersNIP04AndNIP44(t *testing.T) {
	w := startWorld(t, nwc.ServiceOptions{})
	if _, err := w.alice.GetBalance(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A NIP-04-only client: the same connection, forced to NIP-04 by a
	// hand-made request.
	u := w.uris["bob"]
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: u.Relays})
	defer pool.Close()
	plain := `{"method":"get_balance","params":{}}`
	resp := rawRequest(t, pool, u, plain, "") // no encryption tag: NIP-04
	if !strings.Contains(resp, `"balance":0`) {
		t.Fatalf("NIP-04 answer %s", resp)
	}
	if s := w.seen(); s[nwc.EncryptionNIP04] != 1 || s[nwc.EncryptionNIP44] != 1 {
		t.Fatalf("schemes used: %v", s)
	}
}

// rawRequest sends plain encrypted with NIP-04, with tag as its
// encryption tag (none if empty), and returns the decrypted response.
func rawRequest(t *testing.T, pool *nostrx.Pool, u nwc.URI, plain, tag string) string {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	content, err := nwc.EncryptForTest(nwc.EncryptionNIP04, plain, u.Secret(), u.Wallet)
	if err != nil {
		t.Fatal(err)
	}
	evt := nostr.Event{Kind: nwc.KindRequest, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", u.Wallet.Hex()}}, Content: content}
	if tag != "" {
		evt.Tags = append(evt.Tags, nostr.Tag{"encryption", tag})
	}
	evt.Sign(u.Secret())
	sub := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{nwc.KindResponse}, Tags: nostr.TagMap{"e": {evt.ID.Hex()}}}, 1)
	defer sub.Close()
	<-sub.Ready()
	if err := pool.Publish(ctx, evt); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-sub.Events():
		out, err := nwc.DecryptForTest(nwc.EncryptionNIP04, r.Content, u.Secret(), u.Wallet)
		if err != nil {
			t.Fatal(err)
		}
		return out
	case <-ctx.Done():
		t.Fatal("no answer")
	}
	return ""
}

// TestUnsupportedEncryption: a NIP-04-only service answers a request that
// claims NIP-44 with UNSUPPORTED_ENCRYPTION, in NIP-04.
func TestUnsupportedEncryption(t *testing.T) {
	w := startWorld(t, nwc.ServiceOptions{Encryptions: []string{nwc.EncryptionNIP04}})
	u := w.uris["bob"]
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: u.Relays})
	defer pool.Close()
	resp := rawRequest(t, pool, u, `{"method":"get_balance","params":{}}`, nwc.EncryptionNIP44)
	r, err := nwc.DecodeResponse([]byte(resp))
	if err != nil || r.Error == nil || r.Error.Code != payments.CodeUnsupportedEncryption {
		t.Fatalf("answer %s (%v)", resp, err)
	}
}

// TestWalletErrors: the wallet's refusals reach the caller as
// *payments.WalletError with their NIP-47 code.
func TestWalletErrors(t *testing.T) {
	w := startWorld(t, nwc.ServiceOptions{})
	ctx := context.Background()
	inv, err := w.alice.MakeInvoice(ctx, 1_000, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.bob.PayInvoice(ctx, inv.Bolt11)
	wantWalletError(t, err, payments.CodeInsufficientBalance)
	_, err = w.bob.LookupInvoice(ctx, strings.Repeat("00", 32))
	wantWalletError(t, err, payments.CodeNotFound)
	big, _ := w.bob.MakeInvoice(ctx, 1_000, "", time.Minute)
	if _, err := w.alice.PayInvoice(ctx, big.Bolt11); err != nil {
		t.Fatal(err)
	}
	_, err = w.alice.PayInvoice(ctx, big.Bolt11)
	wantWalletError(t, err, payments.CodePaymentFailed)
	_, err = w.alice.PayInvoice(ctx, "lnbcrt1nonsense")
	wantWalletError(t, err, payments.CodePaymentFailed)
}

// TestReceiveOnlyConnection: a service limited to some methods lists only
// those in its info event, so the client can tell it may not pay
// (CanPay), and refuses the others with RESTRICTED, moving nothing.
func TestReceiveOnlyConnection(t *testing.T) {
	w := startWorld(t, nwc.ServiceOptions{Methods: []string{nwc.MethodMakeInvoice, nwc.MethodLookupInvoice, nwc.MethodGetInfo}})
	ctx := context.Background()
	caps, err := w.alice.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if caps.CanPay() || !slices.Contains(caps.Methods, nwc.MethodMakeInvoice) {
		t.Fatalf("receive-only capabilities %+v: CanPay %v", caps, caps.CanPay())
	}
	info, err := w.alice.GetInfo(ctx)
	if err != nil || slices.Contains(info.Methods, nwc.MethodPayInvoice) {
		t.Fatalf("get_info %+v %v: lists pay_invoice", info, err)
	}
	inv, err := w.bob.MakeInvoice(ctx, 1_000, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.alice.PayInvoice(ctx, inv.Bolt11)
	wantWalletError(t, err, payments.CodeRestricted)
	_, err = w.alice.GetBalance(ctx)
	wantWalletError(t, err, payments.CodeRestricted)
	if b, _ := w.net.Balance("alice"); b != 100_000_000 {
		t.Fatalf("alice's balance %d msat after a restricted payment", b)
	}
	full := startWorld(t, nwc.ServiceOptions{})
	if caps, err := full.alice.Capabilities(ctx); err != nil || !caps.CanPay() {
		t.Fatalf("a full connection: %+v %v; want CanPay", caps, err)
	}
}

// TestUnknownClientIgnored: a request signed by a key that is not the
// connection's client gets no answer, so the client reports ErrNoAnswer.
func TestUnknownClientIgnored(t *testing.T) {
	w := startWorld(t, nwc.ServiceOptions{})
	u := nwc.NewURI(w.uris["alice"].Wallet, []string{w.relay}, nostr.Generate())
	c := nwc.NewClient(u, nwc.ClientOptions{Timeout: 500 * time.Millisecond})
	defer c.Close()
	_, err := c.GetBalance(context.Background())
	if !errors.Is(err, nwc.ErrNoAnswer) {
		t.Fatalf("error %v, want ErrNoAnswer", err)
	}
}

// TestNoWallet: a URI naming a wallet that has published nothing fails
// fast with ErrNoAnswer, naming the relay.
func TestNoWallet(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := nwc.NewClient(nwc.NewURI(nostr.Generate().Public(), []string{r.URL}, nostr.Generate()), nwc.ClientOptions{Timeout: 5 * time.Second})
	defer c.Close()
	_, err := c.GetBalance(context.Background())
	if !errors.Is(err, nwc.ErrNoAnswer) || !strings.Contains(err.Error(), r.URL) {
		t.Fatalf("error %v", err)
	}
}

func TestCapabilitiesEncryption(t *testing.T) {
	for _, tc := range []struct {
		offered []string
		want    string
	}{
		{nil, nwc.EncryptionNIP04},
		{[]string{"nip04"}, nwc.EncryptionNIP04},
		{[]string{"nip04", "nip44_v2"}, nwc.EncryptionNIP44},
		{[]string{"nip44_v2"}, nwc.EncryptionNIP44},
	} {
		if got, err := (nwc.Capabilities{Encryptions: tc.offered}).Encryption(); err != nil || got != tc.want {
			t.Errorf("%v: %q %v", tc.offered, got, err)
		}
	}
	_, err := nwc.Capabilities{Encryptions: []string{"nip99"}}.Encryption()
	wantWalletError(t, err, payments.CodeUnsupportedEncryption)
}

func TestParseURI(t *testing.T) {
	sk := nostr.Generate()
	wallet := nostr.Generate().Public()
	for _, s := range []string{
		"nostr+walletconnect://" + wallet.Hex() + "?relay=wss%3A%2F%2Frelay.example&secret=" + sk.Hex() + "&lud16=a%40b.c",
		"nostr+walletconnect:" + wallet.Hex() + "?relay=wss://relay.example&secret=" + sk.Hex() + "&lud16=a@b.c",
	} {
		u, err := nwc.ParseURI(s)
		if err != nil {
			t.Fatal(err)
		}
		if u.Wallet != wallet || u.Secret() != sk || len(u.Relays) != 1 || u.Relays[0] != "wss://relay.example" || u.LUD16 != "a@b.c" {
			t.Fatalf("parsed %v", u)
		}
		back, err := nwc.ParseURI(u.Reveal())
		if err != nil || back.Secret() != sk || back.Wallet != wallet {
			t.Fatalf("Reveal does not parse back: %v", err)
		}
		for _, printed := range []string{u.String(), fmt.Sprint(u), fmt.Sprintf("%v %+v %#v %s", u, u, u, u), fmt.Sprintf("%+v", struct{ U nwc.URI }{u})} {
			if strings.Contains(printed, sk.Hex()) || !strings.Contains(printed, "REDACTED") {
				t.Fatalf("secret printed: %s", printed)
			}
		}
	}
	for _, bad := range []string{
		"",
		"https://x",
		"nostr+walletconnect://abc?relay=wss://r&secret=" + sk.Hex(),
		"nostr+walletconnect://" + wallet.Hex() + "?secret=" + sk.Hex(),
		"nostr+walletconnect://" + wallet.Hex() + "?relay=wss://r",
		"nostr+walletconnect://" + wallet.Hex() + "?relay=wss://r&secret=" + sk.Hex()[:63] + "g",
		"nostr+walletconnect://" + wallet.Hex() + "?relay=wss://r&secret=" + sk.Hex() + "&secret=" + sk.Hex(),
	} {
		_, err := nwc.ParseURI(bad)
		if !errors.Is(err, nwc.ErrInvalidURI) {
			t.Errorf("%q: %v", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), sk.Hex()[:20]) {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}

// TestServiceUnheardAnswerIsNoNews: an answer that nobody hears (the
// client gave up on its request, as a payment processor does when the
// request it polls for is withdrawn) is logged at debug, not at the
// default level.
func TestServiceUnheardAnswerIsNoNews(t *testing.T) {
	var logs waitbuf.Buffer
	w := startWorld(t, nwc.ServiceOptions{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	u := w.uris["alice"]
	content, err := nwc.EncryptForTest(nwc.EncryptionNIP04, `{"method":"get_balance","params":{}}`, u.Secret(), u.Wallet)
	if err != nil {
		t.Fatal(err)
	}
	evt := nostr.Event{Kind: nwc.KindRequest, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", u.Wallet.Hex()}}, Content: content}
	evt.Sign(u.Secret())
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: u.Relays})
	defer pool.Close()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	if err := pool.Publish(ctx, evt); err != nil {
		t.Fatal(err)
	}
	logs.Await(t, 10*time.Second, "nwc: response not delivered")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "response not delivered") && !strings.Contains(line, "level=DEBUG") {
			t.Errorf("at the default level: %s", line)
		}
	}
}
