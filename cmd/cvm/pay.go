package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/cvmgo/cvm/internal/secretfile"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	cashuwallet "github.com/cvmgo/cvm/payments/cashu/wallet"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/spf13/cobra"
)

// walletEnv is the environment variable that may hold the wallet URI, a
// secret that is never given as a plain flag value.
const walletEnv = secretenv.Wallet

// payFlags are the flags of the commands that may pay for a call.
type payFlags struct {
	maxSats         int64
	perServerPerDay int64
	perDay          int64
	allow           []string
	yes             bool
	walletFile      string
	interaction     string
	rate            rateFlags // to check what a usd price is asked for in sats
	// channel is the deposit (sats) of the payment channel opened with a
	// server that offers them; 0: none (channels.go).
	channel int64
	// cashu pays direct payments from the Cashu wallet (cvm cashu).
	cashu bool
}

func (a *app) addPayFlags(cmd *cobra.Command, pf *payFlags, withYes bool) {
	f := cmd.Flags()
	f.Int64Var(&pf.maxSats, "max-sats", 0, "pay at most this many sats for one call (no payment without it)")
	f.Int64Var(&pf.perServerPerDay, "max-sats-per-server-per-day", 0, "pay at most this many sats a day to one server (0: no daily limit)")
	f.Int64Var(&pf.perDay, "max-sats-per-day", 0, "pay at most this many sats a day in all (0: no daily limit)")
	f.StringSliceVar(&pf.allow, "pay-allow", nil, "servers allowed to charge (npub, hex or alias; default: any)")
	f.StringVar(&pf.walletFile, "wallet-file", "", "file (mode 0600) holding the wallet connection URI; else $"+walletEnv)
	f.StringVar(&pf.interaction, "payment-interaction", contextvm.PaymentTransparent, "how a server asks for payment (CEP-8): transparent (notifications) or explicit (-32042, pay, send again)")
	config.Bind(f, "max-sats", "payments.max-sats")
	config.Bind(f, "payment-interaction", "payments.interaction")
	config.Bind(f, "max-sats-per-server-per-day", "payments.max-sats-per-server-per-day")
	config.Bind(f, "max-sats-per-day", "payments.max-sats-per-day")
	config.Bind(f, "pay-allow", "payments.allow")
	config.Bind(f, "wallet-file", "payments.wallet-file")
	f.BoolVar(&pf.cashu, "cashu", false, "pay priced calls with Cashu ecash from your cvm cashu wallet, in the request itself (direct payment), within --max-sats")
	config.Bind(f, "cashu", "payments.cashu")
	if withYes {
		f.BoolVar(&pf.yes, "yes", false, "pay without asking, within --max-sats")
	}
	addRateFlags(cmd, &pf.rate, true)
}

// check refuses limits that cannot be, before anything is sent: a negative
// cap would read as no cap, and a negative daily limit as no daily limit
// at all. Malformed values never get here: the flag parser, the config
// file and the environment refuse them first.
func (pf payFlags) check() error {
	for _, l := range []struct {
		flag, key string
		v         int64
		zero      string
	}{
		{"--max-sats", "payments.max-sats", pf.maxSats, "0, the default, pays nothing"},
		{"--max-sats-per-day", "payments.max-sats-per-day", pf.perDay, "0, the default, sets no daily limit"},
		{"--max-sats-per-server-per-day", "payments.max-sats-per-server-per-day", pf.perServerPerDay, "0, the default, sets no daily limit"},
	} {
		if l.v < 0 {
			return fmt.Errorf("%s %d (or %s): a limit cannot be negative; give the most to pay in sats (%s)", l.flag, l.v, l.key, l.zero)
		}
	}
	return nil
}

// walletURI reads the wallet connection URI from --wallet-file (which must
// be private to its owner) or $CVM_WALLET; "" when neither is set.
func (a *app) walletURI(file string) (string, error) {
	if file != "" {
		b, err := secretfile.Read(file, 4096)
		if err != nil {
			return "", fmt.Errorf("--wallet-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return strings.TrimSpace(a.getenv(walletEnv)), nil
}

// redactURI shows a wallet URI without its secret: scheme and host only.
func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return "(wallet URI)"
	}
	return u.Scheme + "://" + u.Host + "/…(redacted)"
}

// wallet is the payment method of a wallet URI: the processor a server
// collects with, the handler a client pays with, and what closes them
// (the wallet connection's relay pool).
type wallet struct {
	proc    payments.Processor
	handler payments.Handler
	// nwc is the NIP-47 connection behind them; nil for a fake wallet.
	nwc   *nwc.Client
	close func() error
}

// openWallet opens the wallet of a URI:
//
//   - nostr+walletconnect://… (NIP-47): Lightning (bitcoin-lightning-bolt11)
//     through a Nostr Wallet Connect wallet, real or `cvm wallet-sim`.
//   - fake://NAME?ledger=PATH[&ttl=DURATION]: the Fake payment method's
//     simulator, for tests and demos, whose "wallet" is an account in a
//     ledger file that processes share. No money moves.
//
// ttl is how long a payment request the processor issues can be paid (0:
// the method's default; a fake URI's own ttl wins).
func openWallet(uri string, log *slog.Logger, ttl time.Duration) (wallet, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return wallet{}, fmt.Errorf("the wallet URI %s does not parse", redactURI(uri))
	}
	switch u.Scheme {
	case "fake":
		name, path := u.Host, u.Query().Get("ledger")
		if name == "" || path == "" {
			return wallet{}, errors.New("a fake (simulated, test/demo) wallet is fake://NAME?ledger=PATH")
		}
		if s := u.Query().Get("ttl"); s != "" {
			if ttl, err = time.ParseDuration(s); err != nil {
				return wallet{}, fmt.Errorf("fake wallet ttl: %w", err)
			}
		}
		ledger := payments.OpenLedger(path)
		return wallet{proc: &payments.FakeProcessor{Ledger: ledger, Payee: name, TTL: ttl}, handler: &payments.FakeHandler{Ledger: ledger, Payer: name},
			close: func() error { return nil }}, nil
	case "nostr+walletconnect":
		wu, err := nwc.ParseURI(uri)
		if err != nil {
			// The parser's errors name no secret (its tests check it).
			return wallet{}, fmt.Errorf("wallet: %w%s", err, nwcURIHint(uri))
		}
		w := nwc.NewClient(wu, nwc.ClientOptions{Logger: log})
		proc := lightning.NewProcessor(w, lightning.ProcessorOptions{TTL: ttl, Logger: log})
		// The processor's invoices made ahead first: they use the wallet.
		h := lightning.NewHandler(w)
		h.Logger = log
		return wallet{proc: proc, handler: h, nwc: w, close: func() error { return errors.Join(proc.Close(), w.Close()) }}, nil
	}
	return wallet{}, fmt.Errorf("unknown wallet URI scheme %q: want nostr+walletconnect:// (NIP-47), or fake:// for the test simulator", u.Scheme)
}

// nwcURIHint names the likely cause of a connection URI without its
// secret: copied from escaped JSON, or cut at its '&' by a shell that
// read the rest as another command. It never quotes the URI.
func nwcURIHint(uri string) string {
	_, query, _ := strings.Cut(uri, "?")
	switch {
	case strings.Contains(query, `\u0026`):
		return `; the URI has \u0026 where '&' belongs: it was copied from escaped JSON; put '&' back, or write it to a file with cvm wallet-sim --out DIR`
	case !strings.Contains(query, "secret=") || !strings.Contains(query, "relay="):
		return "; was it cut at an '&' by the shell? quote it ('nostr+walletconnect://…'), or use cvm wallet-sim --out DIR and --wallet-file DIR/NAME.wallet"
	}
	return ""
}

// payment is one payment a command made or refused, for reports.
type payment struct {
	Amount   int64  `json:"amount"`
	Unit     string `json:"unit"`
	Server   string `json:"server"`
	What     string `json:"capability"`
	PMI      string `json:"pmi"`
	Accepted bool   `json:"accepted"`
	Rejected bool   `json:"rejected,omitempty"`
	Error    string `json:"error,omitempty"`
}

// payLog collects a command's payments and reports each on stderr.
type payLog struct {
	a  *app
	mu sync.Mutex
	// paid are the payments made, in order.
	paid []payment
	// close closes the wallet connection; the command calls it when done.
	close func() error
	// wallet is the client's Lightning wallet, nil without one: it makes
	// the invoices a channel's refund is paid to.
	wallet payments.Wallet
}

// Close closes the wallet connection of the payment options it came with.
func (l *payLog) Close() error {
	if l == nil || l.close == nil {
		return nil
	}
	return l.close()
}

func (l *payLog) report(r contextvm.PaymentReport) {
	l.mu.Lock()
	defer l.mu.Unlock()
	server := r.Server
	if pk, err := nostrx.ParsePublicKey(server); err == nil {
		server = nostrx.EncodeNpub(pk.Key)
	}
	switch {
	case r.Paid && !r.Accepted && !r.Rejected:
		l.paid = append(l.paid, payment{Amount: r.Amount, Unit: r.Unit, Server: server, What: r.Capability, PMI: r.PMI})
		fmt.Fprintf(l.a.stderr, "paid %d %s to %s for %s (%s)\n", r.Amount, r.Unit, server, r.Capability, r.PMI)
	case r.Accepted:
		if n := len(l.paid); n > 0 {
			l.paid[n-1].Accepted = true
		}
	case r.Rejected:
		if n := len(l.paid); n > 0 {
			l.paid[n-1].Rejected = true
		}
		fmt.Fprintf(l.a.stderr, "the server rejected the payment of %d %s for %s: %s\n", r.Amount, r.Unit, r.Capability, r.Message)
	}
}

func (l *payLog) payments() []payment {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]payment(nil), l.paid...)
}

// payOptions are the client's payment options from the flags and the
// config: a budget whose daily totals live in the data directory, the
// wallet's handler, and how to ask. ask is nil where nobody can be asked
// (pay within the cap only).
func (a *app) payOptions(pf payFlags, ask func(context.Context, contextvm.PaymentOffer) bool) (*cep8.PayOptions, *payLog, error) {
	if err := pf.check(); err != nil {
		return nil, nil, err
	}
	tolerance, err := toleranceOf(pf.rate)
	if err != nil {
		return nil, nil, err
	}
	rates, err := a.usdRates(pf.rate)
	if err != nil {
		return nil, nil, err
	}
	log := &payLog{a: a, close: func() error { return nil }}
	opts := &cep8.PayOptions{Report: log.report, Confirm: ask, Tolerance: tolerance}
	if rates != nil { // no nil *usdrate.Source in the interface
		opts.Rates = rates
	}
	switch pf.interaction {
	case "", contextvm.PaymentTransparent:
	case "explicit", contextvm.PaymentExplicitGating:
		opts.ExplicitGating = true
	default:
		return nil, nil, fmt.Errorf("--payment-interaction %q: want transparent or explicit", pf.interaction)
	}
	uri, err := a.walletURI(pf.walletFile)
	if err != nil {
		return nil, nil, err
	}
	if uri != "" {
		w, err := openWallet(uri, a.log, 0)
		if err != nil {
			return nil, nil, err
		}
		opts.Handlers = []payments.Handler{w.handler}
		log.close = w.close
		if w.nwc != nil {
			log.wallet = w.nwc
		}
	}
	if pf.cashu {
		w, err := a.cashuWallet()
		if err != nil {
			return nil, nil, err
		}
		opts.Bearers = []payments.Bearer{cashuwallet.NewBearer(w)}
		closeLN := log.close
		log.close = func() error {
			var err error
			if closeLN != nil {
				err = closeLN()
			}
			return errors.Join(err, w.Close()) // fsyncs what the payments wrote
		}
	}
	if pf.maxSats > 0 {
		dir, err := a.dataSubdir("", "payments")
		if err != nil {
			return nil, nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, err
		}
		var allow []string
		for _, s := range pf.allow {
			pk, err := a.resolveServerKey(s)
			if err != nil {
				return nil, nil, fmt.Errorf("--pay-allow: %w", err)
			}
			allow = append(allow, pk.Key.Hex())
		}
		opts.Budget = &payments.Budget{Unit: "sats", PerCall: pf.maxSats, PerServerPerDay: pf.perServerPerDay, PerDay: pf.perDay,
			Allow: allow, Path: filepath.Join(dir, "budget.json")}
	}
	return opts, log, nil
}

// askOnTerminal asks the person at the terminal to approve each payment;
// with --yes, or where stdin is no terminal, it returns nil or a refusal:
// without a terminal only --yes pays.
func (a *app) askOnTerminal(yes bool) func(context.Context, contextvm.PaymentOffer) bool {
	if yes {
		return nil
	}
	in, ok := a.stdin.(*os.File)
	if fi, err := statOf(in, ok); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return func(_ context.Context, o contextvm.PaymentOffer) bool {
			fmt.Fprintf(a.stderr, "not paying %d %s for %s: no terminal to ask; give --yes to pay within --max-sats\n", o.Amount, o.Unit, o.Capability)
			return false
		}
	}
	var mu sync.Mutex
	return func(ctx context.Context, o contextvm.PaymentOffer) bool {
		mu.Lock()
		defer mu.Unlock()
		server := o.Server
		if pk, err := nostrx.ParsePublicKey(server); err == nil {
			server = nostrx.EncodeNpub(pk.Key)
		}
		fmt.Fprintf(a.stderr, "pay %d %s to %s for %s? [y/N] ", o.Amount, o.Unit, server, o.Capability)
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return false
		}
		answer := strings.ToLower(strings.TrimSpace(line))
		return answer == "y" || answer == "yes"
	}
}

func statOf(f *os.File, ok bool) (os.FileInfo, error) {
	if !ok || f == nil {
		return nil, errors.New("not a file")
	}
	return f.Stat()
}

// declinedError turns a payment the client would not make into the
// command's error: exit 2, saying what to do. pay is what the client
// paid with, so that the advice names only what is missing.
func declinedError(err error, pay *cep8.PayOptions) (error, bool) {
	d, ok := contextvm.Declined(err)
	if !ok {
		return nil, false
	}
	what := fmt.Sprintf("the call costs %d %s", d.Amount, d.Unit)
	if pay != nil && pay.Channel != nil && d.Reason == contextvm.DeclinedOverDaily && d.Amount == pay.Channel.DepositSats {
		what = fmt.Sprintf("the channel's deposit is %d %s (--channel)", d.Amount, d.Unit)
	}
	switch d.Reason {
	case contextvm.DeclinedNoCap, contextvm.DeclinedNoPayments:
		if pay != nil && len(pay.Handlers) > 0 {
			return fmt.Errorf("%s and no per-call cap allows paying it; give --max-sats %d (or set payments.max-sats) to pay it with your wallet", what, d.Amount), true
		}
		return fmt.Errorf("%s; give --max-sats %d (or set payments.max-sats) and a wallet (--wallet-file or $%s) to pay for it", what, d.Amount, walletEnv), true
	case contextvm.DeclinedOverCap:
		return fmt.Errorf("%s, more than --max-sats; raise --max-sats to pay it", what), true
	case contextvm.DeclinedOverDaily:
		return fmt.Errorf("%s, more than is left of a daily limit (payments.max-sats-per-day, payments.max-sats-per-server-per-day): %w", what, err), true
	case contextvm.DeclinedNotAllowed:
		return fmt.Errorf("%s and the server is not in payments.allow (--pay-allow)", what), true
	case contextvm.DeclinedUnit:
		return fmt.Errorf("%s, a unit the budget (in sats) does not hold; not paid", what), true
	case contextvm.DeclinedNoHandler:
		return fmt.Errorf("%s in %q, and no wallet here pays that way; give --wallet-file or $%s", what, d.PMI, walletEnv), true
	case contextvm.DeclinedByPerson:
		return fmt.Errorf("%s; not paid (declined, or no terminal to ask: give --yes to pay within --max-sats)", what), true
	case contextvm.DeclinedNoRate:
		if pay == nil || pay.Rates == nil {
			return fmt.Errorf("%s for a price in usd, which cvm checks at a usd rate of its own; give a rate source, --usd-rate-url URL and --usd-rate-pointer /PATH (or [payments.usd-rate] in config.toml); not paid", what), true
		}
		return fmt.Errorf("%s for a price in usd, and %s; not paid", what, payerReason(err, payments.ErrNoRate)), true
	case contextvm.DeclinedOverRate:
		return fmt.Errorf("%s, more than the usd price comes to at your rate: %s; not paid (--usd-rate-tolerance sets how far above is accepted)", what, payerReason(err, payments.ErrOverRate)), true
	}
	return fmt.Errorf("%s and was not paid: %w", what, err), true
}

// payerReason is the payer's reason in a declined call's err, after its
// kind (sentinel), which the caller's message says in its own words.
func payerReason(err, sentinel error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, sentinel.Error()+": "); ok {
		return rest
	}
	if _, rest, ok := strings.Cut(msg, "was not paid: "); ok {
		return rest
	}
	return msg
}
