package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/outbound"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit statuses, the same for every command; cvm call tells more apart
// (callexit.go).
const (
	exitOK     = 0
	exitRemote = 1 // the remote side reported a failure
	exitLocal  = 2 // a usage error or a local failure
)

// env is the process environment a command runs in; tests supply their own.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// fetcher, when set (by in-process tests), is the fetcher for what
	// strangers name; nil: app.outbound makes one (nip05.go).
	fetcher *outbound.Fetcher
}

// app is the state shared by all commands of one invocation.
type app struct {
	env

	configPath string
	logLevel   string
	logFormat  string
	jsonOut    bool

	file     *config.FileValues
	settings []config.Setting
	log      *slog.Logger

	// fetch is the fetcher app.outbound made, on first use (nip05.go).
	fetch *outbound.Fetcher
}

// remoteError marks a failure reported by the remote side (exit status 1).
type remoteError struct{ err error }

func (e remoteError) Error() string { return e.err.Error() }
func (e remoteError) Unwrap() error { return e.err }

// remote wraps err so that the command exits with status 1.
func remote(err error) error {
	if err == nil {
		return nil
	}
	return remoteError{err}
}

func run(ctx context.Context, args []string, e env) int {
	a := &app{env: e}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(e.stderr, "cvm: %v\n", err)
	return exitStatus(err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "cvm",
		Short: "MCP over Nostr (ContextVM) and MCPx rooms",
		Long: `cvm puts MCP servers on open networks and lets agents use them.

Settings come from config.toml in the config directory, then CVM_* environment
variables, then flags; later ones win. See "cvm config".`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: a.setup,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.configPath, "config", "", "config file (default: config.toml in the config directory)")
	pf.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.BoolVar(&a.jsonOut, "json", false, "print machine-readable JSON on stdout")
	config.Bind(pf, "log-level", "log-level")
	config.Bind(pf, "log-format", "log-format")

	root.AddCommand(
		a.versionCommand(),
		a.keygenCommand(),
		a.whoamiCommand(),
		a.configCommand(),
		a.relayCommand(),
		a.schemaCommand(),
		a.roomCommand(),
		a.gatewayCommand(),
		a.proxyCommand(),
		a.callCommand(),
		a.marketCommand(),
		a.channelsCommand(),
		a.toolsCommand(),
		a.genCommand(),
		a.resourcesCommand(),
		a.promptsCommand(),
		a.demoCommand(),
		a.discoverCommand(),
		a.unannounceCommand(),
		a.noteCommand(),
		a.reviewCommand(),
		a.reviewsCommand(),
		a.walletSimCommand(),
		a.mintSimCommand(),
		a.cashuCommand(),
	)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see: %s --help)", err, c.CommandPath())
	})
	return root
}

// setup runs before every command: it resolves settings and builds the logger.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	path := a.configPath
	if path == "" {
		if p := a.getenv("CVM_CONFIG"); p != "" {
			path = p
		} else if dir, err := config.Dir(a.getenv); err == nil {
			path = filepath.Join(dir, "config.toml")
		}
	}
	file, err := config.Load(path)
	if err != nil {
		return err
	}
	a.file = file
	flags := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	flags.AddFlagSet(cmd.InheritedFlags())
	flags.AddFlagSet(cmd.LocalFlags())
	if a.settings, err = config.Apply(flags, file, a.getenv); err != nil {
		return err
	}
	a.log, err = newLogger(a.stderr, a.logLevel, a.logFormat)
	return err
}

// dataSubdir is flag if set, else name in the data directory.
func (a *app) dataSubdir(flag, name string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	dir, err := config.DataDir(a.getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

// printJSON writes v as one line of JSON on stdout.
func (a *app) printJSON(v any) error {
	b, err := plainJSON(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// plainJSON is json.Marshal without its HTML escaping: what cvm prints is
// read by people and programs, not put in web pages, and a URI printed
// with & as \u0026 is broken when a person copies it.
func plainJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
