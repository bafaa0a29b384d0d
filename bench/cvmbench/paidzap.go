package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

// The zap path: the cvm client paying a cvm gateway that collects with
// only a Lightning address (--zap-address) of the wallet-sim's wallet
// walletZap, settling each payment on the zap receipt the simulator
// publishes, beside the NWC-paid paths of the same run.
const (
	pathZap   = "cvm client → cvm gateway --zap-address"
	walletZap = "zap"
)

// zapSimArgs are the wallet-sim flags of the zap path: its receiving
// wallet and the wallets' Lightning addresses, on loopback HTTPS under a
// throw-away CA written into tmp.
func zapSimArgs(tmp string) []string {
	return []string{"--wallet", walletZap + "=0", "--lnaddr", "127.0.0.1:0", "--ca-file", filepath.Join(tmp, "zap-ca.pem")}
}

// zapSim is what the wallet-sim's ready line says of the addresses.
type zapSim struct {
	Addresses map[string]string `json:"addresses"`
	CAFile    string            `json:"ca_file"`
}

// startZapGateway starts the zap path's gateway (the demo server, add
// priced) on walletZap's address, its fetcher told of the simulator's
// port and CA as tests tell it; it returns the gateway's pubkey.
func startZapGateway(ctx context.Context, bins paidBinaries, env []string, relay string, sim zapSim, stops *[]func()) (string, error) {
	addr := sim.Addresses[walletZap]
	host, ok := strings.CutPrefix(addr, walletZap+"@")
	if !ok || sim.CAFile == "" {
		return "", fmt.Errorf("wallet-sim gave no Lightning address for %s: %v", walletZap, sim.Addresses)
	}
	// A key of its own: the NWC path's gateway is on the same relay.
	key := filepath.Join(filepath.Dir(sim.CAFile), "zap-gateway.key")
	if _, _, err := nostrx.LoadOrCreateKeyFile(key); err != nil {
		return "", err
	}
	env = append(env[:len(env):len(env)], outboundtest.EnvAllow+"="+host, outboundtest.EnvCA+"="+sim.CAFile)
	c, err := startChild("cvm gateway --zap-address", "", bins.CVM, env, "gateway", "--log-level", "warn", "--relay", relay, "--key", key,
		"--price", fmt.Sprintf("tool:add=%d", price), "--zap-address", addr, "--", bins.DemoServer)
	if err != nil {
		return "", err
	}
	*stops = append(*stops, c.stop)
	var gw struct{ Pubkey string }
	if err := c.ready(ctx, &gw); err != nil {
		return "", err
	}
	return gw.Pubkey, nil
}
