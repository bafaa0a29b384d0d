package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// KeepAnnounced keeps srv's public announcements (CEP-6, with the prices
// and common tools of srv's options) current until ctx ends, from an
// upstream session of its own: the lists are announced at start and again
// after every list_changed the upstream sends. When that session ends (the
// upstream died), it is reopened with backoff and everything is announced
// again, since a restarted upstream may offer other things.
func KeepAnnounced(ctx context.Context, up Upstream, srv *contextvm.Server, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	const firstRetry, maxRetry, healthy = time.Second, time.Minute, 30 * time.Second
	backoff := firstRetry
	for ctx.Err() == nil {
		start := time.Now()
		if err := announceSession(ctx, up, srv); err != nil && ctx.Err() == nil {
			// Ended by ctx, it did not fail: the gateway is stopping.
			log.Warn("announcements: upstream session failed", "err", err, "retry_in", backoff)
		}
		if time.Since(start) > healthy {
			backoff = firstRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxRetry)
	}
}

// announceSession announces from one upstream session until it or ctx ends.
func announceSession(ctx context.Context, up Upstream, srv *contextvm.Server) error {
	client, changed := contextvm.NewAnnouncementClient()
	cs, err := client.Connect(ctx, upstreamTransport{up}, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	var ended sync.WaitGroup
	ended.Go(func() {
		cs.Wait() // the upstream session ended: stop announcing from it
		cancel()
	})
	defer ended.Wait()
	defer cs.Close()
	defer cancel()
	srv.KeepAnnounced(sctx, cs, changed)
	return ctx.Err()
}

// upstreamTransport makes an Upstream an mcp.Transport for a go-sdk client.
type upstreamTransport struct{ up Upstream }

func (t upstreamTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	return t.up.Open(ctx)
}
