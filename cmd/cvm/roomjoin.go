package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/mcpx/participant"
	"github.com/spf13/pflag"
)

// joinFlags are how "room bridge" and "room chat" reach a topic.
type joinFlags struct {
	gateways                []string
	topic, token, tokenFile string
}

func (j *joinFlags) register(f *pflag.FlagSet) {
	f.StringSliceVar(&j.gateways, "gateway", []string{"http://127.0.0.1:7070"},
		"the gateway's base URL; repeat it (or separate by commas) for nodes of one cluster, tried in order, the next taken when one fails")
	f.StringVar(&j.topic, "topic", "", "topic to join")
	f.StringVar(&j.token, "token", "", "bearer token (see: cvm room token)")
	f.StringVar(&j.tokenFile, "token-file", "", "file holding the bearer token, read again at every reconnect")
	config.Bind(f, "gateway", "room.gateway")
}

// options checks the flags and returns client options for them.
func (j *joinFlags) options() (participant.Options, error) {
	var o participant.Options
	if j.topic == "" {
		return o, errors.New("--topic is required")
	}
	switch {
	case j.token != "" && j.tokenFile != "":
		return o, errors.New("give --token or --token-file, not both")
	case j.token != "":
		o.Token = j.token
	case j.tokenFile != "":
		path := j.tokenFile
		if _, err := readToken(path); err != nil {
			return o, err
		}
		o.TokenSource = func(context.Context) (string, error) { return readToken(path) }
	default:
		return o, errors.New("--token or --token-file is required (mint one with: cvm room token --topic T --id ID)")
	}
	if len(j.gateways) == 0 || slices.Contains(j.gateways, "") {
		return o, errors.New("--gateway must not be empty")
	}
	o.Gateway, o.Gateways, o.Topic = j.gateways[0], j.gateways[1:], j.topic
	return o, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", path)
	}
	return tok, nil
}

// joinError makes a refusal by the gateway a remote failure (exit 1) and
// anything else a local one.
func joinError(err error) error {
	var herr *participant.HTTPError
	if errors.As(err, &herr) {
		return remote(err)
	}
	return err
}
