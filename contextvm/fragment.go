package contextvm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"unicode/utf8"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// frameSlack is kept free in every frame for what the size estimate cannot
// know exactly: escaping choices of the event encoder, a longer timestamp.
const frameSlack = 96

// fragmentPlan is a message cut into CEP-22 chunks that each fit in one
// event of at most threshold bytes.
type fragmentPlan struct {
	digest     string
	totalBytes int
	chunks     []string
}

// planFragments cuts serialized so that every chunk frame, sent with token
// under tags (gift-wrapped when wrapped), stays within threshold bytes.
func planFragments(serialized string, token mcpmsg.Token, tags nostr.Tags, wrapKind nostr.Kind, threshold int) (fragmentPlan, error) {
	// The largest frame without data: the progress number is bounded by the
	// chunk count, which cannot exceed the message length.
	empty := &jsonrpc.Request{Method: mcpmsg.MethodProgress,
		Params: frameParams(token, len(serialized)+3, "", &transferFrame{Type: oversizedType, FrameType: "chunk", Data: strPtr("")})}
	content, err := EncodeContent(empty)
	if err != nil {
		return fragmentPlan{}, err
	}
	base := messageSize(tags, content)
	maxInner := threshold
	if wrapKind != 0 {
		maxInner = maxWrappedPlaintext(threshold)
	}
	budget := maxInner - base - frameSlack
	chunks, err := splitTwiceEscaped(serialized, budget)
	if err != nil {
		return fragmentPlan{}, err
	}
	return fragmentPlan{digest: digestOf(serialized), totalBytes: len(serialized), chunks: chunks}, nil
}

// eventSize is the length of the JSON of a signed event with these fields.
func eventSize(kind nostr.Kind, tags nostr.Tags, content string) int {
	// Non-zero id, key and signature: the encoder leaves zero ones out.
	evt := nostr.Event{ID: nostr.ID{1}, PubKey: nostr.PubKey{1}, Sig: [64]byte{1}, Kind: kind, CreatedAt: 1 << 32, Tags: tags, Content: content}
	return len(evt.String())
}

// messageSize is the length of the JSON of the message event
// newMessageEvent makes of tags and content, its nonce included.
func messageSize(tags nostr.Tags, content string) int {
	return eventSize(KindMessage, withNonce(tags), content)
}

// maxWrappedPlaintext is the largest inner event a gift wrap of at most
// threshold bytes can carry.
func maxWrappedPlaintext(threshold int) int {
	outerBase := eventSize(KindEphemeralGiftWrap, nostr.Tags{{"p", nostr.PubKey{}.Hex()}}, "")
	size := func(n int) int { return outerBase + nip44Base64Len(n) }
	lo, hi := 0, min(threshold, MaxPlaintext)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if size(mid) <= threshold {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// nip44Base64Len is the length of a NIP-44 v2 payload for n plaintext bytes:
// version, nonce, length prefix, padded plaintext and MAC, in base64.
func nip44Base64Len(n int) int {
	raw := 1 + 32 + 2 + nip44PaddedLen(n) + 32
	return (raw + 2) / 3 * 4
}

// nip44PaddedLen is NIP-44 v2's calc_padded_len.
func nip44PaddedLen(n int) int {
	if n <= 32 {
		return 32
	}
	next := 1
	for next < n {
		next <<= 1
	}
	chunk := 32
	if next > 256 {
		chunk = next / 8
	}
	return chunk * ((n-1)/chunk + 1)
}

// splitTwiceEscaped cuts s on code points so that each chunk, escaped as a
// JSON string inside content that is itself escaped as a JSON string in the
// event, takes at most budget bytes.
func splitTwiceEscaped(s string, budget int) ([]string, error) {
	if budget < 16 {
		return nil, fmt.Errorf("%w: the event limit leaves no room for chunk data", ErrTooLarge)
	}
	var chunks []string
	start, size := 0, 0
	for i, r := range s {
		n := twiceEscapedLen(r)
		if size+n > budget && i > start {
			chunks = append(chunks, s[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(s) {
		chunks = append(chunks, s[start:])
	}
	return chunks, nil
}

// twiceEscapedLen bounds the bytes a rune takes once escaped into the frame's
// JSON and again into the event's content string.
func twiceEscapedLen(r rune) int {
	switch {
	case r == '"' || r == '\\':
		return 4
	case r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 3
	case r < 0x20, r == 0x2028, r == 0x2029, r == utf8.RuneError,
		r == '<' || r == '>' || r == '&': // encoding/json escapes these as \u00XX
		return 7
	default:
		return utf8.RuneLen(r)
	}
}

// fragmentFrames turns a plan into the frames a sender publishes in order.
// With accept, progress 2 is left for the receiver's accept frame.
func fragmentFrames(plan fragmentPlan, token mcpmsg.Token, accept bool) (start *jsonrpc.Request, chunks []*jsonrpc.Request, end *jsonrpc.Request) {
	frame := func(progress int, message string, f *transferFrame) *jsonrpc.Request {
		return &jsonrpc.Request{Method: mcpmsg.MethodProgress, Params: frameParams(token, progress, message, f)}
	}
	start = frame(1, "starting oversized transfer", &transferFrame{Type: oversizedType, FrameType: "start",
		CompletionMode: "render", Digest: plan.digest, TotalBytes: intPtr(plan.totalBytes), TotalChunks: intPtr(len(plan.chunks))})
	first := 2
	if accept {
		first = 3
	}
	for i, data := range plan.chunks {
		chunks = append(chunks, frame(first+i, "", &transferFrame{Type: oversizedType, FrameType: "chunk", Data: strPtr(data)}))
	}
	end = frame(first+len(plan.chunks), "oversized transfer complete", &transferFrame{Type: oversizedType, FrameType: "end"})
	return start, chunks, end
}

func acceptFrame(token mcpmsg.Token) *jsonrpc.Request {
	return &jsonrpc.Request{Method: mcpmsg.MethodProgress,
		Params: frameParams(token, 2, "oversized request accepted", &transferFrame{Type: oversizedType, FrameType: "accept"})}
}

func abortFrame(token mcpmsg.Token, reason string) *jsonrpc.Request {
	return &jsonrpc.Request{Method: mcpmsg.MethodProgress,
		Params: frameParams(token, 1, "", &transferFrame{Type: oversizedType, FrameType: "abort", Reason: reason})}
}

// newProgressToken makes a token for a large request that asked for none:
// CEP-22 frames travel on a progress token.
func newProgressToken() mcpmsg.Token {
	var b [8]byte
	rand.Read(b[:])
	return mcpmsg.StringToken("cvm-transfer-" + hex.EncodeToString(b[:]))
}

// finalSize is the size of the event a message would be published as.
func finalSize(content string, tags nostr.Tags, wrapKind nostr.Kind) int {
	inner := messageSize(tags, content)
	if wrapKind == 0 {
		return inner
	}
	return eventSize(wrapKind, nostr.Tags{{"p", nostr.PubKey{}.Hex()}}, "") + nip44Base64Len(inner)
}

// singleEventFits reports whether a message of this final size can go in
// one event at all: under NIP-44's limit when wrapped, under the publishing
// limit always.
func singleEventFits(content string, tags nostr.Tags, wrapKind nostr.Kind, maxEvent int) bool {
	if wrapKind != 0 && messageSize(tags, content) > MaxPlaintext {
		return false
	}
	return finalSize(content, tags, wrapKind) <= maxEvent
}

// sendFragmented publishes content as CEP-22 frames to recipient: the start
// frame with startTags, the others with tags, each wrapped in wrapKind (0 for
// plaintext). waitAccept, when not nil, runs after the start frame and must
// return once the receiver accepted. onEnd sees the end frame's message event
// before it is published: the answer to a fragmented request references it.
func (e *endpoint) sendFragmented(ctx context.Context, recipient nostr.PubKey, content string, token mcpmsg.Token,
	startTags, tags func() nostr.Tags, wrapKind nostr.Kind, threshold int,
	waitAccept func(context.Context) error, onEnd func(nostr.Event)) error {
	plan, err := planFragments(content, token, tags(), wrapKind, threshold)
	if err != nil {
		return err
	}
	start, chunks, end := fragmentFrames(plan, token, waitAccept != nil)
	publish := func(frame *jsonrpc.Request, tags nostr.Tags, before func(nostr.Event)) error {
		body, err := EncodeContent(frame)
		if err != nil {
			return err
		}
		msg, out, err := e.seal(ctx, recipient, body, tags, wrapKind)
		if err != nil {
			return err
		}
		if before != nil {
			before(msg)
		}
		if err := e.pool.Publish(ctx, out); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		return nil
	}
	if err := publish(start, startTags(), nil); err != nil {
		return err
	}
	if waitAccept != nil {
		if err := waitAccept(ctx); err != nil {
			return err
		}
	}
	for _, c := range chunks {
		if err := publish(c, tags(), nil); err != nil {
			return err
		}
	}
	return publish(end, tags(), onEnd)
}
