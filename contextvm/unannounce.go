package contextvm

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// unannouncedKinds are what Unannounce deletes: the announcements, the
// relay list and the server's profile (CEP-23, kind 0), which describes a
// server that is no longer offered. Its notes (kind 1) stay: they are
// history, not an offer.
var unannouncedKinds = append(slices.Clone(AnnouncementKinds), nostr.KindProfileMetadata)

// Unannounce asks the relays of pool to delete the announcements, relay
// list and profile that signer's key published (NIP-09, kind 5), and returns how many
// events the request names. It needs no running server: it reads the
// current announcements from the relays first. The request names each
// event by id, which every relay honours, and each kind by address
// ("11316:<pubkey>:"), which also covers versions a relay did not return.
func Unannounce(ctx context.Context, pool *nostrx.Pool, signer nostr.Signer) (int, error) {
	return unannounce(ctx, pool, signer, nil)
}

func unannounce(ctx context.Context, pool relayPool, signer nostr.Signer, known []nostr.ID) (int, error) {
	me, err := signer.GetPublicKey(ctx)
	if err != nil {
		return 0, fmt.Errorf("contextvm: unannounce: %w", err)
	}
	found, err := pool.Query(ctx, nostr.Filter{Authors: []nostr.PubKey{me}, Kinds: unannouncedKinds})
	if err != nil && len(known) == 0 {
		return 0, fmt.Errorf("contextvm: unannounce: reading the current announcements: %w", err)
	}
	ids := slices.Clone(known)
	for _, e := range found {
		if !slices.Contains(ids, e.ID) {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	del := nostr.Event{Kind: nostr.KindDeletion, CreatedAt: nostr.Now(), Content: "no longer announced"}
	for _, id := range ids {
		del.Tags = append(del.Tags, nostr.Tag{"e", id.Hex()})
	}
	for _, k := range unannouncedKinds {
		del.Tags = append(del.Tags, nostr.Tag{"a", strconv.Itoa(int(k)) + ":" + me.Hex() + ":"})
	}
	for _, k := range unannouncedKinds {
		del.Tags = append(del.Tags, nostr.Tag{"k", strconv.Itoa(int(k))})
	}
	if err := signer.SignEvent(ctx, &del); err != nil {
		return 0, fmt.Errorf("contextvm: unannounce: %w", err)
	}
	if err := pool.Publish(ctx, del); err != nil {
		return 0, fmt.Errorf("contextvm: unannounce: %w", err)
	}
	return len(ids), nil
}
