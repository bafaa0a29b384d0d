package relay

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/khatru"
	"fiatjaf.com/nostr/nip40"
)

// KindGiftWrap is the stored gift-wrap kind (NIP-59, and ContextVM's CEP-4
// persistent wrap).
const KindGiftWrap nostr.Kind = 1059

// onEvent is khatru's OnEvent hook: it runs for every EVENT whose id and
// signature have been checked, ephemeral or not. A rejection's message
// becomes the OK reason.
func (r *Relay) onEvent(ctx context.Context, evt nostr.Event) (reject bool, msg string) {
	reject, msg = r.checkEvent(ctx, evt)
	if reject {
		r.metrics.rejected.WithLabelValues(reasonPrefix(msg)).Inc()
		r.log.Debug("rejected event", "id", evt.ID.Hex(), "kind", int(evt.Kind), "reason", msg)
		return true, msg
	}
	r.metrics.accepted.WithLabelValues(kindClass(evt.Kind)).Inc()
	return false, ""
}

func (r *Relay) checkEvent(ctx context.Context, evt nostr.Event) (reject bool, msg string) {
	if c := connFrom(ctx); c != nil && !r.guard.allowEvent(c.ip) {
		return true, fmt.Sprintf("rate-limited: more than %g events per second from your address; slow down", r.limits.EventsPerSecond)
	}
	now := time.Now()
	if skew := r.limits.MaxFutureSkew; skew > 0 && evt.CreatedAt.Time().After(now.Add(skew)) {
		return true, fmt.Sprintf("invalid: created_at is more than %s in the future", skew)
	}
	if exp := nip40.GetExpiration(evt.Tags); exp >= 0 && exp.Time().Before(now) {
		return true, "invalid: event has already expired (NIP-40)"
	}
	if evt.Kind == KindGiftWrap && r.opts.GiftWrapTTL > 0 && evt.CreatedAt.Time().Before(now.Add(-r.opts.GiftWrapTTL)) {
		return true, fmt.Sprintf("invalid: gift wrap is older than this relay keeps them (%s)", r.opts.GiftWrapTTL)
	}
	return false, ""
}

// onRequest runs for each filter of a REQ or COUNT before anything is
// queried or subscribed.
func (r *Relay) onRequest(ctx context.Context, f nostr.Filter) (reject bool, msg string) {
	if !r.opts.Auth || !slices.Contains(f.Kinds, KindGiftWrap) {
		return false, ""
	}
	if c := connFrom(ctx); c == nil || len(c.authedKeys()) == 0 {
		r.metrics.rejected.WithLabelValues("auth-required").Inc()
		return true, "auth-required: gift wraps are served only to their authenticated recipient"
	}
	return false, ""
}

// clientIP is the address limits are keyed on. X-Forwarded-For is believed
// only when the relay is told it sits behind a proxy: otherwise any client
// could pick a fresh address per message and escape every limit.
func (r *Relay) clientIP(req *http.Request) string {
	if r.opts.TrustForwardedFor {
		return khatru.GetIPFromRequest(req)
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}

// expireGiftWraps deletes stored gift wraps once they are older than the
// retention time. Age is measured from created_at: ContextVM wraps carry the
// time they were sent, and created_at survives a restart where a receive time
// would not.
func (r *Relay) expireGiftWraps(ctx context.Context) {
	defer r.wg.Done()
	interval := min(max(r.opts.GiftWrapTTL/4, time.Second), 10*time.Minute)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := r.deleteOldGiftWraps(); n > 0 {
				r.log.Debug("expired gift wraps", "count", n)
			}
		}
	}
}

func (r *Relay) deleteOldGiftWraps() int {
	cutoff := nostr.Timestamp(time.Now().Add(-r.opts.GiftWrapTTL).Unix())
	deleted := 0
	for {
		var ids []nostr.ID
		for evt := range r.store.QueryEvents(nostr.Filter{Kinds: []nostr.Kind{KindGiftWrap}, Until: cutoff}, 500) {
			ids = append(ids, evt.ID)
		}
		if len(ids) == 0 {
			return deleted
		}
		for _, id := range ids {
			if err := r.store.DeleteEvent(id); err != nil {
				r.log.Warn("deleting expired gift wrap", "id", id.Hex(), "err", err)
				return deleted
			}
			deleted++
		}
	}
}

func kindClass(k nostr.Kind) string {
	switch {
	case k.IsEphemeral():
		return "ephemeral"
	case k.IsReplaceable():
		return "replaceable"
	case k.IsAddressable():
		return "addressable"
	default:
		return "regular"
	}
}

// reasonPrefix returns the machine-readable prefix of an OK or CLOSED reason.
func reasonPrefix(msg string) string {
	for i := 0; i < len(msg); i++ {
		if msg[i] == ':' {
			return msg[:i]
		}
	}
	return "other"
}
