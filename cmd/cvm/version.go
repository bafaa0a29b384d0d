package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/cvmgo/cvm/internal/secp"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

type versionInfo struct {
	Version  string `json:"version"`
	Go       string `json:"go"`
	Crypto   string `json:"crypto"` // the secp256k1 backend: "pure-go" or "libsecp256k1"
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), Crypto: secp.Backend}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of cvm",
		Args:  positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			if a.jsonOut {
				return a.printJSON(v)
			}
			line := fmt.Sprintf("cvm %s (%s, crypto %s", v.Version, v.Go, v.Crypto)
			if v.Commit != "" {
				line += ", commit " + v.Commit
				if v.Modified {
					line += "+modified"
				}
			}
			fmt.Fprintln(a.stdout, line+")")
			return nil
		},
	}
}
