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
// --cashu-mint.
func (g *gatewayCmd) cashuRedeemer(p gatewayPlan) (payments.Redeemer, error) {
	if len(g.gf.cashuMints) == 0 {
		return nil, nil
	}
	if g.gf.replica.natsURL != "" {
		return nil, errors.New("--cashu-mint does not work with --nats yet: replicas would need one Cashu wallet between them")
	}
	if len(p.prices) == 0 {
		g.log.Warn("--cashu-mint but no --price: nothing is charged")
	}
	if err := collectable(p.prices, p.rates); err != nil {
		return nil, err
	}
	dir, err := g.dataSubdir(g.gf.data, "gateway")
	if err != nil {
		return nil, err
	}
	w := cashuwallet.New(cashuwallet.Options{Dir: filepath.Join(dir, "cashu"), Logger: g.log})
	red, err := cashuwallet.NewRedeemer(w, g.gf.cashuMints)
	if err != nil {
		return nil, fmt.Errorf("--cashu-mint: %w", err)
	}
	g.log.Info("cashu direct payments taken", "pmi", red.PMI(), "mints", red.Mints())
	return red, nil
}
