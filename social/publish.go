package social

import (
	"context"
	"fmt"

	"fiatjaf.com/nostr"
)

// Publisher signs nothing: it sends signed events to relays and reads
// what they store; *nostrx.Pool is one.
type Publisher interface {
	Querier
	Publish(ctx context.Context, ev nostr.Event) error
}

// PublishProfile makes p the profile of signer's key on the relays of
// pub: it reads the newest profile stored there and publishes p only when
// that one differs, created after it so that it replaces it. It reports
// whether it published.
func PublishProfile(ctx context.Context, pub Publisher, signer nostr.Signer, p Profile) (bool, error) {
	me, err := signer.GetPublicKey(ctx)
	if err != nil {
		return false, fmt.Errorf("social: profile: %w", err)
	}
	stored, err := pub.Query(ctx, ProfilesFilter(me))
	if err != nil {
		return false, fmt.Errorf("social: reading the current profile: %w", err)
	}
	var newest nostr.Timestamp
	current, found := Profile{}, false
	for _, ev := range stored {
		if ev.PubKey != me || ev.CreatedAt < newest {
			continue
		}
		newest = ev.CreatedAt
		current, err = ParseProfile(ev)
		found = err == nil
	}
	if found && current == p {
		return false, nil
	}
	ev := p.Event()
	ev.CreatedAt = max(ev.CreatedAt, newest+1)
	if err := signer.SignEvent(ctx, &ev); err != nil {
		return false, fmt.Errorf("social: profile: %w", err)
	}
	if err := pub.Publish(ctx, ev); err != nil {
		return false, fmt.Errorf("social: publishing the profile: %w", err)
	}
	return true, nil
}
