package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/secretfile"
	cashumint "github.com/cvmgo/cvm/payments/cashu/mint"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/spf13/cobra"
)

// mintSimHelp is cvm mint-sim's long help.
const mintSimHelp = `Run an offline Cashu mint (a simulator for tests and demos: its ecash is
backed by whatever its Lightning wallet holds, which with cvm wallet-sim is
no money) on a loopback HTTP address. It serves the Cashu mint API: NUT-00
to NUT-07 (keys, keysets, swap, bolt11 mint and melt, info, proof states),
NUT-08 change and NUT-12 DLEQ proofs on every signature, one keyset in sat.

Its Lightning side is the NIP-47 wallet of --wallet-file FILE (mode 0600,
else $CVM_WALLET), e.g. a cvm wallet-sim wallet: a mint quote is an invoice
the wallet makes, turned PAID on the wallet's payment notification (or when
the quote is read and a lookup finds it paid); a melt is the wallet paying
an invoice, its proofs pending meanwhile and unspent again if it fails.

--data DIR keeps the keyset's seed (DIR/mint.seed, mode 0600) and the mint's
records (spent secrets, quotes) across restarts; one mint-sim per DIR.
--input-fee-ppk N charges N thousandths of a sat per input (NUT-02;
default 0). When ready, one JSON line is printed on stdout:
  {"ready":true,"url":"http://127.0.0.1:PORT","keyset":"00…","unit":"sat",...}
Logs go to stderr. SIGINT or SIGTERM stops it.`

// mintSimFlags are cvm mint-sim's flags.
type mintSimFlags struct {
	listen      string
	data        string
	walletFile  string
	inputFeePPK uint64
	feeReserve  uint64
	maxAmount   uint64
	quoteTTL    time.Duration
}

type mintSimCmd struct {
	*app
	mf mintSimFlags
}

func (a *app) mintSimCommand() *cobra.Command {
	var mf mintSimFlags
	cmd := &cobra.Command{
		Use:     "mint-sim --wallet-file FILE [--listen ADDR] [--data DIR]",
		Short:   "Run an offline Cashu mint over a Lightning wallet (tests and demos)",
		Long:    mintSimHelp,
		Example: "  cvm mint-sim --listen 127.0.0.1:3338 --data ./mint --wallet-file wallets/mint.wallet",
		Args:    positional(0, 0),
		RunE:    func(cmd *cobra.Command, _ []string) error { return (&mintSimCmd{app: a, mf: mf}).run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVar(&mf.listen, "listen", "127.0.0.1:3338", "loopback address to serve the mint on (127.0.0.1:0 picks a free port)")
	f.StringVar(&mf.data, "data", "", "directory of the keyset seed and the mint's records (default: mint-sim in the data directory)")
	f.StringVar(&mf.walletFile, "wallet-file", "", "file (mode 0600) holding the mint's Lightning wallet connection URI; else $"+walletEnv)
	f.Uint64Var(&mf.inputFeePPK, "input-fee-ppk", 0, "fee per input in thousandths of a sat (NUT-02 input_fee_ppk)")
	f.Uint64Var(&mf.feeReserve, "fee-reserve", 0, "sats a melt quote reserves for Lightning fees (returned as change when unused)")
	f.Uint64Var(&mf.maxAmount, "max-amount", cashumint.DefaultMaxAmount, "largest mint or melt quote, in sats")
	f.DurationVar(&mf.quoteTTL, "quote-ttl", cashumint.DefaultQuoteTTL, "how long a mint quote's invoice can be paid")
	return cmd
}

func (c *mintSimCmd) run(ctx context.Context) error {
	if host, _, err := net.SplitHostPort(c.mf.listen); err != nil || !isLoopback(host) {
		return fmt.Errorf("--listen %q: want a loopback address such as 127.0.0.1:3338 (the simulator is not a public mint)", c.mf.listen)
	}
	uri, err := c.walletURI(c.mf.walletFile)
	if err != nil {
		return err
	}
	if uri == "" {
		return fmt.Errorf("mint-sim needs its Lightning wallet: give --wallet-file FILE or $%s with a nostr+walletconnect:// URI (cvm wallet-sim --out DIR writes one)", walletEnv)
	}
	wu, err := nwc.ParseURI(uri)
	if err != nil {
		return fmt.Errorf("wallet: %w%s", err, nwcURIHint(uri))
	}
	dir, err := c.dataSubdir(c.mf.data, "mint-sim")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	seed, err := mintSeed(dir)
	if err != nil {
		return err
	}
	st, err := durable.Open(dir, "mint", durable.Options{})
	if errors.Is(err, durable.ErrLocked) {
		return fmt.Errorf("another cvm mint-sim runs on %s; stop it, or give this one another --data", dir)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	client := nwc.NewClient(wu, nwc.ClientOptions{Logger: c.log})
	defer client.Close()

	m, err := cashumint.New(cashumint.Options{Store: st, Lightning: c.lightning(ctx, client), Seed: seed,
		InputFeePPK: c.mf.inputFeePPK, FeeReserve: c.mf.feeReserve, MaxAmount: c.mf.maxAmount,
		QuoteTTL: c.mf.quoteTTL, Logger: c.log})
	if err != nil {
		return err
	}
	defer m.Close()
	return c.serve(ctx, m, dir)
}

// lightning is the wallet as the mint's Lightning: with its notifications
// when it sends them, else looked up when a quote is read.
func (c *mintSimCmd) lightning(ctx context.Context, client *nwc.Client) cashumint.Lightning {
	listening, err := client.Listen(ctx)
	switch {
	case err != nil:
		c.log.Warn("mint-sim: not hearing the wallet's notifications; quotes are looked up when read", "error", err)
	case !listening:
		c.log.Info("mint-sim: the wallet sends no notifications; quotes are looked up when read")
	default:
		return client
	}
	return struct{ cashumint.Lightning }{client} // hides Received
}

// serve serves the mint until ctx ends, after printing the ready line.
func (c *mintSimCmd) serve(ctx context.Context, m *cashumint.Mint, dir string) error {
	l, err := net.Listen("tcp", c.mf.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", c.mf.listen, err)
	}
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	ks := m.Keyset()
	ready := struct {
		Ready       bool   `json:"ready"`
		URL         string `json:"url"`
		Keyset      string `json:"keyset"`
		Unit        string `json:"unit"`
		InputFeePPK uint64 `json:"input_fee_ppk"`
		Data        string `json:"data"`
		Simulator   bool   `json:"simulator"`
	}{true, "http://" + l.Addr().String(), ks.ID, ks.Unit, ks.InputFeePPK, dir, true}
	if err := c.printJSON(ready); err != nil {
		srv.Close()
		return err
	}
	c.log.Info("mint-sim serving", "url", ready.URL, "keyset", ks.ID, "input_fee_ppk", ks.InputFeePPK)
	select {
	case <-ctx.Done():
		c.log.Info("shutting down")
	case err := <-done:
		return err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// mintSeed returns the keyset's seed from dir/mint.seed (hex, mode 0600),
// creating it on the first run.
func mintSeed(dir string) ([]byte, error) {
	path := filepath.Join(dir, "mint.seed")
	b, _, err := secretfile.LoadOrCreate(path, 1024, func() ([]byte, error) {
		var s [32]byte
		if _, err := rand.Read(s[:]); err != nil {
			return nil, err
		}
		return []byte(hex.EncodeToString(s[:]) + "\n"), nil
	})
	if err != nil {
		return nil, fmt.Errorf("mint seed: %w", err)
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) < cashumint.MinSeedLen {
		return nil, fmt.Errorf("mint seed %s: want %d or more bytes in hex", path, cashumint.MinSeedLen)
	}
	return seed, nil
}

// isLoopback reports whether host names this machine only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
