package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/internal/secretfile"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/cashu"
	cashuwallet "github.com/cvmgo/cvm/payments/cashu/wallet"
	"github.com/spf13/cobra"
)

// cashuHelp is the long help of cvm cashu and its commands.
const cashuHelp = `A Cashu ecash wallet, in sats. Its proofs (bearer secrets: whoever holds
one can spend it) live in the data directory, cashu/, one file (mode 0600)
per mint; two cvm processes can use them at once.

  cvm cashu mint --mint URL SATS   buy SATS of ecash at a mint: its Lightning
                                   invoice is paid with your wallet
                                   (--wallet-file or $CVM_WALLET) within
                                   --max-sats (payments.max-sats) and the
                                   daily limits
  cvm cashu balance                what you hold at each mint
  cvm cashu send SATS              print a cashuB token worth SATS; with proofs
                                   at several mints, say which with --mint
  cvm cashu receive -              swap a token (read from stdin) at its mint
                                   so that only you hold its sats

A token is money: cvm never logs one. Give receive the token on stdin (-)
or in a file (--token-file, mode 0600) rather than as an argument, which
other users of the machine can read in the process list.`

func (a *app) cashuCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cashu",
		Short:   "A Cashu ecash wallet: mint, balance, send and receive tokens",
		Long:    cashuHelp,
		Example: "  cvm cashu mint --mint https://mint.example.com 1000 --max-sats 1000\n  cvm cashu send 100 > token\n  cvm cashu receive - < token",
		Args:    positional(0, 0),
	}
	cmd.AddCommand(a.cashuMintCommand(), a.cashuBalanceCommand(), a.cashuSendCommand(), a.cashuReceiveCommand())
	return cmd
}

// cashuWallet is the wallet whose proofs are in the data directory; its
// caller closes it, which fsyncs what it wrote (withCashuWallet).
func (a *app) cashuWallet() (*cashuwallet.Wallet, error) {
	dir, err := a.dataSubdir("", "cashu")
	if err != nil {
		return nil, err
	}
	return cashuwallet.New(cashuwallet.Options{Dir: dir, Logger: a.log}), nil
}

// withCashuWallet runs f with the wallet of the data directory, then
// closes it.
func (a *app) withCashuWallet(f func(*cashuwallet.Wallet) error) error {
	w, err := a.cashuWallet()
	if err != nil {
		return err
	}
	err = f(w)
	if cerr := w.Close(); cerr != nil {
		return errors.Join(err, fmt.Errorf("writing the cashu wallet's files to disk: %w", cerr))
	}
	return err
}

// parseSats parses a positive amount of sats.
func parseSats(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > 21_000_000*100_000_000 {
		return 0, fmt.Errorf("%q is not an amount of sats: give a whole number above zero", s)
	}
	return n, nil
}

// cashuMintFlags are cvm cashu mint's flags: the usual payment limits.
type cashuMintFlags struct {
	mint            string
	walletFile      string
	maxSats         int64
	perServerPerDay int64
	perDay          int64
}

func (a *app) cashuMintCommand() *cobra.Command {
	var mf cashuMintFlags
	cmd := &cobra.Command{
		Use:     "mint --mint URL SATS",
		Short:   "Buy SATS of ecash at a mint, paying its invoice with your wallet",
		Long:    cashuHelp,
		Example: "  cvm cashu mint --mint https://mint.example.com 1000 --max-sats 1000",
		Args:    positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			amount, err := parseSats(args[0])
			if err != nil {
				return err
			}
			return a.cashuMint(cmd.Context(), mf, amount)
		},
	}
	f := cmd.Flags()
	f.StringVar(&mf.mint, "mint", "", "the mint's URL (https://…)")
	f.StringVar(&mf.walletFile, "wallet-file", "", "file (mode 0600) holding the wallet connection URI; else $"+walletEnv)
	f.Int64Var(&mf.maxSats, "max-sats", 0, "pay at most this many sats for the mint's invoice (no payment without it)")
	f.Int64Var(&mf.perServerPerDay, "max-sats-per-server-per-day", 0, "pay at most this many sats a day to one mint or server (0: no daily limit)")
	f.Int64Var(&mf.perDay, "max-sats-per-day", 0, "pay at most this many sats a day in all (0: no daily limit)")
	config.Bind(f, "wallet-file", "payments.wallet-file")
	config.Bind(f, "max-sats", "payments.max-sats")
	config.Bind(f, "max-sats-per-server-per-day", "payments.max-sats-per-server-per-day")
	config.Bind(f, "max-sats-per-day", "payments.max-sats-per-day")
	return cmd
}

// cashuMint is cvm cashu mint: the budget reserves the amount before the
// invoice is paid and gets it back if paying fails.
func (a *app) cashuMint(ctx context.Context, mf cashuMintFlags, amount uint64) error {
	if mf.mint == "" {
		return errors.New("cvm cashu mint needs --mint URL, the mint to buy ecash at")
	}
	pf := payFlags{maxSats: mf.maxSats, perServerPerDay: mf.perServerPerDay, perDay: mf.perDay}
	if err := pf.check(); err != nil {
		return err
	}
	if mf.maxSats <= 0 || amount > uint64(mf.maxSats) {
		return fmt.Errorf("minting %d sats pays an invoice of %d sats: give --max-sats %d (or set payments.max-sats) to allow it", amount, amount, amount)
	}
	mintURL, err := cashuwallet.NormalizeMintURL(mf.mint)
	if err != nil {
		return err
	}
	uri, err := a.walletURI(mf.walletFile)
	if err != nil {
		return err
	}
	if uri == "" {
		return fmt.Errorf("cvm cashu mint pays the mint's Lightning invoice: give --wallet-file FILE or $%s with a nostr+walletconnect:// URI", walletEnv)
	}
	lw, err := openWallet(uri, a.log, 0)
	if err != nil {
		return err
	}
	defer lw.close()
	dir, err := a.dataSubdir("", "payments")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	budget := &payments.Budget{Unit: "sats", PerCall: mf.maxSats, PerServerPerDay: mf.perServerPerDay, PerDay: mf.perDay, Path: filepath.Join(dir, "budget.json")}
	pay := func(ctx context.Context, invoice string, amount uint64) error {
		if err := budget.Reserve(ctx, mintURL, int64(amount), "sats"); err != nil {
			return err
		}
		req := payments.PaymentRequired{PMI: payments.PMILightningBolt11, Amount: int64(amount), PayReq: invoice}
		if _, err := lw.handler.Pay(ctx, req, mf.maxSats); err != nil {
			return errors.Join(fmt.Errorf("paying the mint's invoice: %w", err), budget.Refund(ctx, mintURL, int64(amount)))
		}
		return nil
	}
	return a.withCashuWallet(func(w *cashuwallet.Wallet) error {
		if err := w.Mint(ctx, mintURL, amount, pay); err != nil {
			return cashuExit(err)
		}
		return a.cashuReport(w, mintURL, "minted", amount)
	})
}

// cashuReport says what an operation moved and what is now held there.
func (a *app) cashuReport(w *cashuwallet.Wallet, mintURL, verb string, amount uint64) error {
	held := uint64(0)
	if bs, err := w.Balance(); err == nil {
		for _, b := range bs {
			if b.Mint == mintURL {
				held = b.Sats
			}
		}
	}
	if a.jsonOut {
		return a.printJSON(map[string]any{"mint": mintURL, verb: amount, "balance": held})
	}
	fmt.Fprintf(a.stdout, "%s %d sats at %s; %d sats held there\n", verb, amount, mintURL, held)
	return nil
}

func (a *app) cashuBalanceCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "balance",
		Short:   "What your Cashu wallet holds at each mint",
		Long:    cashuHelp,
		Example: "  cvm cashu balance\n  cvm cashu balance --json",
		Args:    positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var bs []cashuwallet.MintBalance
			err := a.withCashuWallet(func(w *cashuwallet.Wallet) (err error) {
				bs, err = w.Balance()
				return err
			})
			if err != nil {
				return err
			}
			var total uint64
			for _, b := range bs {
				total += b.Sats
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"total": total, "mints": bs})
			}
			for _, b := range bs {
				fmt.Fprintf(a.stdout, "%d sats at %s (%d proofs)", b.Sats, b.Mint, b.Proofs)
				if b.Pending > 0 {
					fmt.Fprintf(a.stdout, "; %d sats in an operation a crash interrupted, finished by the next one at this mint", b.Pending)
				}
				if b.Sent > 0 {
					fmt.Fprintf(a.stdout, "; %d sats in tokens sent and not yet seen redeemed", b.Sent)
				}
				fmt.Fprintln(a.stdout)
			}
			fmt.Fprintf(a.stdout, "%d sats in all\n", total)
			return nil
		},
	}
}

func (a *app) cashuSendCommand() *cobra.Command {
	var mint string
	cmd := &cobra.Command{
		Use:     "send SATS",
		Short:   "Print a cashuB token worth SATS, from the proofs you hold",
		Long:    cashuHelp,
		Example: "  cvm cashu send 100 > token\n  cvm cashu send 100 --mint https://mint.example.com",
		Args:    positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			amount, err := parseSats(args[0])
			if err != nil {
				return err
			}
			return a.withCashuWallet(func(w *cashuwallet.Wallet) error {
				if mint, err = a.cashuSendMint(w, mint, amount); err != nil {
					return err
				}
				err = w.Send(cmd.Context(), mint, amount, func(tok cashu.Token) error {
					s, err := tok.EncodeV4()
					if err != nil {
						return err
					}
					if a.jsonOut {
						return a.printJSON(map[string]any{"token": s, "mint": tok.Mint, "amount": amount})
					}
					_, err = fmt.Fprintln(a.stdout, s)
					return err
				})
				return cashuExit(err)
			})
		},
	}
	cmd.Flags().StringVar(&mint, "mint", "", "the mint whose proofs to send (needed when you hold proofs at several)")
	return cmd
}

// cashuSendMint is the mint to send from: --mint, or the one mint that
// holds enough.
func (a *app) cashuSendMint(w *cashuwallet.Wallet, mint string, amount uint64) (string, error) {
	if mint != "" {
		return mint, nil
	}
	bs, err := w.Balance()
	if err != nil {
		return "", err
	}
	var held []string
	for _, b := range bs {
		if b.Sats > 0 {
			held = append(held, fmt.Sprintf("%s (%d sats)", b.Mint, b.Sats))
			mint = b.Mint
		}
	}
	switch len(held) {
	case 0:
		return "", fmt.Errorf("%w: the wallet holds no proofs; get some with cvm cashu mint or cvm cashu receive", cashuwallet.ErrInsufficient)
	case 1:
		return mint, nil
	}
	return "", fmt.Errorf("you hold proofs at %d mints; say which to send %d sats from with --mint: %s", len(held), amount, strings.Join(held, ", "))
}

func (a *app) cashuReceiveCommand() *cobra.Command {
	var tokenFile string
	cmd := &cobra.Command{
		Use:     "receive - | receive --token-file FILE | receive TOKEN",
		Short:   "Swap a Cashu token at its mint, so that only you hold its sats",
		Long:    cashuHelp,
		Example: "  cvm cashu receive - < token\n  cvm cashu receive --token-file token",
		Args:    positional(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.cashuTokenInput(cmd, args, tokenFile)
			if err != nil {
				return err
			}
			tok, err := cashu.DecodeToken(s)
			if err != nil {
				return fmt.Errorf("not a Cashu token (cashuA… or cashuB…): %w", err)
			}
			return a.withCashuWallet(func(w *cashuwallet.Wallet) error {
				got, err := w.Receive(cmd.Context(), tok)
				if err != nil {
					return cashuExit(err)
				}
				mintURL, _ := cashuwallet.NormalizeMintURL(tok.Mint)
				return a.cashuReport(w, mintURL, "received", got)
			})
		},
	}
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file (mode 0600) holding the token")
	return cmd
}

// cashuTokenInput is the token to receive: from --token-file, from stdin
// ("-" or no argument), or the argument itself.
func (a *app) cashuTokenInput(cmd *cobra.Command, args []string, tokenFile string) (string, error) {
	var data []byte
	var err error
	switch {
	case tokenFile != "" && len(args) > 0:
		return "", usageError(cmd, "takes the token from --token-file or from an argument, not both")
	case tokenFile != "":
		data, err = secretfile.Read(tokenFile, cashu.MaxTokenLen+1024)
	case len(args) == 0 || args[0] == "-":
		data, err = io.ReadAll(io.LimitReader(a.stdin, cashu.MaxTokenLen+1024))
	default:
		data = []byte(args[0])
	}
	if err != nil {
		return "", fmt.Errorf("reading the token: %w", err)
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "", usageError(cmd, "got no token: give it on stdin, with --token-file FILE, or as an argument")
	}
	return s, nil
}

// cashuExit is err with the exit status of who failed: 1 when the mint
// refused (its *cashu.Error), 2 for what is wrong here.
func cashuExit(err error) error {
	if me := (*cashu.Error)(nil); errors.As(err, &me) {
		return remote(err)
	}
	return err
}
