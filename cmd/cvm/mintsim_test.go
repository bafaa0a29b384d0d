package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments/cashu"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

type mintSimReady struct {
	Ready       bool   `json:"ready"`
	URL         string `json:"url"`
	Keyset      string `json:"keyset"`
	Unit        string `json:"unit"`
	InputFeePPK uint64 `json:"input_fee_ppk"`
}

func startMintSim(t *testing.T, c *cli, args ...string) (*proc, mintSimReady) {
	t.Helper()
	p := startCVM(t, c, append([]string{"mint-sim", "--listen", "127.0.0.1:0"}, args...)...)
	var ready mintSimReady
	p.ReadyLine(t, &ready)
	if !ready.Ready || !strings.HasPrefix(ready.URL, "http://127.0.0.1:") || ready.Unit != "sat" || len(ready.Keyset) != 16 {
		t.Fatalf("ready line %+v", ready)
	}
	return p, ready
}

// mintCall sends a JSON request to the mint and decodes its answer into
// out; it returns the status.
func mintCall(t *testing.T, method, url string, in, out any) int {
	t.Helper()
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, url, &body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode
}

// TestMintSim_MintsThroughWalletSimPayment: cvm mint-sim over a cvm
// wallet-sim wallet. A quote's invoice paid by another simulator wallet
// turns PAID on the wallet's notification; the ecash minted for it swaps,
// its DLEQ proofs verify, it melts back to Lightning; after a SIGTERM and
// a restart on the same --data the keyset is the same and the spent
// proofs stay spent.
func TestMintSim_MintsThroughWalletSimPayment(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	c := newCLI(t)
	out, data := t.TempDir(), t.TempDir()
	_, sim := startWalletSim(t, c, "--relay", r.URL, "--wallet", "mint=0", "--wallet", "alice=1000", "--out", out)
	p, ready := startMintSim(t, c, "--data", data, "--wallet-file", filepath.Join(out, "mint.wallet"))
	url := ready.URL

	var keys cashu.KeysResponse
	mintCall(t, "GET", url+"/v1/keys", nil, &keys)
	var sets cashu.KeysetsResponse
	mintCall(t, "GET", url+"/v1/keysets", nil, &sets)
	ks, err := cashu.NewKeyset(sets.Keysets[0], keys.Keysets[0].Keys)
	if err != nil || ks.ID != ready.Keyset {
		t.Fatalf("keyset %v: %v", ks.ID, err)
	}

	var q cashu.MintQuoteBolt11Response
	if code := mintCall(t, "POST", url+"/v1/mint/quote/bolt11", cashu.MintQuoteBolt11Request{Amount: 100, Unit: "sat"}, &q); code != 200 || q.State != cashu.QuoteUnpaid {
		t.Fatalf("quote %d %+v", code, q)
	}
	ua, _ := nwc.ParseURI(sim.Wallets["alice"])
	alice := nwc.NewClient(ua, nwc.ClientOptions{Timeout: 10 * time.Second})
	defer alice.Close()
	ctx := context.Background()
	if _, err := alice.PayInvoice(ctx, q.Request); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 20*time.Second, "the quote to be PAID after its invoice was paid", func() bool {
		if q.State == cashu.QuotePaid {
			return true
		}
		mintCall(t, "GET", url+"/v1/mint/quote/bolt11/"+q.Quote, nil, &q)
		return q.State == cashu.QuotePaid
	})
	outs := mustOutputs(t, ks.ID, 100)
	var minted cashu.MintBolt11Response
	if code := mintCall(t, "POST", url+"/v1/mint/bolt11", cashu.MintBolt11Request{Quote: q.Quote, Outputs: cashu.Messages(outs)}, &minted); code != 200 {
		t.Fatalf("mint answered %d", code)
	}
	proofs := unblindAll(t, ks, outs, minted.Signatures)
	var again cashu.Error
	if code := mintCall(t, "POST", url+"/v1/mint/bolt11", cashu.MintBolt11Request{Quote: q.Quote, Outputs: cashu.Messages(mustOutputs(t, ks.ID, 100))}, &again); code != 400 || again.Code != cashu.CodeQuoteIssued {
		t.Fatalf("second mint of a quote: %d %+v", code, again)
	}

	swapOuts := mustOutputs(t, ks.ID, 64, 32, 4)
	var swapped cashu.SwapResponse
	if code := mintCall(t, "POST", url+"/v1/swap", cashu.SwapRequest{Inputs: proofs, Outputs: cashu.Messages(swapOuts)}, &swapped); code != 200 {
		t.Fatalf("swap answered %d", code)
	}
	fresh := unblindAll(t, ks, swapOuts, swapped.Signatures)

	inv, err := alice.MakeInvoice(ctx, 100_000, "melt", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var mq, melted cashu.MeltQuoteBolt11Response
	mintCall(t, "POST", url+"/v1/melt/quote/bolt11", cashu.MeltQuoteBolt11Request{Request: inv.Bolt11, Unit: "sat"}, &mq)
	if code := mintCall(t, "POST", url+"/v1/melt/bolt11", cashu.MeltBolt11Request{Quote: mq.Quote, Inputs: fresh}, &melted); code != 200 || melted.State != cashu.QuotePaid {
		t.Fatalf("melt %d %+v", code, melted)
	}
	if got := balanceOf(t, sim.Wallets["alice"]); got != 1_000_000 {
		t.Fatalf("alice has %d msat after paying 100 sats in and melting 100 out", got)
	}

	if code := p.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, p.Stderr)
	}
	if strings.Contains(p.Stderr.String(), "looked up when read") {
		t.Fatalf("the mint did not listen to the wallet's notifications: %s", p.Stderr)
	}
	for _, secret := range []string{proofs[0].Secret, fresh[0].Secret, ua.Secret().Hex()} {
		if strings.Contains(p.Stderr.String(), secret) {
			t.Fatal("a secret reached the mint's log")
		}
	}
	_, ready2 := startMintSim(t, c, "--data", data, "--wallet-file", filepath.Join(out, "mint.wallet"))
	if ready2.Keyset != ready.Keyset {
		t.Fatal("the keyset changed across a restart")
	}
	var spent cashu.Error
	if code := mintCall(t, "POST", ready2.URL+"/v1/swap", cashu.SwapRequest{Inputs: proofs, Outputs: cashu.Messages(mustOutputs(t, ks.ID, 100))}, &spent); code != 400 || spent.Code != cashu.CodeProofsSpent {
		t.Fatalf("spent proofs after a restart: %d %+v", code, spent)
	}
}

func mustOutputs(t *testing.T, id string, amount ...uint64) []cashu.Output {
	t.Helper()
	var amounts []uint64
	for _, a := range amount {
		amounts = append(amounts, cashu.SplitAmount(a)...)
	}
	outs, err := cashu.NewOutputs(id, amounts)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

// unblindAll turns the mint's signatures into proofs, checking each DLEQ
// proof, and checks them again as a receiver would.
func unblindAll(t *testing.T, ks cashu.Keyset, outs []cashu.Output, sigs []cashu.BlindSignature) []cashu.Proof {
	t.Helper()
	if len(sigs) != len(outs) {
		t.Fatalf("%d signatures for %d outputs", len(sigs), len(outs))
	}
	proofs := make([]cashu.Proof, len(outs))
	for i, o := range outs {
		p, err := o.Proof(sigs[i], ks.Keys[o.Message.Amount])
		if err != nil {
			t.Fatal(err)
		}
		if err := p.VerifyDLEQ(ks.Keys[p.Amount]); err != nil {
			t.Fatal(err)
		}
		proofs[i] = p
	}
	return proofs
}

func TestMintSimUsage(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mint-sim", "--listen", "0.0.0.0:0"}, "loopback"},
		{[]string{"mint-sim", "--listen", "127.0.0.1:0", "--data", t.TempDir()}, "--wallet-file"},
	} {
		code, _, stderr := c.run(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %s", tc.args, code, stderr)
		}
	}
}
