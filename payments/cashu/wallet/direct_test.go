package wallet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/cashu"
)

// directFixture is a mint, a client's wallet holding 100 sats there and
// its Bearer, and a server's wallet with its Redeemer of that mint.
type directFixture struct {
	tm     *testMint
	client *Wallet
	bearer *Bearer
	server *Wallet
	red    *Redeemer
}

func newDirectFixture(t *testing.T, fee uint64, hc *http.Client) *directFixture {
	t.Helper()
	f := &directFixture{tm: startMint(t, fee), client: newWallet(t, t.TempDir(), nil, nil), server: newWallet(t, t.TempDir(), hc, nil)}
	if err := f.client.Mint(context.Background(), f.tm.url, 100, f.tm.pay); err != nil {
		t.Fatal(err)
	}
	f.bearer = NewBearer(f.client)
	red, err := NewRedeemer(f.server, []string{f.tm.url + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f.red = red
	return f
}

func (f *directFixture) token(t *testing.T, amount uint64) string {
	t.Helper()
	var tok cashu.Token
	if err := f.client.Send(context.Background(), f.tm.url, amount, keep(&tok)); err != nil {
		t.Fatal(err)
	}
	enc, err := tok.EncodeV4()
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

func rejected(t *testing.T, err error, want error) *payments.RejectedError {
	t.Helper()
	var rej *payments.RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, want) {
		t.Fatalf("redeem: %v; want a rejection of %v", err, want)
	}
	return rej
}

// A direct payment of exactly the price leaves the client's wallet for the
// server's; one worth more comes back as change the client keeps; the mint
// fee is counted; nothing is lost on either side.
func TestDirectCashu_RedeemKeepsPriceReturnsChange(t *testing.T) {
	ctx := context.Background()
	f := newDirectFixture(t, 0, nil)
	prep, err := f.bearer.Prepare(ctx, 21, 50, "")
	if err != nil || prep.Value != 21 {
		t.Fatalf("prepare: %+v, %v", prep, err)
	}
	red, err := f.red.Redeem(ctx, payments.Charge{Amount: 21, Unit: "sats"}, prep.Payload)
	if err != nil || red.Amount != 21 || red.Change != "" {
		t.Fatalf("redeem of exactly the price: %+v, %v", red, err)
	}
	if s, _ := held(t, f.server, f.tm.url); s != 21 {
		t.Fatalf("server holds %d, want 21", s)
	}
	red, err = f.red.Redeem(ctx, payments.Charge{Amount: 5, Unit: "sats"}, f.token(t, 30))
	if err != nil || red.Amount != 5 || red.ChangeAmount != 25 || red.Change == "" {
		t.Fatalf("redeem of 30 for 5: %+v, %v", red, err)
	}
	got, err := f.bearer.KeepChange(ctx, red.Change)
	if err != nil || got != 25 {
		t.Fatalf("keep change: %d, %v", got, err)
	}
	if _, err := f.bearer.KeepChange(ctx, red.Change); err == nil {
		t.Fatal("the same change kept twice")
	}
	if c, _ := held(t, f.client, f.tm.url); c != 100-21-5 {
		t.Fatalf("client holds %d, want %d", c, 100-21-5)
	}
	if s, _ := held(t, f.server, f.tm.url); s != 26 {
		t.Fatalf("server holds %d, want 26", s)
	}
}

// Tokens that cannot pay are rejected without being consumed: the client
// puts each back (the mint says unspent) and its balance is whole.
func TestDirectCashu_RejectsWithoutConsuming(t *testing.T) {
	ctx := context.Background()
	f := newDirectFixture(t, 1000, nil) // 1 sat per input
	charge := payments.Charge{Amount: 10, Unit: "sats"}

	small := f.token(t, 10) // 8+2: a fee of 2
	rej := rejected(t, errOf(f.red.Redeem(ctx, charge, small)), payments.ErrInsufficient)
	if rej.Required != 12 {
		t.Fatalf("required %d, want the price and the fee, 12", rej.Required)
	}
	if err := f.bearer.Restore(ctx, small); err != nil {
		t.Fatalf("an insufficient token was consumed: %v", err)
	}
	other, err := NewRedeemer(f.server, []string{"https://mint.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	tok := f.token(t, 20)
	rejected(t, errOf(other.Redeem(ctx, charge, tok)), payments.ErrForeign)
	rejected(t, errOf(f.red.Redeem(ctx, payments.Charge{Amount: 10, Unit: "usd"}, tok)), payments.ErrForeign)
	rejected(t, errOf(f.red.Redeem(ctx, charge, "cashuBnotatoken")), payments.ErrInvalidPayload)
	decoded, _ := cashu.DecodeToken(tok)
	forged := decoded
	forged.Proofs = append([]cashu.Proof(nil), decoded.Proofs...)
	forged.Proofs[0].Secret = strings.Repeat("ab", 32)
	enc, _ := forged.EncodeV4()
	rejected(t, errOf(f.red.Redeem(ctx, charge, enc)), payments.ErrInvalidPayload)
	if err := f.bearer.Restore(ctx, tok); err != nil {
		t.Fatalf("a rejected token was consumed: %v", err)
	}
	if c, _ := held(t, f.client, f.tm.url); c < 100-2*3 {
		t.Fatalf("client holds %d after rejections (only swap fees may go)", c)
	}
	// Spent: redeemed once, then presented again.
	tok = f.token(t, 20)
	if _, err := f.red.Redeem(ctx, charge, tok); err != nil {
		t.Fatal(err)
	}
	rejected(t, errOf(f.red.Redeem(ctx, charge, tok)), payments.ErrSpent)
	if err := f.bearer.Restore(ctx, tok); err == nil {
		t.Fatal("a spent token was put back")
	}
}

func errOf(_ payments.Redeemed, err error) error { return err }

// lyingTransport corrupts the DLEQ proofs of the mint's swap answers, or
// loses the answer: either way the swap's outcome is unknown to the
// server, which must not call the payment rejected.
type lyingTransport struct{ lose bool }

func (l *lyingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.URL.Path != "/v1/swap" {
		return resp, err
	}
	if l.lose {
		resp.Body.Close()
		return nil, errors.New("connection reset (simulated)")
	}
	var sr cashu.SwapResponse
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if json.Unmarshal(b, &sr) == nil {
		for i := range sr.Signatures {
			if sr.Signatures[i].DLEQ != nil {
				sr.Signatures[i].DLEQ.S = strings.Repeat("01", 32)
			}
		}
		b, _ = json.Marshal(sr)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	return resp, nil
}

func TestDirectCashu_MintFailingMidSwapIsNoRejection(t *testing.T) {
	for _, lose := range []bool{false, true} {
		f := newDirectFixture(t, 0, &http.Client{Transport: &lyingTransport{lose: lose}})
		_, err := f.red.Redeem(context.Background(), payments.Charge{Amount: 5, Unit: "sats"}, f.token(t, 30))
		var rej *payments.RejectedError
		if err == nil || errors.As(err, &rej) {
			t.Fatalf("lose=%v: a swap of unknown outcome: %v; want an error that is no rejection", lose, err)
		}
	}
}

// The payment request is a NUT-18 creqA of the price in sats, single use,
// naming the mints, answered in-band; the Bearer pays it from an accepted
// mint and refuses one that names none it holds.
func TestDirectCashu_RequireAndPayRequest(t *testing.T) {
	ctx := context.Background()
	f := newDirectFixture(t, 0, nil)
	pr, err := f.red.Require(ctx, payments.Charge{Amount: 7, Unit: "sats"})
	if err != nil || pr.PMI != PMIDirect || pr.Amount != 7 {
		t.Fatalf("require: %+v, %v", pr, err)
	}
	req, err := cashu.DecodePaymentRequest(pr.PayReq)
	if err != nil || req.Amount != 7 || req.Unit != "sat" || !req.SingleUse || len(req.Mints) != 1 || req.Mints[0] != f.tm.url || len(req.Transports) != 0 || req.ID == "" {
		t.Fatalf("creqA: %+v, %v", req, err)
	}
	prep, err := f.bearer.Prepare(ctx, 7, 10, pr.PayReq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.red.Redeem(ctx, payments.Charge{Amount: 7, Unit: "sats"}, prep.Payload); err != nil {
		t.Fatal(err)
	}
	other, _ := NewRedeemer(f.server, []string{"https://mint.example.com"})
	pr, _ = other.Require(ctx, payments.Charge{Amount: 7, Unit: "sats"})
	if _, err := f.bearer.Prepare(ctx, 7, 10, pr.PayReq); !errors.Is(err, payments.ErrNotPayable) {
		t.Fatalf("a request naming no mint held: %v", err)
	}
}

// At a mint that charges an input fee, the Bearer's token covers the
// price and the fee on its own proofs, so the server takes it at once.
func TestDirectCashu_BearerCoversTheMintFee(t *testing.T) {
	ctx := context.Background()
	f := newDirectFixture(t, 1000, nil) // 1 sat per input
	prep, err := f.bearer.Prepare(ctx, 10, 20, "")
	if err != nil || prep.Value <= 10 {
		t.Fatalf("prepare 10 at a mint with fees: %+v, %v", prep, err)
	}
	red, err := f.red.Redeem(ctx, payments.Charge{Amount: 10, Unit: "sats"}, prep.Payload)
	if err != nil || red.Amount+red.ChangeAmount != prep.Value {
		t.Fatalf("redeem: %+v, %v (token worth %d)", red, err, prep.Value)
	}
	if s, _ := held(t, f.server, f.tm.url); s != 10 {
		t.Fatalf("server holds %d, want the price, 10", s)
	}
	if _, err := f.bearer.Prepare(ctx, 10, 10, ""); !errors.Is(err, payments.ErrNotPayable) {
		t.Fatalf("a price whose fee goes over the most: %v", err)
	}
}

// Two requests racing one token's proofs (encoded twice, so that no
// payload claim tells them apart): one pays, the other is rejected as
// spent, and the server keeps the price once.
func TestDirectCashu_RacingTokenPaysOnce(t *testing.T) {
	ctx := context.Background()
	f := newDirectFixture(t, 0, nil)
	v4 := f.token(t, 20)
	tok, _ := cashu.DecodeToken(v4)
	v3, err := tok.EncodeV3()
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, p := range []string{v4, v3} {
		go func() {
			_, err := f.red.Redeem(ctx, payments.Charge{Amount: 20, Unit: "sats"}, p)
			errs <- err
		}()
	}
	var ok, spent int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, payments.ErrSpent):
			rejected(t, err, payments.ErrSpent)
			spent++
		default:
			t.Fatalf("racing redeem: %v", err)
		}
	}
	if ok != 1 || spent != 1 {
		t.Fatalf("%d paid, %d spent; want one each", ok, spent)
	}
	if s, _ := held(t, f.server, f.tm.url); s != 20 {
		t.Fatalf("server holds %d, want 20", s)
	}
}

// countingTransport counts the requests to each path.
type countingTransport struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// A redemption asks the mint once: the swap, which is the authority on
// the proofs' state and signatures, with no NUT-07 request and no DLEQ
// check before it (a spent or forged token is still rejected:
// TestDirectCashu_RejectsWithoutConsuming).
func TestDirectCashu_RedeemOnlySwaps(t *testing.T) {
	ctx := context.Background()
	ct := &countingTransport{n: map[string]int{}}
	f := newDirectFixture(t, 0, &http.Client{Transport: ct})
	charge := payments.Charge{Amount: 5, Unit: "sats"}
	for i := range 2 {
		if _, err := f.red.Redeem(ctx, charge, f.token(t, 10)); err != nil {
			t.Fatal(err)
		}
		if n := ct.take(); i > 0 && (len(n) != 1 || n["/v1/swap"] != 1) {
			t.Fatalf("redemption %d asked the mint %v; want one swap and nothing else", i+1, n)
		}
	}
	// Nor are the token's DLEQ proofs checked first: the mint verifies
	// each signature as it swaps, so a proof whose DLEQ proof is wrong
	// but whose signature is the mint's is good ecash, and is taken.
	tok, err := cashu.DecodeToken(f.token(t, 5))
	if err != nil {
		t.Fatal(err)
	}
	for i := range tok.Proofs {
		d := *tok.Proofs[i].DLEQ
		d.S = d.E
		tok.Proofs[i].DLEQ = &d
	}
	enc, err := tok.EncodeV4()
	if err != nil {
		t.Fatal(err)
	}
	if red, err := f.red.Redeem(ctx, charge, enc); err != nil || red.Amount != 5 {
		t.Fatalf("a token of the mint's signatures with wrong DLEQ proofs: %+v, %v", red, err)
	}
}

// A wallet paying the same price again spares the mint: the first swap
// splits its change for the next payments, which send proofs held without
// a request (no swap, no NUT-07: proofs handed out left the spendable
// ones before delivery), and the keysets and keys are not fetched again
// within infoTTL.
func TestWallet_SamePriceAgainSparesTheMint(t *testing.T) {
	ctx := context.Background()
	tm := startMint(t, 0)
	ct := &countingTransport{n: map[string]int{}}
	w := newWallet(t, t.TempDir(), &http.Client{Transport: ct}, nil)
	if err := w.Mint(ctx, tm.url, 100, tm.pay); err != nil { // 64+32+4
		t.Fatal(err)
	}
	var tok cashu.Token
	if err := w.Send(ctx, tm.url, 3, keep(&tok)); err != nil {
		t.Fatal(err)
	}
	if n := ct.take(); n["/v1/swap"] != 1 {
		t.Fatalf("the first send of 3: %v; want one swap", n)
	}
	for i := range spareCopies {
		if err := w.Send(ctx, tm.url, 3, keep(&tok)); err != nil {
			t.Fatal(err)
		}
		if n := ct.take(); len(n) != 0 {
			t.Fatalf("send %d of the same price: %v; want no request", i+2, n)
		}
	}
	if sats, _ := held(t, w, tm.url); sats != 100-3*(spareCopies+1) {
		t.Fatalf("held %d", sats)
	}
}
