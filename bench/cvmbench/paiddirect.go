package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	cashuwallet "github.com/cvmgo/cvm/payments/cashu/wallet"
	"github.com/cvmgo/cvm/payments/nwc"
)

// The direct path: the cvm client paying a cvm gateway that takes Cashu
// ecash of one cvm mint-sim (--cashu-mint) in the request itself (CEP-8
// direct_payment): no invoice, no wallet round trip, the gateway's swap
// at the mint in its place. The client's ecash is minted before the calls,
// its invoice paid by walletCVMClient; the mint's Lightning side is the
// wallet-sim's walletMint.
const (
	pathDirect = "cvm client → cvm gateway --cashu-mint, direct"
	walletMint = "mint"
	// ratioDirect is the direct path's paid p50 over its free p50 (#33's
	// target: at most 1.5, the mint's swap included).
	ratioDirect = "direct_paid_p50_over_free"
)

// directPeers are the direct path's mint and gateway.
type directPeers struct {
	mint    string // mint-sim's URL
	gateway string // pubkey
	// held is what the gateway's Cashu wallet holds, in msat.
	held func(context.Context) (int64, error)
}

// startDirectPeers starts cvm mint-sim over walletMint and a cvm gateway
// (the demo server, add priced) taking its ecash, with a key and a data
// directory of its own, by cvm (startPaidPeers's).
func startDirectPeers(cvm func(ready any, args ...string) error, bins paidBinaries, peers paidPeers, tmp string) (directPeers, error) {
	var d directPeers
	mintWallet := filepath.Join(tmp, "mint.wallet")
	if err := os.WriteFile(mintWallet, []byte(peers.wallets[walletMint]), 0o600); err != nil {
		return d, err
	}
	var mint struct{ URL string }
	if err := cvm(&mint, "mint-sim", "--listen", "127.0.0.1:0", "--data", filepath.Join(tmp, "mint"), "--wallet-file", mintWallet); err != nil {
		return d, err
	}
	d.mint = mint.URL
	key := filepath.Join(tmp, "direct-gateway.key")
	if _, _, err := nostrx.LoadOrCreateKeyFile(key); err != nil {
		return d, err
	}
	data := filepath.Join(tmp, "direct-gateway")
	var gw struct{ Pubkey string }
	if err := cvm(&gw, "gateway", "--relay", peers.relay, "--key", key, "--data", data, "--price", fmt.Sprintf("tool:add=%d", price),
		"--cashu-mint", d.mint, "--", bins.DemoServer); err != nil {
		return d, err
	}
	d.gateway = gw.Pubkey
	held := cashuwallet.New(cashuwallet.Options{Dir: filepath.Join(data, "cashu")})
	d.held = func(context.Context) (int64, error) {
		bs, err := held.Balance()
		var sats uint64
		for _, b := range bs {
			sats += b.Sats
		}
		return int64(sats) * 1000, err
	}
	return d, nil
}

// directPaidCalls is the cvm client library paying each add call with a
// Cashu token of its price in the request, from a wallet in dir minted
// for the calls first. It checks that no call went unpaid in ecash.
func directPaidCalls(ctx context.Context, peers paidPeers, dir string, calls int) (free, paid []float64, err error) {
	u, err := nwc.ParseURI(peers.wallets[walletCVMClient])
	if err != nil {
		return nil, nil, err
	}
	ln := nwc.NewClient(u, nwc.ClientOptions{Timeout: paidCallTimeout})
	defer ln.Close()
	w := cashuwallet.New(cashuwallet.Options{Dir: dir})
	defer w.Close()
	pay := func(ctx context.Context, invoice string, _ uint64) error {
		_, err := ln.PayInvoice(ctx, invoice)
		return err
	}
	if err := w.Mint(ctx, peers.direct.mint, uint64(calls+1)*price, pay); err != nil {
		return nil, nil, fmt.Errorf("minting the client's ecash: %w", err)
	}
	var direct atomic.Int64
	opts := &cep8.PayOptions{
		Bearers: []payments.Bearer{cashuwallet.NewBearer(w)},
		Budget:  &payments.Budget{Unit: "sats", PerCall: price},
		Report: func(r contextvm.PaymentReport) {
			if r.Paid && !r.Accepted && !r.Rejected && r.PMI == cashuwallet.PMIDirect {
				direct.Add(1)
			}
		},
	}
	co := contextvm.ClientOptions{Server: peers.direct.gateway, Relays: []string{peers.relay}, RequestTimeout: paidCallTimeout,
		Signer: contextvm.NewKeySigner(nostr.Generate()), Payer: opts.Payer()}
	if free, paid, err = timedCalls(ctx, co, calls, true); err != nil {
		return nil, nil, err
	}
	if n := direct.Load(); n != int64(calls+1) {
		return nil, nil, fmt.Errorf("%d calls paid in ecash, want %d", n, calls+1)
	}
	return free, paid, nil
}
