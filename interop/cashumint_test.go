package interop

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments/cashu"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// cashuNet is one relay, one cvm wallet-sim (the mint's wallet, alice who
// buys ecash, carol who is paid by melts) and one cvm mint-sim whose
// Lightning side is the "mint" wallet: what every Cashu interop subtest
// shares.
type cashuNet struct {
	sim  walletSim
	mint string // mint-sim's URL
}

func startCashuNet(t *testing.T) cashuNet {
	t.Helper()
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "mint=0", "alice=100000", "carol=0")
	home := t.TempDir()
	p := cvmtest.Start(t, build.CVM(t), cvmtest.Options{Env: cvmEnv(home)}, "mint-sim", "--listen", "127.0.0.1:0",
		"--data", t.TempDir(), "--wallet-file", walletFile(t, sim.Wallets["mint"]))
	t.Cleanup(func() { p.Terminate(syscall.SIGTERM, 10*time.Second) })
	var ready struct {
		URL string `json:"url"`
	}
	p.ReadyLine(t, &ready)
	if ready.URL == "" {
		t.Fatalf("mint-sim's ready line has no url; stderr: %s", p.Stderr)
	}
	return cashuNet{sim: sim, mint: ready.URL}
}

// withNWC runs f with an NWC client of the wallet uri and a context that
// bounds it; an error from f fails t.
func withNWC(t *testing.T, uri string, f func(context.Context, *nwc.Client) error) {
	t.Helper()
	u, err := nwc.ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	c := nwc.NewClient(u, nwc.ClientOptions{Timeout: 10 * time.Second})
	defer c.Close()
	ctx, cancel := testwait.Context(t, 15*time.Second)
	defer cancel()
	if err := f(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// payInvoice pays a BOLT11 invoice from a wallet-sim wallet over NWC.
func payInvoice(t *testing.T, uri, invoice string) {
	t.Helper()
	withNWC(t, uri, func(ctx context.Context, c *nwc.Client) error {
		_, err := c.PayInvoice(ctx, invoice)
		return err
	})
}

// makeInvoice makes an invoice of sats in a wallet-sim wallet over NWC.
func makeInvoice(t *testing.T, uri string, sats int64) string {
	t.Helper()
	var bolt11 string
	withNWC(t, uri, func(ctx context.Context, c *nwc.Client) error {
		inv, err := c.MakeInvoice(ctx, sats*1000, "melted", time.Hour)
		bolt11 = inv.Bolt11
		return err
	})
	return bolt11
}

// tsMint has cashu-ts mint amount sats at the mint, alice paying the
// quote's invoice, and returns the proofs.
func (n cashuNet) tsMint(t *testing.T, amount uint64) []cashu.Proof {
	t.Helper()
	var quote struct {
		Quote   string `json:"quote"`
		Request string `json:"request"`
		State   string `json:"state"`
	}
	cashuTS(t, "mint-quote", map[string]any{"mint": n.mint, "amount": amount}, &quote)
	if quote.State != cashu.QuoteUnpaid || quote.Request == "" {
		t.Fatalf("mint quote %+v", quote)
	}
	payInvoice(t, n.sim.Wallets["alice"], quote.Request)
	var minted struct {
		Proofs []cashu.Proof
		DLEQ   []bool
	}
	cashuTS(t, "mint-proofs", map[string]any{"mint": n.mint, "amount": amount, "quote": quote.Quote}, &minted)
	if sum, _ := cashu.SumProofs(minted.Proofs); sum != amount {
		t.Fatalf("cashu-ts minted %d, want %d", sum, amount)
	}
	wantAllTrue(t, "DLEQ of the minted proofs (cashu-ts)", minted.DLEQ, len(minted.Proofs))
	return minted.Proofs
}

func wantAllTrue(t *testing.T, what string, got []bool, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%s: %d answers for %d", what, len(got), n)
	}
	for i, ok := range got {
		if !ok {
			t.Fatalf("%s: %d of %d fails", what, i, n)
		}
	}
}

// tsStates is what the mint says of proofs, asked by cashu-ts (NUT-07).
func (n cashuNet) tsStates(t *testing.T, proofs []cashu.Proof) []string {
	t.Helper()
	var st struct{ States []cashu.ProofState }
	cashuTS(t, "states", map[string]any{"mint": n.mint, "proofs": proofs}, &st)
	out := make([]string, len(st.States))
	for i, s := range st.States {
		out[i] = s.State
	}
	return out
}

func wantStates(t *testing.T, what string, got []string, want string) {
	t.Helper()
	for i, s := range got {
		if s != want {
			t.Fatalf("%s: proof %d is %s, want %s (all: %v)", what, i, s, want, got)
		}
	}
	if len(got) == 0 {
		t.Fatalf("%s: no states", what)
	}
}

// cvmCashu runs cvm --json cashu ARGS in home with stdin, and decodes its
// JSON answer; a failure fails t.
func cvmCashu(t *testing.T, home, stdin string, out any, args ...string) {
	t.Helper()
	code, stdout, stderr := cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: cvmEnv(home), Stdin: strings.NewReader(stdin)}, append([]string{"--json", "cashu"}, args...)...)
	if code != 0 {
		t.Fatalf("cvm cashu %s: exit %d; stderr: %s", args[0], code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("cvm cashu %s: %v in %q", args[0], err, stdout)
	}
}

type cvmCashuBalance struct {
	Total uint64 `json:"total"`
	Mints []struct {
		Mint    string `json:"mint"`
		Sats    uint64 `json:"sats"`
		Pending uint64 `json:"pending"`
	} `json:"mints"`
}

// TestCashu_AgainstMintSim: @cashu/cashu-ts and cvm's wallet against one
// cvm mint-sim whose Lightning is a cvm wallet-sim wallet. cashu-ts mints
// (an invoice paid over NWC), swaps and sends, receives, melts (an invoice
// of another wallet-sim wallet paid by the mint), checks proof states and
// verifies every DLEQ proof; cvm's wallet receives cashu-ts's token and
// cashu-ts receives cvm's.
func TestCashu_AgainstMintSim(t *testing.T) {
	n := startCashuNet(t)
	var tsProofs []cashu.Proof

	t.Run("cashu-ts mints, paid over Lightning", func(t *testing.T) {
		tsProofs = n.tsMint(t, 100)
		wantBalances(t, n.sim, map[string]int64{"alice": 99_900_000, "mint": 100_000})
		wantStates(t, "fresh proofs", n.tsStates(t, tsProofs), cashu.StateUnspent)
	})

	t.Run("cashu-ts swaps and sends; cvm receives", func(t *testing.T) {
		var sent struct {
			Token             string
			Send, Keep, Spent []cashu.Proof
			DLEQ              []bool
		}
		// 100 is 64+32+4: 21 takes a swap.
		cashuTS(t, "send", map[string]any{"mint": n.mint, "amount": 21, "proofs": tsProofs}, &sent)
		wantAllTrue(t, "DLEQ of the swapped proofs (cashu-ts)", sent.DLEQ, len(sent.Send)+len(sent.Keep))
		sendSum, _ := cashu.SumProofs(sent.Send)
		keepSum, _ := cashu.SumProofs(sent.Keep)
		if len(sent.Spent) == 0 || sendSum != 21 || keepSum != 79 {
			t.Fatalf("cashu-ts's send of 21 from 100: %d proofs spent in a swap, %d sent, %d kept", len(sent.Spent), sendSum, keepSum)
		}
		wantStates(t, "the token's proofs, fresh from the swap", n.tsStates(t, sent.Send), cashu.StateUnspent)
		if !strings.HasPrefix(sent.Token, "cashuB") {
			t.Fatalf("cashu-ts's token %.8s…, want cashuB", sent.Token)
		}
		tsProofs = sent.Keep
		home := t.TempDir()
		var got struct{ Received, Balance uint64 }
		cvmCashu(t, home, sent.Token, &got, "receive", "-")
		if got.Received != 21 || got.Balance != 21 {
			t.Fatalf("cvm received %d (balance %d) of cashu-ts's 21", got.Received, got.Balance)
		}
		wantStates(t, "cashu-ts's token after cvm received it", n.tsStates(t, sent.Send), cashu.StateSpent)
	})

	t.Run("cvm sends; cashu-ts receives", func(t *testing.T) {
		home := t.TempDir()
		var got struct{ Received uint64 }
		cvmCashu(t, home, tsSend(t, n, &tsProofs, 13), &got, "receive", "-")
		var sent struct{ Token string }
		cvmCashu(t, home, "", &sent, "send", "5")
		var recv struct {
			Proofs []cashu.Proof
			DLEQ   []bool
		}
		cashuTS(t, "receive", map[string]any{"mint": n.mint, "token": sent.Token}, &recv)
		if sum, _ := cashu.SumProofs(recv.Proofs); sum != 5 {
			t.Fatalf("cashu-ts received %d of cvm's 5", sum)
		}
		wantAllTrue(t, "DLEQ of the received proofs (cashu-ts)", recv.DLEQ, len(recv.Proofs))
		tok, err := cashu.DecodeToken(sent.Token)
		if err != nil {
			t.Fatal(err)
		}
		wantStates(t, "cvm's token after cashu-ts received it", n.tsStates(t, tok.Proofs), cashu.StateSpent)
		var dleq struct{ Valid []bool }
		cashuTS(t, "dleq", map[string]any{"mint": n.mint, "proofs": tok.Proofs}, &dleq)
		wantAllTrue(t, "DLEQ of cvm's token's proofs (cashu-ts)", dleq.Valid, len(tok.Proofs))
	})

	t.Run("cashu-ts melts to another wallet", func(t *testing.T) {
		invoice := makeInvoice(t, n.sim.Wallets["carol"], 10)
		var melted struct {
			Quote                cashu.MeltQuoteBolt11Response
			Melted, Change, Keep []cashu.Proof
		}
		before, _ := cashu.SumProofs(tsProofs)
		cashuTS(t, "melt", map[string]any{"mint": n.mint, "invoice": invoice, "proofs": tsProofs}, &melted)
		if melted.Quote.State != cashu.QuotePaid {
			t.Fatalf("melt quote %s, want PAID", melted.Quote.State)
		}
		wantBalances(t, n.sim, map[string]int64{"carol": 10_000})
		wantStates(t, "melted proofs", n.tsStates(t, melted.Melted), cashu.StateSpent)
		meltedSum, _ := cashu.SumProofs(melted.Melted)
		changeSum, _ := cashu.SumProofs(melted.Change)
		keepSum, _ := cashu.SumProofs(melted.Keep)
		if meltedSum != 10+melted.Quote.FeeReserve || keepSum != before-10 {
			t.Fatalf("melting 10 from %d: %d melted, %d change, %d kept (fee reserve %d)", before, meltedSum, changeSum, keepSum, melted.Quote.FeeReserve)
		}
	})
}

// tsSend has cashu-ts send amount from *proofs (keeping the change in
// *proofs) and returns the token.
func tsSend(t *testing.T, n cashuNet, proofs *[]cashu.Proof, amount uint64) string {
	t.Helper()
	var sent struct {
		Token string
		Keep  []cashu.Proof
	}
	cashuTS(t, "send", map[string]any{"mint": n.mint, "amount": amount, "proofs": *proofs}, &sent)
	*proofs = sent.Keep
	return sent.Token
}

// TestCashu_CLI: cvm cashu end to end against mint-sim: mint moves the
// wallet-sim balance by what was minted, send and receive move ecash
// between two data directories, balance adds up, and receiving the same
// token twice is refused with a message that says why.
func TestCashu_CLI(t *testing.T) {
	n := startCashuNet(t)
	alice, bob := t.TempDir(), t.TempDir()
	wallet := walletFile(t, n.sim.Wallets["alice"])
	var minted struct{ Minted, Balance uint64 }
	cvmCashu(t, alice, "", &minted, "mint", "--mint", n.mint, "--wallet-file", wallet, "--max-sats", "500", "300")
	if minted.Minted != 300 || minted.Balance != 300 {
		t.Fatalf("cvm cashu mint 300: %+v", minted)
	}
	wantBalances(t, n.sim, map[string]int64{"alice": 99_700_000, "mint": 300_000})

	code, _, stderr := cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: cvmEnv(alice)}, "cashu", "mint", "--mint", n.mint, "--wallet-file", wallet, "--max-sats", "10", "300")
	if code == 0 || !strings.Contains(stderr, "--max-sats 300") {
		t.Fatalf("minting over --max-sats: exit %d; stderr: %s", code, stderr)
	}
	wantBalances(t, n.sim, map[string]int64{"alice": 99_700_000})

	var sent struct {
		Token  string
		Amount uint64
	}
	cvmCashu(t, alice, "", &sent, "send", "123")
	var got struct{ Received, Balance uint64 }
	cvmCashu(t, bob, sent.Token+"\n", &got, "receive", "-")
	if got.Received != 123 || got.Balance != 123 {
		t.Fatalf("bob received %+v of 123", got)
	}
	var ab, bb cvmCashuBalance
	cvmCashu(t, alice, "", &ab, "balance")
	cvmCashu(t, bob, "", &bb, "balance")
	if ab.Total != 177 || bb.Total != 123 || len(ab.Mints) != 1 || ab.Mints[0].Mint != n.mint {
		t.Fatalf("balances after 300 minted and 123 sent: alice %+v, bob %+v", ab, bb)
	}
	code, stdout, stderr := cvmtest.Run(t, build.CVM(t), cvmtest.Options{Env: cvmEnv(bob), Stdin: strings.NewReader(sent.Token)}, "cashu", "receive", "-")
	if code == 0 || !strings.Contains(stderr, "received before") {
		t.Fatalf("the same token received twice: exit %d; stdout %s; stderr: %s", code, stdout, stderr)
	}
	if strings.Contains(stderr, sent.Token[6:40]) {
		t.Fatalf("the token is in the error: %s", stderr)
	}
	cvmCashu(t, bob, "", &bb, "balance")
	if bb.Total != 123 {
		t.Fatalf("bob's balance after the refused receive: %+v", bb)
	}
}
