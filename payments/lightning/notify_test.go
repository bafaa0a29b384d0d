package lightning_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip44"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// never is a poll interval no test waits for: a payment that settles
// under it settled on the wallet's notification (or the final look).
const never = time.Hour

// notified is a processor receiving into "server" through an NWC wallet
// service whose keys the test knows, to sign notifications of its own.
type notified struct {
	net     *lnsim.Network
	proc    *lightning.Processor
	pool    *nostrx.Pool
	service nostr.SecretKey
	client  nostr.PubKey
	log     *waitbuf.Buffer // the processor's and its wallet client's
	mu      sync.Mutex
	methods map[string]int // requests the service answered, by method
}

func startNotified(t *testing.T, sopts nwc.ServiceOptions, popts lightning.ProcessorOptions) *notified {
	t.Helper()
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	n := &notified{net: newNet(t, nil), service: nostr.Generate(), log: &waitbuf.Buffer{}, methods: map[string]int{}}
	sopts.OnRequest = func(method, _ string) {
		n.mu.Lock()
		n.methods[method]++
		n.mu.Unlock()
	}
	n.pool = nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	svc := nwc.NewService(n.net, n.pool, sopts)
	secret := nostr.Generate()
	n.client = secret.Public()
	u, err := svc.Connect("server", n.service, secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; n.pool.Close() })
	<-svc.Ready()
	w := nwc.NewClient(u, nwc.ClientOptions{Timeout: testwait.Timeout(10 * time.Second), Logger: n.log.Logger()})
	t.Cleanup(func() { w.Close() })
	popts.Logger = n.log.Logger()
	n.proc = lightning.NewProcessor(w, popts)
	return n
}

func (n *notified) lookups() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.methods["lookup_invoice"]
}

// announce publishes a payment_received notification of hash for msat,
// signed by signer (the service, or not) to the processor's connection.
func (n *notified) announce(t *testing.T, signer nostr.SecretKey, hash string, msat int64) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"notification_type": "payment_received",
		"notification": map[string]any{"type": "incoming", "payment_hash": hash, "amount": msat, "settled_at": time.Now().Unix()}})
	key, err := nip44.GenerateConversationKey(n.client, signer)
	if err != nil {
		t.Fatal(err)
	}
	content, err := nip44.Encrypt(string(body), key)
	if err != nil {
		t.Fatal(err)
	}
	evt := nostr.Event{Kind: nwc.KindNotificationNIP44, CreatedAt: nostr.Now(), Content: content, Tags: nostr.Tags{{"p", n.client.Hex()}}}
	if err := evt.Sign(signer); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	if err := n.pool.Publish(ctx, evt); err != nil && !errors.Is(err, nostrx.ErrUnheard) {
		t.Fatal(err)
	}
}

func hashOf(t *testing.T, req payments.PaymentRequired) string {
	t.Helper()
	inv, err := bolt11.Decode(req.PayReq)
	if err != nil {
		t.Fatal(err)
	}
	return inv.PaymentHash()
}

// require issues a payment request for sats.
func (n *notified) require(ctx context.Context, t *testing.T, sats int64) (payments.Charge, payments.PaymentRequired) {
	t.Helper()
	charge := payments.Charge{Amount: sats}
	req, err := n.proc.Require(ctx, charge)
	if err != nil {
		t.Fatal(err)
	}
	return charge, req
}

// pay pays req from the simulator's "client" wallet.
func (n *notified) pay(t *testing.T, req payments.PaymentRequired) {
	t.Helper()
	if _, err := n.net.Pay("client", req.PayReq); err != nil {
		t.Fatal(err)
	}
}

// payWhileVerifying issues a payment request for sats, starts Verify,
// pays, and returns what Verify returned.
func (n *notified) payWhileVerifying(ctx context.Context, t *testing.T, sats int64) error {
	t.Helper()
	charge, req := n.require(ctx, t, sats)
	done := verifying(ctx, n.proc, charge, req)
	n.pay(t, req)
	return <-done
}

// verifying runs Verify on its own goroutine; the channel has its result.
func verifying(ctx context.Context, p *lightning.Processor, c payments.Charge, req payments.PaymentRequired) <-chan error {
	done := make(chan error, 1)
	go func() { done <- p.Verify(ctx, c, req) }()
	return done
}

// TestVerifySettlesOnNotification: with a wallet that announces payments,
// the processor listens before its invoice leaves, and settles on the
// notification: no lookup_invoice at all, although lookups would come
// only after an hour.
func TestVerifySettlesOnNotification(t *testing.T) {
	n := startNotified(t, nwc.ServiceOptions{}, lightning.ProcessorOptions{PollMin: never, NotifiedPollMin: never})
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	if err := n.payWhileVerifying(ctx, t, 21); err != nil {
		t.Fatalf("Verify: %v; log:\n%s", err, n.log)
	}
	if got := n.lookups(); got != 0 {
		t.Errorf("%d lookup_invoice requests", got)
	}
	if !strings.Contains(n.log.String(), "settled by the wallet's notification") {
		t.Errorf("the processor does not say how it settled:\n%s", n.log)
	}
}

// TestVerifyNotificationBeforeWait: a payment announced between Require
// and Verify (the gate records the payment request and sends it in
// between; a quick payer may be quicker) is not lost: Verify settles on
// it at once.
func TestVerifyNotificationBeforeWait(t *testing.T) {
	n := startNotified(t, nwc.ServiceOptions{}, lightning.ProcessorOptions{PollMin: never, NotifiedPollMin: never})
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	charge, req := n.require(ctx, t, 21)
	n.pay(t, req)
	if err := n.log.WaitFor(ctx, "nwc: payment received", hashOf(t, req)); err != nil {
		t.Fatal(err)
	}
	if err := n.proc.Verify(ctx, charge, req); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got := n.lookups(); got != 0 {
		t.Errorf("%d lookup_invoice requests", got)
	}
}

// TestVerifyNotificationBadInput: notifications from another key, of
// another payment, for less than the price, or replayed from an earlier
// payment settle nothing; the payment itself, made after them, is still
// credited (by lookup: the wallet's own notification of it came after its
// word for less, and the first word on a payment is the one kept).
func TestVerifyNotificationBadInput(t *testing.T) {
	n := startNotified(t, nwc.ServiceOptions{Mute: true}, lightning.ProcessorOptions{PollMin: never, NotifiedPollMin: never})
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	charge, earlier := n.require(ctx, t, 21)
	n.announce(t, n.service, hashOf(t, earlier), 21_000)
	if err := n.proc.Verify(ctx, charge, earlier); err != nil {
		t.Fatalf("the earlier payment: %v", err)
	}

	_, req := n.require(ctx, t, 21)
	hash := hashOf(t, req)
	vctx, stop := context.WithCancel(ctx)
	defer stop()
	done := verifying(vctx, n.proc, charge, req)
	n.announce(t, nostr.Generate(), hash, 21_000)              // another key
	n.announce(t, n.service, strings.Repeat("ab", 32), 21_000) // another payment
	n.announce(t, n.service, hashOf(t, earlier), 21_000)       // the earlier payment again
	n.announce(t, n.service, hash, 20_999)                     // less than the price
	if err := n.log.WaitFor(ctx, "does not settle it", "less than the 21000 asked"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Verify returned %v on notifications that settle nothing", err)
	default:
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify: %v", err)
	}
	n.pay(t, req)
	if err := n.proc.Verify(ctx, charge, req); err != nil {
		t.Fatalf("the payment itself: %v", err)
	}
}

// TestVerifyWalletThatNeverNotifies: a wallet that offers notifications
// and sends none, and one that offers none, still settle, by lookups.
func TestVerifyWalletThatNeverNotifies(t *testing.T) {
	for name, sopts := range map[string]nwc.ServiceOptions{"mute": {Mute: true}, "none": {NoNotifications: true}} {
		t.Run(name, func(t *testing.T) {
			n := startNotified(t, sopts, lightning.ProcessorOptions{PollMin: 5 * time.Millisecond, NotifiedPollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond})
			ctx, cancel := testwait.Context(t, 30*time.Second)
			defer cancel()
			if err := n.payWhileVerifying(ctx, t, 3); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if n.lookups() == 0 || !strings.Contains(n.log.String(), "settled by lookup") {
				t.Errorf("%d lookups; log:\n%s", n.lookups(), n.log)
			}
		})
	}
}

// TestVerifyLooksOnceMoreBeforeGivingUp: a payment whose notification
// never came, made before a wait ran out, is credited by one last lookup
// when the wait's deadline passes.
func TestVerifyLooksOnceMoreBeforeGivingUp(t *testing.T) {
	n := startNotified(t, nwc.ServiceOptions{Mute: true}, lightning.ProcessorOptions{PollMin: never, NotifiedPollMin: never})
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	charge, req := n.require(ctx, t, 3)
	n.pay(t, req)
	// The deadline is what this test is about: the wait ends there,
	// paid or not.
	vctx, vcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer vcancel()
	if err := n.proc.Verify(vctx, charge, req); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if n.lookups() != 1 {
		t.Errorf("%d lookups, want the one last", n.lookups())
	}
	// Called off rather than run out: no last look.
	_, req = n.require(ctx, t, 3)
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := n.proc.Verify(cctx, charge, req); !errors.Is(err, context.Canceled) || n.lookups() != 1 {
		t.Fatalf("Verify cancelled: %v, %d lookups", err, n.lookups())
	}
}

// TestVerifyPollOnly: PollOnly never listens, and settles by lookup.
func TestVerifyPollOnly(t *testing.T) {
	n := startNotified(t, nwc.ServiceOptions{}, lightning.ProcessorOptions{PollOnly: true, PollMin: 5 * time.Millisecond})
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	if err := n.payWhileVerifying(ctx, t, 3); err != nil || n.lookups() == 0 || strings.Contains(n.log.String(), "listening") {
		t.Fatalf("Verify: %v, %d lookups; log:\n%s", err, n.lookups(), n.log)
	}
}
