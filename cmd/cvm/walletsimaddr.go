package main

import (
	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/zap/zapsim"
)

// lightningAddresses serves the wallets' Lightning addresses with
// --lnaddr, and returns them by wallet name; nothing without it.
func (w *walletSimCmd) lightningAddresses(net *lnsim.Network, keys map[string]walletSimConn) (map[string]string, func(), error) {
	if w.wf.lnaddr == "" {
		return nil, func() {}, nil
	}
	zappers := make(map[string]nostr.SecretKey, len(keys))
	for name, k := range keys {
		zappers[name] = k.Zapper
	}
	srv, err := zapsim.Start(zapsim.Options{Network: net, Zappers: zappers, Listen: w.wf.lnaddr, CAFile: w.wf.caFile, Logger: w.log})
	if err != nil {
		return nil, nil, err
	}
	addrs := make(map[string]string, len(keys))
	for name := range keys {
		addrs[name] = srv.Address(name)
	}
	return addrs, func() { srv.Close() }, nil
}
