package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/secretfile"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/spf13/cobra"
)

// walletSimNote is said wherever the simulator shows a secret.
const walletSimNote = "throwaway simulator secrets; never real money"

// simMethods are the NIP-47 methods the simulator serves.
var simMethods = []string{nwc.MethodPayInvoice, nwc.MethodMakeInvoice, nwc.MethodLookupInvoice, nwc.MethodGetBalance, nwc.MethodGetInfo}

// walletSimFlags are cvm wallet-sim's flags.
type walletSimFlags struct {
	relays      []string
	wallets     []string
	dataDir     string
	outDir      string
	encryptions []string
	methods     []string
	lnaddr      string
	caFile      string
}

// walletSimHelp is cvm wallet-sim's long help.
const walletSimHelp = `Run an offline, simulated Lightning network (a simulator: its sats are not
money) and a NIP-47 Nostr Wallet Connect service for each of its wallets on
the given relays. Invoices are real signed BOLT11 regtest invoices; payments
between the simulator's wallets settle at once, with no fee.

When ready, one JSON line is printed on stdout with a connection URI per
wallet. Those URIs hold the simulator's throwaway secrets: this is the one
place cvm prints a secret. Never use them, or this command, for real money.
  {"ready":true,"relays":[...],"wallets":{"NAME":"nostr+walletconnect://..."},"simulator":true,...}

--out DIR also writes each wallet's URI to DIR/NAME.wallet (mode 0600),
ready for --wallet-file DIR/NAME.wallet; "files" in the ready line names
them. A URI copied by hand must be quoted in a shell: an unquoted & ends
the command there.

--data DIR keeps balances, invoices and connection keys across restarts (a
wallet already in DIR keeps its balance, whatever --wallet says).
--encryption nip04 (or nip44_v2) makes the service accept and announce only
that scheme, as a legacy (or a NIP-44-only) wallet does; the default is
both, NIP-44 first. --methods make_invoice,lookup_invoice lets the
connections use only those NIP-47 methods (others are answered
RESTRICTED), as a receive-only connection to a real wallet.

--lnaddr 127.0.0.1:0 also serves a Lightning address per wallet,
NAME@127.0.0.1:PORT ("addresses" in the ready line): LNURL-pay with NIP-57
zaps, over HTTPS with a throw-away certificate authority written to
--ca-file FILE (for NODE_EXTRA_CA_CERTS, or cvm's $CVM_TEST_OUTBOUND_CA); the
zap receipt goes to the zap request's relays once the invoice is paid. Logs go to stderr. SIGINT or SIGTERM stops it.`

// walletSimCmd is one run of cvm wallet-sim: the invocation's app and the
// command's flags.
type walletSimCmd struct {
	*app
	wf walletSimFlags
}

func (a *app) walletSimCommand() *cobra.Command {
	var wf walletSimFlags
	cmd := &cobra.Command{
		Use:   "wallet-sim --relay URL --wallet NAME=SATS [--wallet NAME=SATS …]",
		Short: "Run a simulated Lightning network behind Nostr Wallet Connect (tests and demos; not money)",
		Long:  walletSimHelp,
		Args:  positional(0, 0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return (&walletSimCmd{app: a, wf: wf}).run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringArrayVar(&wf.relays, "relay", nil, "relay URL the wallet service uses (repeatable)")
	f.StringArrayVar(&wf.wallets, "wallet", nil, "a wallet and its starting balance in sats, NAME=SATS (repeatable)")
	f.StringVar(&wf.dataDir, "data", "", "directory that keeps the simulator's state across restarts (default: none, in memory)")
	f.StringVar(&wf.outDir, "out", "", "directory to write each wallet's URI to, as NAME.wallet (mode 0600), for --wallet-file")
	f.StringVar(&wf.lnaddr, "lnaddr", "", "also serve a Lightning address per wallet (LNURL-pay, NIP-57 zaps) on this loopback address, e.g. 127.0.0.1:0")
	f.StringVar(&wf.caFile, "ca-file", "", "with --lnaddr, the file the throw-away CA's certificate is written to")
	f.StringSliceVar(&wf.encryptions, "encryption", nil, "NIP-47 encryption schemes accepted and announced, in order of preference: nip44_v2, nip04 (default both)")
	f.StringSliceVar(&wf.methods, "methods", nil, "NIP-47 methods the connections may use and the info event lists, e.g. make_invoice,lookup_invoice for receive only (default all: "+strings.Join(simMethods, ",")+")")
	return cmd
}

// check checks the flags and reads the wallets' starting balances, in the
// order given.
func (wf walletSimFlags) check() (balances map[string]int64, names []string, err error) {
	if len(wf.relays) == 0 {
		return nil, nil, errors.New("--relay is required: the relay the wallet service listens on")
	}
	if (wf.lnaddr == "") != (wf.caFile == "") {
		return nil, nil, errors.New("--lnaddr and --ca-file go together: the addresses are served over HTTPS with a throw-away CA written to --ca-file")
	}
	if len(wf.wallets) == 0 {
		return nil, nil, errors.New("--wallet NAME=SATS is required (repeat it for more wallets)")
	}
	for _, e := range wf.encryptions {
		if e != nwc.EncryptionNIP44 && e != nwc.EncryptionNIP04 {
			return nil, nil, fmt.Errorf("--encryption %q: want %s or %s", e, nwc.EncryptionNIP44, nwc.EncryptionNIP04)
		}
	}
	for _, m := range wf.methods {
		if !slices.Contains(simMethods, m) {
			return nil, nil, fmt.Errorf("--methods %q: want some of %s", m, strings.Join(simMethods, ", "))
		}
	}
	balances = map[string]int64{}
	for _, w := range wf.wallets {
		name, n, err := parseSimWallet(w)
		if err != nil {
			return nil, nil, err
		}
		if wf.outDir != "" && !plainFileName(name) {
			return nil, nil, fmt.Errorf("--wallet %q: with --out, a wallet name becomes a file name: letters, digits, '-', '_' and '.', starting with a letter, digit or '_'", w)
		}
		if _, dup := balances[name]; dup {
			return nil, nil, fmt.Errorf("--wallet %q: wallet %q given twice", w, name)
		}
		balances[name] = n
		names = append(names, name)
	}
	return balances, names, nil
}

// network opens the simulator with the wallets; a wallet already
// in --data keeps its balance.
func (w *walletSimCmd) network(dataDir string, balances map[string]int64, names []string) (*lnsim.Network, error) {
	net, err := lnsim.Open(lnsim.Options{Dir: dataDir, Logger: w.log})
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		created, err := net.AddWallet(name, balances[name]*1000)
		if err != nil {
			return nil, err
		}
		if !created {
			bal, _ := net.Balance(name)
			w.log.Info("wallet restored from --data; its balance is kept", "wallet", name, "balance_msat", bal)
		}
	}
	return net, nil
}

func (w *walletSimCmd) run(ctx context.Context) error {
	balances, names, err := w.wf.check()
	if err != nil {
		return err
	}
	net, err := w.network(w.wf.dataDir, balances, names)
	if err != nil {
		return err
	}
	keys, err := walletSimKeys(w.wf.dataDir, names)
	if err != nil {
		return err
	}

	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: w.wf.relays, Logger: w.log})
	defer pool.Close()
	svc := nwc.NewService(net, pool, nwc.ServiceOptions{Logger: w.log, Encryptions: w.wf.encryptions, Methods: w.wf.methods})
	uris := map[string]string{}
	for _, name := range names {
		u, err := svc.Connect(name, keys[name].Service, keys[name].Client)
		if err != nil {
			return err
		}
		uris[name] = u.Reveal()
	}
	files, err := writeWalletFiles(w.wf.outDir, uris)
	if err != nil {
		return err
	}

	addrs, stopAddrs, err := w.lightningAddresses(net, keys)
	if err != nil {
		return err
	}
	defer stopAddrs()

	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	select {
	case <-svc.Ready():
	case err := <-done:
		return fmt.Errorf("wallet service: %w", err)
	}
	ready := struct {
		Ready     bool              `json:"ready"`
		Relays    []string          `json:"relays"`
		Wallets   map[string]string `json:"wallets"`
		Simulator bool              `json:"simulator"`
		Note      string            `json:"note"`
		Data      string            `json:"data,omitempty"`
		Files     map[string]string `json:"files,omitempty"`
		Addresses map[string]string `json:"addresses,omitempty"`
		CAFile    string            `json:"ca_file,omitempty"`
	}{true, pool.Relays(), uris, true, walletSimNote, w.wf.dataDir, files, addrs, w.wf.caFile}
	if err := w.printJSON(ready); err != nil {
		return err
	}
	w.log.Warn("wallet simulator running: its sats are not money", "wallets", names, "relays", pool.Relays())
	err = <-done
	w.log.Info("wallet simulator stopped")
	return err
}

// walletSimConn is a wallet's connection keys: the service's and the
// client's (the URI's secret).
type walletSimConn struct {
	Service nostr.SecretKey `json:"service"`
	Client  nostr.SecretKey `json:"client"`
	// Zapper signs the wallet's zap receipts (--lnaddr).
	Zapper nostr.SecretKey `json:"zapper"`
}

// walletSimKeys returns connection keys for names, kept in dir (if set) so
// that a restarted simulator serves the same URIs.
func walletSimKeys(dir string, names []string) (map[string]walletSimConn, error) {
	keys := map[string]walletSimConn{}
	path := filepath.Join(dir, "nwc-keys.json")
	if dir != "" {
		b, err := secretfile.Read(path, 1<<20)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			if err := json.Unmarshal(b, &keys); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	changed := false
	for _, name := range names {
		k, ok := keys[name]
		if !ok {
			k = walletSimConn{Service: nostr.Generate(), Client: nostr.Generate()}
		}
		if k.Zapper == (nostr.SecretKey{}) { // a file from before --lnaddr
			k.Zapper, ok = nostr.Generate(), false
		}
		if !ok {
			keys[name], changed = k, true
		}
	}
	if dir != "" && changed {
		b, err := json.MarshalIndent(keys, "", " ")
		if err != nil {
			return nil, err
		}
		if err := secretfile.Replace(path, b); err != nil {
			return nil, err
		}
	}
	for name := range keys {
		if !slices.Contains(names, name) {
			delete(keys, name)
		}
	}
	return keys, nil
}

// maxSimBalance is every bitcoin there will be, in sats: no wallet holds
// more.
const maxSimBalance = 21_000_000 * 100_000_000

// parseSimWallet reads --wallet NAME=SATS, saying what is wrong with it.
func parseSimWallet(w string) (name string, sats int64, err error) {
	name, amount, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return "", 0, fmt.Errorf("--wallet %q: want NAME=SATS, e.g. alice=100000", w)
	}
	n, err := strconv.ParseInt(amount, 10, 64)
	switch {
	case err == nil && n < 0, errors.Is(err, strconv.ErrRange) && strings.HasPrefix(amount, "-"):
		return "", 0, fmt.Errorf("--wallet %q: a balance cannot be negative; give 0 or more sats", w)
	case err == nil && n > maxSimBalance, errors.Is(err, strconv.ErrRange):
		return "", 0, fmt.Errorf("--wallet %q: more sats than there will ever be (%d)", w, int64(maxSimBalance))
	case err != nil:
		return "", 0, fmt.Errorf("--wallet %q: %q is not a whole number of sats; want NAME=SATS, e.g. alice=100000", w, amount)
	}
	return name, n, nil
}

// writeWalletFiles writes each wallet's URI to dir/NAME.wallet (mode
// 0600), and returns the files by wallet name; nothing without dir.
func writeWalletFiles(dir string, uris map[string]string) (map[string]string, error) {
	if dir == "" {
		return nil, nil
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	files := make(map[string]string, len(uris))
	for name, uri := range uris {
		path := filepath.Join(dir, name+".wallet")
		if err := secretfile.Replace(path, []byte(uri+"\n")); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		files[name] = path
	}
	return files, nil
}

// plainFileName reports whether name can be a file's name as it is, in any
// directory: no separator, nothing a shell or ls would hide or read as a
// flag.
func plainFileName(name string) bool {
	if name == "" || name[0] == '.' || name[0] == '-' {
		return false
	}
	for _, r := range name {
		ok := r == '-' || r == '_' || r == '.' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}
