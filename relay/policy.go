package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/eventstore"
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

// storeEvent wraps khatru's StoreEvent hook (regular kinds, 5 among them)
// to carry out NIP-09 deletion requests. khatru stores an event before the
// relay answers it, so a request is checked here, before it is stored: one
// that is refused is answered OK false and is neither stored nor
// broadcast. The events it names are deleted before it is stored, so that
// a failed deletion leaves nothing stored either; a failed store after
// them is answered with an error, and the client sends the request again.
func (r *Relay) storeEvent(save func(context.Context, nostr.Event) error) func(context.Context, nostr.Event) error {
	return func(ctx context.Context, evt nostr.Event) error {
		if evt.Kind != nostr.KindDeletion {
			return save(ctx, evt)
		}
		targets, reason := r.planDeletion(ctx, evt)
		if reason != "" {
			if r.has(evt.ID) {
				// Accepted when it named nothing else, it has been stored
				// since: it cannot be answered OK false now.
				return eventstore.ErrDupEvent
			}
			r.metrics.rejected.WithLabelValues(reasonPrefix(reason)).Inc()
			return errors.New(reason)
		}
		for _, id := range targets {
			if err := r.store.DeleteEvent(id); err != nil {
				return fmt.Errorf("error: deleting %s: %w", id.Hex(), err)
			}
		}
		return save(ctx, evt)
	}
}

// planDeletion returns the stored events a NIP-09 request deletes: those
// it names by "e" and "a" that belong to its author. Naming someone else's
// event refuses the whole request, with the reason. An event the requester
// may not see (viewer.sees) is passed over instead: a refusal would tell
// it the event exists.
func (r *Relay) planDeletion(ctx context.Context, del nostr.Event) (targets []nostr.ID, reason string) {
	v := r.viewerFor(ctx)
	for _, tag := range del.Tags {
		if len(tag) < 2 {
			continue
		}
		var f nostr.Filter
		switch tag[0] {
		case "e":
			id, err := nostr.IDFromHex(tag[1])
			if err != nil {
				return nil, "invalid: bad e tag in deletion request"
			}
			f = nostr.Filter{IDs: []nostr.ID{id}}
		case "a":
			parts := strings.SplitN(tag[1], ":", 3)
			if len(parts) != 3 {
				continue
			}
			var kind int
			if _, err := fmt.Sscan(parts[0], &kind); err != nil {
				continue
			}
			author, err := nostr.PubKeyFromHex(parts[1])
			if err != nil {
				continue
			}
			f = nostr.Filter{Kinds: []nostr.Kind{nostr.Kind(kind)}, Authors: []nostr.PubKey{author}, Until: del.CreatedAt}
			if nostr.Kind(kind).IsAddressable() {
				// A replaceable event's address ends in an empty identifier
				// ("10002:<pubkey>:"): it has no d tag to match.
				f.Tags = nostr.TagMap{"d": {parts[2]}}
			}
		default:
			continue
		}
		for target := range r.store.QueryEvents(f, 100) {
			switch {
			case target.PubKey == del.PubKey:
				targets = append(targets, target.ID)
			case v.sees(target):
				return nil, "blocked: you are not the author of the event you asked to delete"
			}
		}
	}
	return targets, ""
}

// has reports whether an event with this id is stored.
func (r *Relay) has(id nostr.ID) bool {
	for range r.store.QueryEvents(nostr.Filter{IDs: []nostr.ID{id}}, 1) {
		return true
	}
	return false
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
