package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
)

// hashLen is the length of a common schema hash: sha256, in hex.
const hashLen = 64

// schemaArg reads a --schema value: a common schema hash, or the start of
// one as cvm shows it (12 characters and "…" in cvm discover and cvm
// tools). whole reports a complete hash.
func schemaArg(v string) (prefix string, whole bool, err error) {
	prefix = strings.ToLower(strings.TrimSpace(v))
	prefix = strings.TrimSuffix(strings.TrimSuffix(prefix, "…"), "...")
	valid := prefix != "" && len(prefix) <= hashLen && strings.Trim(prefix, "0123456789abcdef") == ""
	if !valid {
		return "", false, fmt.Errorf("--schema %q: want a common schema hash (%d hex characters) or the start of one, as cvm discover shows it", v, hashLen)
	}
	return prefix, len(prefix) == hashLen, nil
}

// fetchForSchema reads the announcements for a --schema prefix into a
// catalog: for a whole hash, those the relays select by its #i tag; for a
// prefix, which no relay filter can select, every server's (f's category
// still selects), to find the one hash that starts with it. The error of a
// prefix that matches no hash, or several, is a *schemaPrefixError.
func fetchForSchema(ctx context.Context, pool *nostrx.Pool, f discovery.Filter, prefix string, whole bool) (*discovery.Catalog, string, error) {
	f.SchemaHash = ""
	if whole {
		f.SchemaHash = prefix
	}
	catalog, err := discovery.Fetch(ctx, pool, f)
	if err != nil || whole {
		return catalog, prefix, err
	}
	hash, err := catalog.ResolveSchema(prefix)
	if err != nil {
		perr := &schemaPrefixError{err: err, prefix: prefix, relays: len(pool.Relays())}
		if amb := (*discovery.AmbiguousSchemaError)(nil); errors.As(err, &amb) {
			perr.candidates = amb.Candidates
		}
		return catalog, "", perr
	}
	return catalog, hash, nil
}

// schemaPrefixError says what to do about a prefix that matches no schema
// hash, or several (candidates).
type schemaPrefixError struct {
	err        error
	prefix     string
	candidates []discovery.Schema
	relays     int
}

func (e *schemaPrefixError) Unwrap() error { return e.err }

func (e *schemaPrefixError) Error() string {
	if len(e.candidates) == 0 {
		return fmt.Sprintf("no server on %d relay(s) claims a common schema whose hash starts with %s (see: cvm discover --schemas)", e.relays, e.prefix)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--schema %s is ambiguous: %d common schema hashes start with it; give more of the one you mean:\n", e.prefix, len(e.candidates))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, sc := range e.candidates {
		fmt.Fprintf(tw, "  %s\t%s\tverified by %d of %d server(s)\n", sc.Hash, sc.Tool, sc.Verified, sc.Claimed)
	}
	tw.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// ambiguous reports whether the prefix matches several hashes: the
// person's to correct (exit 2), where one that matches none is what the
// relays hold (exit 1).
func (e *schemaPrefixError) ambiguous() bool { return len(e.candidates) > 0 }
