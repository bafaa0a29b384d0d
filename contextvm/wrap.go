package contextvm

import (
	"context"
	"errors"
	"fmt"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip44"

	"github.com/cvmgo/cvm/internal/secp"
)

// Reasons a gift wrap is refused. Unwrap wraps one of them.
var (
	ErrNotGiftWrap    = errors.New("not a gift wrap")
	ErrNotAddressed   = errors.New("not addressed to us")
	ErrUndecryptable  = errors.New("gift wrap does not decrypt")
	ErrInvalidInner   = errors.New("wrapped event is invalid")
	ErrWrongInnerKind = errors.New("wrapped event is not a ContextVM message")
)

// MaxPlaintext is the largest plaintext NIP-44 v2 encrypts: a signed message
// event larger than this cannot be wrapped without CEP-22 fragmentation.
const MaxPlaintext = 65535

// ErrTooLarge is returned for a message that does not fit in one event.
var ErrTooLarge = errors.New("message too large for one event")

// Wrap encrypts the signed event inner for recipient in a gift wrap of kind
// KindGiftWrap or KindEphemeralGiftWrap (CEP-4, CEP-19): NIP-44 v2 from a
// fresh random key, one ["p", recipient] tag, created_at now. There is no
// NIP-59 seal and no backdating: peers subscribe with since = their start
// time, and a backdated wrap would never reach them.
func Wrap(inner nostr.Event, recipient nostr.PubKey, kind nostr.Kind) (nostr.Event, error) {
	if kind != KindGiftWrap && kind != KindEphemeralGiftWrap {
		return nostr.Event{}, fmt.Errorf("%w: kind %d", ErrNotGiftWrap, kind)
	}
	plaintext := inner.String()
	if len(plaintext) > MaxPlaintext {
		return nostr.Event{}, fmt.Errorf("%w: signed event is %d bytes, NIP-44 allows %d", ErrTooLarge, len(plaintext), MaxPlaintext)
	}
	ephemeral := nostr.Generate()
	ck, err := secp.ConversationKey(recipient, ephemeral)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("gift wrap: %w", err)
	}
	ciphertext, err := nip44.Encrypt(plaintext, ck)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("gift wrap: %w", err)
	}
	wrap := nostr.Event{
		Kind:      kind,
		CreatedAt: nostr.Now(),
		Tags:      nostr.Tags{{"p", recipient.Hex()}},
		Content:   ciphertext,
	}
	if err := wrap.Sign(ephemeral); err != nil {
		return nostr.Event{}, fmt.Errorf("gift wrap: %w", err)
	}
	return wrap, nil
}

// Decrypter opens NIP-44 v2 payloads addressed to its key. A Signer is one.
type Decrypter interface {
	Decrypt(ctx context.Context, ciphertext string, sender nostr.PubKey) (string, error)
}

// Unwrap opens a gift wrap addressed to me and returns the message event
// inside, after checking that the wrap is addressed to me, that the inner
// event's id and signature are valid, that it is a KindMessage event and
// that it is addressed to me too. The wrap's own signature is the caller's
// to check (the relay pool does).
func Unwrap(ctx context.Context, d Decrypter, me nostr.PubKey, wrap nostr.Event) (nostr.Event, error) {
	if wrap.Kind != KindGiftWrap && wrap.Kind != KindEphemeralGiftWrap {
		return nostr.Event{}, fmt.Errorf("%w: kind %d", ErrNotGiftWrap, wrap.Kind)
	}
	if !hasPTag(wrap.Tags, me) {
		return nostr.Event{}, ErrNotAddressed
	}
	plaintext, err := d.Decrypt(ctx, wrap.Content, wrap.PubKey)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("%w: %v", ErrUndecryptable, err)
	}
	var inner nostr.Event
	if err := inner.UnmarshalJSON([]byte(plaintext)); err != nil {
		return nostr.Event{}, fmt.Errorf("%w: %v", ErrInvalidInner, err)
	}
	if !inner.CheckID() || !inner.VerifySignature() {
		return nostr.Event{}, fmt.Errorf("%w: bad id or signature", ErrInvalidInner)
	}
	if inner.Kind != KindMessage {
		return nostr.Event{}, fmt.Errorf("%w: kind %d", ErrWrongInnerKind, inner.Kind)
	}
	if !hasPTag(inner.Tags, me) {
		return nostr.Event{}, fmt.Errorf("%w: the wrapped event names another recipient", ErrNotAddressed)
	}
	return inner, nil
}
