package nwc_test

import (
	"context"
	"errors"
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

// Requests made at once by one client share its one subscription to the
// wallet's responses: each gets the answer to its own request.
func TestClient_ConcurrentRequestsGetTheirOwnAnswers(t *testing.T) {
	w := startWorld(t, nwc.ServiceOptions{})
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	amounts := []int64{1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 7_000, 8_000}
	hashes := make([]string, len(amounts))
	var wg sync.WaitGroup
	errs := make(chan error, len(amounts))
	for i, msat := range amounts {
		wg.Go(func() {
			inv, err := w.bob.MakeInvoice(ctx, msat, "concurrent", time.Minute)
			if err != nil {
				errs <- err
				return
			}
			hashes[i] = inv.PaymentHash
			if inv.AmountMsat != msat {
				errs <- errors.New("an answer went to another request")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, h := range hashes {
		got, err := w.bob.LookupInvoice(ctx, h)
		if err != nil || got.AmountMsat != amounts[i] {
			t.Fatalf("invoice %d: %+v, %v", i, got, err)
		}
	}
}

// A request waiting for its answer when the client's responses stop
// coming (its pool closed) ends at once, not at its timeout.
func TestClient_RequestEndsWhenItsResponsesCannotCome(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	net.AddWallet("bob", 0)
	svcPool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer svcPool.Close()
	svc := nwc.NewService(net, svcPool, nwc.ServiceOptions{})
	u, _ := svc.Connect("bob", nostr.Generate(), nostr.Generate())
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(sctx) }()
	<-svc.Ready()

	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	var logs waitbuf.Buffer
	c := nwc.NewClient(u, nwc.ClientOptions{Pool: pool, Timeout: time.Hour, Logger: logs.Logger()})
	defer c.Close()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	if _, err := c.GetBalance(ctx); err != nil { // the info event read, the subscription open
		t.Fatal(err)
	}
	stop() // the wallet service stops answering; something still hears requests
	<-done
	deaf := svcPool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{nwc.KindRequest}, Tags: nostr.TagMap{"p": {u.Wallet.Hex()}}}, 0)
	defer deaf.Close()
	<-deaf.Ready()
	res := make(chan error, 1)
	go func() { _, err := c.GetBalance(ctx); res <- err }()
	// The request is published (a relay took it) and waits for its
	// answer when the pool goes.
	testwait.Eventually(t, 10*time.Second, "the second request sent", func() bool {
		return strings.Count(logs.String(), "nwc request sent") == 2
	})
	pool.Close()
	select {
	case err := <-res:
		if err == nil || errors.Is(err, nwc.ErrNoAnswer) && !strings.Contains(err.Error(), "closed") {
			t.Fatalf("request after the pool closed: %v; want it told the subscription closed", err)
		}
	case <-ctx.Done():
		t.Fatal("the request still waits after its responses stopped")
	}
}
