package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func (a *app) configCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Show the merged configuration and where each value came from",
		Long: `Show every setting cvm reads from config.toml, CVM_* environment variables
and defaults, with the layer that won. A setting named relay.listen is the
"listen" key of the [relay] table and the CVM_RELAY_LISTEN variable.`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings, err := a.allSettings(cmd.Root())
			if err != nil {
				return err
			}
			for _, key := range a.file.Keys() {
				if _, known := findSetting(settings, key); !known {
					fmt.Fprintf(a.stderr, "cvm: warning: %s sets %q, which no command reads\n", a.file.Path, key)
				}
			}
			if a.jsonOut {
				return a.printJSON(struct {
					File     string           `json:"file"`
					Settings []config.Setting `json:"settings"`
				}{a.file.Path, settings})
			}
			fmt.Fprintf(a.stdout, "config file: %s\n\n", a.file.Path)
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tFROM")
			for _, s := range settings {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Key, s.Value, s.Source, s.Origin)
			}
			return tw.Flush()
		},
	}
}

// allSettings resolves the bound flags of every command, plus the identity
// key, which follows its own precedence.
func (a *app) allSettings(root *cobra.Command) ([]config.Setting, error) {
	byKey := map[string]config.Setting{}
	for _, s := range a.settings {
		byKey[s.Key] = s
	}
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
		fs.AddFlagSet(c.LocalNonPersistentFlags())
		settings, err := config.Apply(fs, a.file, a.getenv)
		if err != nil {
			return err
		}
		for _, s := range settings {
			if _, seen := byKey[s.Key]; !seen {
				byKey[s.Key] = s
			}
		}
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	byKey["key"] = a.keySetting()
	if a.getenv(walletEnv) != "" {
		byKey["wallet"] = config.Setting{Key: "wallet", Value: "(secret from the environment)", Source: config.Env, Origin: walletEnv}
	}
	for alias, target := range a.file.Table("servers") {
		byKey["servers."+alias] = config.Setting{Key: "servers." + alias, Value: target, Source: config.File, Origin: a.file.Path}
	}
	out := make([]config.Setting, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y config.Setting) int { return strings.Compare(x.Key, y.Key) })
	return out, nil
}

// keySetting describes which identity a command without --key would use,
// without reading or creating any key file.
func (a *app) keySetting() config.Setting {
	if a.getenv(secretenv.SecretKey) != "" {
		return config.Setting{Key: "key", Value: "(secret from the environment)", Source: config.Env, Origin: secretenv.SecretKey}
	}
	if v, ok := a.file.Lookup("key"); ok {
		return config.Setting{Key: "key", Value: fmt.Sprint(v), Source: config.File, Origin: a.file.Path}
	}
	path, err := a.defaultKeyPath()
	if err != nil {
		path = "(no config directory)"
	}
	return config.Setting{Key: "key", Value: path, Source: config.Default}
}

func findSetting(settings []config.Setting, key string) (config.Setting, bool) {
	for _, s := range settings {
		if s.Key == key {
			return s, true
		}
	}
	return config.Setting{}, false
}
