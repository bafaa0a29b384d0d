package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/cvmgo/cvm/nostrx"
)

// keyUse says what a command does when no key is configured anywhere.
type keyUse int

const (
	// serverKey: a long-running server creates the default key file on first
	// run, so that its identity survives restarts.
	serverKey keyUse = iota
	// clientKey: a one-shot client uses a throwaway key.
	clientKey
	// existingKey: the command needs a key that already exists.
	existingKey
)

// identity is a resolved secret key and where it came from. It has no
// String method on purpose: nothing should format it.
type identity struct {
	secret nostr.SecretKey
	origin string // "--key FILE", "$CVM_SECRET_KEY", "config key FILE", "default key FILE", "throwaway"
}

func (id identity) pubkey() nostr.PubKey { return id.secret.Public() }

// defaultKeyPath is the key file in the user's config directory.
func (a *app) defaultKeyPath() (string, error) {
	dir, err := config.Dir(a.getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "key"), nil
}

// resolveIdentity applies the key precedence every command follows: --key
// FILE, else $CVM_SECRET_KEY (nsec or hex), else the config file's key path,
// else the default key file.
func (a *app) resolveIdentity(keyFlag string, use keyUse) (identity, error) {
	if keyFlag != "" {
		sk, err := nostrx.ReadKeyFile(keyFlag)
		if err != nil {
			return identity{}, keyFileError(err)
		}
		return identity{sk, "--key " + keyFlag}, nil
	}
	if s := a.getenv(secretenv.SecretKey); s != "" {
		sk, err := nostrx.ParseSecretKey(s)
		if err != nil {
			return identity{}, fmt.Errorf("$%s: %w", secretenv.SecretKey, err)
		}
		return identity{sk, "$" + secretenv.SecretKey}, nil
	}
	if a.file != nil {
		if v, ok := a.file.Lookup("key"); ok {
			path, ok := v.(string)
			if !ok {
				return identity{}, fmt.Errorf("%s: key must be a file path", a.file.Path)
			}
			sk, err := nostrx.ReadKeyFile(path)
			if err != nil {
				return identity{}, keyFileError(err)
			}
			return identity{sk, "config key " + path}, nil
		}
	}
	path, err := a.defaultKeyPath()
	if err != nil {
		return identity{}, err
	}
	switch use {
	case serverKey:
		sk, created, err := nostrx.LoadOrCreateKeyFile(path)
		if err != nil {
			return identity{}, keyFileError(err)
		}
		if created {
			a.log.Info("created a new identity", "path", path, "npub", nostrx.EncodeNpub(sk.Public()))
		}
		return identity{sk, "default key " + path}, nil
	default:
		sk, err := nostrx.ReadKeyFile(path)
		switch {
		case err == nil:
			return identity{sk, "default key " + path}, nil
		case errors.Is(err, fs.ErrNotExist) && use == clientKey:
			return identity{nostr.Generate(), "throwaway"}, nil
		case errors.Is(err, fs.ErrNotExist):
			return identity{}, fmt.Errorf("no key configured and no key file at %s; create one with: cvm keygen", path)
		default:
			return identity{}, keyFileError(err)
		}
	}
}

func keyFileError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w; create a key with: cvm keygen --out FILE", err)
	}
	return err
}
