package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cvmgo/cvm/contextvm/replica"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/spf13/pflag"
)

// replicaFlags are cvm gateway's flags for replica groups.
type replicaFlags struct {
	natsURL  string
	member   string
	timeout  time.Duration
	replicas int
}

const replicaHelp = `
--nats URL makes the gateway one replica of a group: every gateway with the
same key and the same NATS server (JetStream enabled: nats-server -js) serves
that key together. Each request runs on exactly one replica (claimed in a
JetStream key-value bucket, which also holds the replay guard and payment
state instead of --data); a client's requests go to one replica while it
lives; when a replica dies (unheard for --membership-timeout), its clients
move to the others without noticing, and its calls in flight are answered
with a retryable error (-32019). NATS unreachable at start is an error
(exit 2); a replica that loses NATS later refuses new requests with a
retryable error (-32018) until it is back. With --session-mode shared each
replica has its own shared upstream: clients on different replicas do not
share its state. See docs/replicas.md.`

func (rf *replicaFlags) add(f *pflag.FlagSet) {
	f.StringVar(&rf.natsURL, "nats", "", "NATS server URL (JetStream enabled): serve the key as one replica of a group, e.g. nats://127.0.0.1:4222")
	f.StringVar(&rf.member, "replica-name", "", "with --nats: this replica's name in the group (default random)")
	f.DurationVar(&rf.timeout, "membership-timeout", 3*time.Second, "with --nats: how long a replica may go unheard before its clients move")
	f.IntVar(&rf.replicas, "nats-replicas", 1, "with --nats: replicas of the shared bucket (3 on a 3-server NATS cluster)")
}

// connect joins NATS when --nats is given; nil options without it. The
// caller closes the connection after the gateway.
func (rf *replicaFlags) connect(ctx context.Context, a *app) (*replica.Group, func(), error) {
	if rf.natsURL == "" {
		return nil, func() {}, nil
	}
	if rf.timeout < 500*time.Millisecond {
		return nil, nil, fmt.Errorf("--membership-timeout %v: want at least 500ms", rf.timeout)
	}
	conn, err := natsx.Connect(ctx, rf.natsURL, natsx.Options{Name: "cvm gateway", Logger: a.log})
	if err != nil {
		return nil, nil, fmt.Errorf("--nats: %w (is nats-server -js running there?)", err)
	}
	return replica.New(replica.Options{Conn: conn, Member: rf.member, Timeout: rf.timeout, StoreReplicas: rf.replicas}), conn.Close, nil
}
