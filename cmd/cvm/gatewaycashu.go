package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cvmgo/cvm/payments"
	cashuwallet "github.com/cvmgo/cvm/payments/cashu/wallet"
)

// cashuRedeemer takes Cashu ecash of --cashu-mint as direct payment of
// the prices (CEP-8 direct_payment, or the NUT-18 payment request it
// issues): the price goes to the gateway's own Cashu wallet, in "cashu"
// under its data directory, the change back to the client. nil without
// --cashu-mint. close closes the wallet (it fsyncs what it wrote): call it
// once the gateway has stopped.
func (g *gatewayCmd) cashuRedeemer(p gatewayPlan) (_ payments.Redeemer, close func(), _ error) {
	close = func() {}
	if len(g.gf.cashuMints) == 0 {
		return nil, close, nil
	}
	if g.gf.replica.natsURL != "" {
		return nil, close, errors.New("--cashu-mint does not work with --nats yet: replicas would need one Cashu wallet between them")
	}
	if len(p.prices) == 0 {
		g.log.Warn("--cashu-mint but no --price: nothing is charged")
	}
	if err := collectable(p.prices, p.rates); err != nil {
		return nil, close, err
	}
	dir, err := g.dataSubdir(g.gf.data, "gateway")
	if err != nil {
		return nil, close, err
	}
	w := cashuwallet.New(cashuwallet.Options{Dir: filepath.Join(dir, "cashu"), Logger: g.log})
	red, err := cashuwallet.NewRedeemer(w, g.gf.cashuMints)
	if err != nil {
		return nil, close, fmt.Errorf("--cashu-mint: %w", err)
	}
	g.log.Info("cashu direct payments taken", "pmi", red.PMI(), "mints", red.Mints())
	return red, func() {
		if err := w.Close(); err != nil {
			g.log.Error("closing the cashu wallet", "err", err)
		}
	}, nil
}
