package outboundtest

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/cvmgo/cvm/outbound"
)

// The variables through which a test hands its loopback servers to a cvm
// binary it runs: EnvAllow, exact ip:port addresses (comma-separated) to
// let through; EnvCA, a PEM file of certificates to trust (a simulator's
// throw-away CA). Only exact addresses are ever let through: there is no
// value that opens private addresses wholesale.
const (
	EnvAllow = "CVM_TEST_OUTBOUND_ALLOW"
	EnvCA    = "CVM_TEST_OUTBOUND_CA"
)

// FromEnv adds to opts what EnvAllow and EnvCA say, read with getenv
// (os.Getenv outside tests); both unset, opts is returned as it is.
func FromEnv(opts outbound.Options, getenv func(string) string) (outbound.Options, error) {
	for _, s := range strings.Split(getenv(EnvAllow), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return opts, fmt.Errorf("$%s: %q is not ip:port", EnvAllow, s)
		}
		opts.Allow = append(opts.Allow, ap)
	}
	path := getenv(EnvCA)
	if path == "" {
		return opts, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return opts, fmt.Errorf("$%s: %w", EnvCA, err)
	}
	for len(b) > 0 {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return opts, fmt.Errorf("$%s: %w", EnvCA, err)
		}
		opts.ExtraRoots = append(opts.ExtraRoots, c)
	}
	if len(opts.ExtraRoots) == 0 {
		return opts, fmt.Errorf("$%s: %w", EnvCA, errors.New("no PEM certificate in the file"))
	}
	return opts, nil
}
