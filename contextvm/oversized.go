package contextvm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
)

// CEP-22 oversized transfer: a JSON-RPC message too large for one event
// travels as a sequence of notifications/progress frames on the request's
// progress token, each carrying a params.cvm object:
//
//	start  {completionMode:"render", digest:"sha256:<hex>", totalBytes, totalChunks}   progress 1
//	accept (receiver to sender, only when the sender had to ask)                         progress 2
//	chunk  {data: a slice of the serialized message, cut on a code point}               progress 2… (3… after accept)
//	end                                                                                  progress last+1
//	abort  {reason}                                                                      either way, any time
//
// The outer progress value orders the frames. The receiver checks the byte
// count and the SHA-256 digest before it hands the message on.

// oversizedType is params.cvm.type for CEP-22 frames.
const oversizedType = "oversized-transfer"

// DefaultOversizedThreshold is the size of the final published event (gift
// wrap included) above which a message is fragmented: the reference's value.
const DefaultOversizedThreshold = 48_000

// Errors of oversized transfers.
var (
	// ErrTransferAborted means the other side gave up the transfer.
	ErrTransferAborted = errors.New("oversized transfer aborted by the peer")
	// ErrTransferRefused means a transfer broke a receiver limit or the
	// protocol, and was aborted.
	ErrTransferRefused = errors.New("oversized transfer refused")
	// ErrNoOversizedSupport means the peer never accepted a fragmented message.
	ErrNoOversizedSupport = errors.New("peer does not accept oversized transfers (CEP-22)")
)

// TransferLimits bound what a receiver accepts. Zero fields take the
// defaults beside them: the reference's, plus byte budgets the reference
// lacks (64 transfers of 100 MiB would be 6.4 GB). Bytes are counted as they
// arrive, never reserved as declared: a start frame costs nothing but a
// slot, so that a few small frames cannot lock everyone out.
type TransferLimits struct {
	MaxBytes         int           // one message (100 MiB, and at most MaxPeerBytes)
	MaxChunks        int           // chunks of one message (10,000)
	MaxConcurrent    int           // transfers in progress at once, all peers (64)
	MaxPerPeer       int           // transfers in progress at once from one peer (8)
	MaxBufferedBytes int           // bytes held by all transfers in progress (256 MiB)
	MaxPeerBytes     int           // bytes held by one peer's transfers (MaxBufferedBytes/8)
	Timeout          time.Duration // from start to end (5 min)
	StallTimeout     time.Duration // without a frame, a transfer is dropped after this long (30 s)
	OutOfOrderWindow int           // how far ahead of the next expected chunk a chunk may be (21)
	MaxOutOfOrder    int           // chunks buffered ahead of a gap (42)

	// Strangers are the peers a server does not serve except for its public
	// capabilities (outside AllowedClients while some capability is
	// public): all of them together may hold at most MaxStrangerBytes
	// (1 MiB) in at most MaxStrangerTransfers (8) transfers. Where no
	// capability is public, they may not start a transfer at all. The
	// reassembled message is authorized like any other.
	MaxStrangerBytes     int
	MaxStrangerTransfers int
}

func (l TransferLimits) withDefaults() TransferLimits {
	d := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	d(&l.MaxBytes, 100<<20)
	d(&l.MaxChunks, 10_000)
	d(&l.MaxConcurrent, 64)
	d(&l.MaxPerPeer, 8)
	d(&l.MaxBufferedBytes, 256<<20)
	d(&l.MaxPeerBytes, l.MaxBufferedBytes/8)
	d(&l.OutOfOrderWindow, 21)
	d(&l.MaxOutOfOrder, 42)
	d(&l.MaxStrangerBytes, 1<<20)
	d(&l.MaxStrangerTransfers, 8)
	if l.Timeout <= 0 {
		l.Timeout = 5 * time.Minute
	}
	if l.StallTimeout <= 0 {
		l.StallTimeout = 30 * time.Second
	}
	return l
}

// peerClass is what a receiver knows of a peer that sends it a transfer.
type peerClass int

const (
	peerTrusted  peerClass = iota // served: the peer budgets apply
	peerStranger                  // outside the allow-list, with something public: the strangers' budget applies
	peerRefused                   // outside the allow-list, nothing public: no transfer at all
)

// transferFrame is params.cvm of a CEP-22 frame.
type transferFrame struct {
	Type           string  `json:"type"`
	FrameType      string  `json:"frameType"`
	CompletionMode string  `json:"completionMode,omitempty"`
	Digest         string  `json:"digest,omitempty"`
	TotalBytes     *int    `json:"totalBytes,omitempty"`
	TotalChunks    *int    `json:"totalChunks,omitempty"`
	Data           *string `json:"data,omitempty"`
	Reason         string  `json:"reason,omitempty"`
}

// progressFrame is the params of a notifications/progress that carries a
// CEP-22 frame.
type progressFrame struct {
	ProgressToken mcpmsg.Token   `json:"progressToken"`
	Progress      float64        `json:"progress"`
	Message       string         `json:"message,omitempty"`
	CVM           *transferFrame `json:"cvm,omitempty"`
}

// parseTransferFrame recognizes a CEP-22 frame in the params of a
// notifications/progress. ok is false for ordinary progress.
func parseTransferFrame(params json.RawMessage) (p progressFrame, ok bool, err error) {
	if len(params) == 0 {
		return p, false, nil
	}
	var probe struct {
		CVM *struct {
			Type string `json:"type"`
		} `json:"cvm"`
	}
	if json.Unmarshal(params, &probe) != nil || probe.CVM == nil || probe.CVM.Type != oversizedType {
		return p, false, nil
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return p, true, fmt.Errorf("%w: malformed frame: %v", ErrTransferRefused, err)
	}
	if p.ProgressToken.IsZero() {
		return p, true, fmt.Errorf("%w: frame without a progress token", ErrTransferRefused)
	}
	return p, true, nil
}

func intPtr(n int) *int       { return &n }
func strPtr(s string) *string { return &s }
func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}
func frameParams(token mcpmsg.Token, progress int, message string, f *transferFrame) json.RawMessage {
	b, _ := json.Marshal(progressFrame{ProgressToken: token, Progress: float64(progress), Message: message, CVM: f})
	return b
}

// transferKey names an inbound transfer: progress tokens are chosen by each
// peer, so they are unique only per peer (the reference keys by token alone).
type transferKey struct {
	peer  nostr.PubKey
	token mcpmsg.Token
}

// reassembler collects inbound transfers within TransferLimits. It is safe
// for concurrent use. Each transfer has a timer (no frame for
// StallTimeout, or past its Timeout); close stops them all, and a timer
// that fires after close does nothing.
type reassembler struct {
	limits TransferLimits
	// onExpire is told of transfers that ran out of time, to abort them. It
	// is called without the reassembler's lock, never after close.
	onExpire func(transferKey)
	// classify says what a peer may send (nil: every peer is trusted).
	classify func(nostr.PubKey) peerClass

	mu        sync.Mutex
	closed    bool
	transfers map[transferKey]*transfer
	buffered  int                  // bytes held, all transfers
	byPeer    map[nostr.PubKey]int // bytes held, by peer
	strangers struct{ transfers, bytes int }
}

type transfer struct {
	startTags   nostr.Tags // the start frame's tags: discovery tags travel there
	digest      string
	totalBytes  int
	totalChunks int
	start       int // progress of the start frame
	chunks      map[int]string
	bytes       int
	highest     int
	stranger    bool
	deadline    time.Time // Timeout from the start
	timer       *time.Timer
}

func newReassembler(limits TransferLimits, onExpire func(transferKey)) *reassembler {
	return &reassembler{limits: limits.withDefaults(), onExpire: onExpire,
		transfers: make(map[transferKey]*transfer), byPeer: make(map[nostr.PubKey]int)}
}

// has reports whether a transfer from peer on token is being received.
func (r *reassembler) has(peer nostr.PubKey, token mcpmsg.Token) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.transfers[transferKey{peer, token}] != nil
}

// frame processes one inbound frame, which came in an event with tags. When
// a transfer completes it returns the reassembled message and the tags of
// its start frame. A non-nil error means the transfer is over and should be
// aborted towards the peer (except for an abort frame, which returns
// ErrTransferAborted).
func (r *reassembler) frame(peer nostr.PubKey, p progressFrame, tags nostr.Tags) (assembled string, startTags nostr.Tags, done bool, err error) {
	progress := int(p.Progress)
	if float64(progress) != p.Progress || progress <= 0 {
		return "", nil, false, fmt.Errorf("%w: progress %v is not a positive integer", ErrTransferRefused, p.Progress)
	}
	key := transferKey{peer, p.ProgressToken}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return "", nil, false, fmt.Errorf("%w: the receiver is closing", ErrTransferRefused)
	}
	t := r.transfers[key]
	switch p.CVM.FrameType {
	case "start":
		return "", nil, false, r.startLocked(key, p, progress, tags)
	case "accept":
		return "", nil, false, nil // handled by the sender side
	case "abort":
		r.dropLocked(key)
		reason := p.CVM.Reason
		if reason == "" {
			reason = "no reason given"
		}
		return "", nil, false, fmt.Errorf("%w: %s", ErrTransferAborted, reason)
	case "chunk":
		if t == nil {
			return "", nil, false, nil // late or duplicate after the transfer ended
		}
		return "", nil, false, r.chunkLocked(key, t, p, progress)
	case "end":
		if t == nil {
			return "", nil, false, nil
		}
		assembled, done, err := r.endLocked(key, t, progress)
		return assembled, t.startTags, done, err
	default:
		r.dropLocked(key)
		return "", nil, false, fmt.Errorf("%w: unknown frame type %q", ErrTransferRefused, p.CVM.FrameType)
	}
}

func (r *reassembler) startLocked(key transferKey, p progressFrame, progress int, tags nostr.Tags) error {
	f, lim := p.CVM, r.limits
	if _, dup := r.transfers[key]; dup {
		r.dropLocked(key)
		return fmt.Errorf("%w: a second start for a transfer in progress", ErrTransferRefused)
	}
	class := peerTrusted
	if r.classify != nil {
		class = r.classify(key.peer)
	}
	maxBytes := min(lim.MaxBytes, lim.MaxPeerBytes)
	if class == peerStranger {
		maxBytes = min(maxBytes, lim.MaxStrangerBytes)
	}
	switch {
	case class == peerRefused:
		return fmt.Errorf("%w: this server takes oversized transfers only from the clients it serves", ErrTransferRefused)
	case f.TotalBytes == nil || f.TotalChunks == nil || *f.TotalBytes < 0 || *f.TotalChunks < 0:
		return fmt.Errorf("%w: start frame without totalBytes and totalChunks", ErrTransferRefused)
	case len(f.Digest) != len("sha256:")+64 || f.Digest[:7] != "sha256:":
		return fmt.Errorf("%w: digest %q is not sha256:<64 hex digits>", ErrTransferRefused, f.Digest)
	case *f.TotalBytes > maxBytes:
		return fmt.Errorf("%w: %d bytes exceeds the limit of %d", ErrTransferRefused, *f.TotalBytes, maxBytes)
	case *f.TotalChunks > lim.MaxChunks:
		return fmt.Errorf("%w: %d chunks exceeds the limit of %d", ErrTransferRefused, *f.TotalChunks, lim.MaxChunks)
	case len(r.transfers) >= lim.MaxConcurrent:
		return fmt.Errorf("%w: %d transfers already in progress; retry later", ErrTransferRefused, len(r.transfers))
	case r.perPeerLocked(key.peer) >= lim.MaxPerPeer:
		return fmt.Errorf("%w: %d transfers from this peer already in progress", ErrTransferRefused, lim.MaxPerPeer)
	case class == peerStranger && r.strangers.transfers >= lim.MaxStrangerTransfers:
		return fmt.Errorf("%w: %d transfers from clients this server does not serve already in progress; retry later", ErrTransferRefused, r.strangers.transfers)
	}
	t := &transfer{startTags: tags, digest: f.Digest, totalBytes: *f.TotalBytes, totalChunks: *f.TotalChunks,
		start: progress, chunks: make(map[int]string), highest: progress, stranger: class == peerStranger,
		deadline: time.Now().Add(lim.Timeout)}
	if t.stranger {
		r.strangers.transfers++
	}
	t.timer = time.AfterFunc(min(lim.StallTimeout, lim.Timeout), func() {
		r.mu.Lock()
		live := r.transfers[key] == t && !r.closed
		if live {
			r.dropLocked(key)
		}
		r.mu.Unlock()
		if live && r.onExpire != nil {
			r.onExpire(key)
		}
	})
	r.transfers[key] = t
	return nil
}

// heard restarts t's timer: StallTimeout from now, but not past its
// deadline.
func (r *reassembler) heard(t *transfer) {
	t.timer.Reset(min(r.limits.StallTimeout, time.Until(t.deadline)))
}

func (r *reassembler) perPeerLocked(peer nostr.PubKey) int {
	n := 0
	for k := range r.transfers {
		if k.peer == peer {
			n++
		}
	}
	return n
}

func (r *reassembler) chunkLocked(key transferKey, t *transfer, p progressFrame, progress int) error {
	fail := func(format string, args ...any) error {
		r.dropLocked(key)
		return fmt.Errorf("%w: "+format, append([]any{ErrTransferRefused}, args...)...)
	}
	if p.CVM.Data == nil {
		return fail("chunk without data")
	}
	data := *p.CVM.Data
	// Chunks start right after start, or after the accept slot.
	if progress <= t.start || progress > t.start+t.totalChunks+1 {
		return fail("chunk progress %d outside the declared transfer", progress)
	}
	if old, dup := t.chunks[progress]; dup {
		if old != data {
			return fail("conflicting duplicate chunk at progress %d", progress)
		}
		return nil
	}
	if t.bytes+len(data) > t.totalBytes {
		return fail("more data than the %d bytes declared", t.totalBytes)
	}
	// Bytes count against the budgets as they arrive.
	lim := r.limits
	switch n := len(data); {
	case r.buffered+n > lim.MaxBufferedBytes:
		return fail("the receiver is holding %d bytes of transfers; retry later", r.buffered)
	case r.byPeer[key.peer]+n > lim.MaxPeerBytes:
		return fail("this peer's transfers hold %d bytes, the limit is %d", r.byPeer[key.peer], lim.MaxPeerBytes)
	case t.stranger && r.strangers.bytes+n > lim.MaxStrangerBytes:
		return fail("transfers from clients this server does not serve hold %d bytes, the limit is %d; retry later", r.strangers.bytes, lim.MaxStrangerBytes)
	}
	if gap := progress - t.nextExpected(); gap > r.limits.OutOfOrderWindow {
		return fail("chunk %d is %d ahead of the next expected one (window %d)", progress, gap, r.limits.OutOfOrderWindow)
	}
	t.chunks[progress] = data
	t.bytes += len(data)
	r.buffered += len(data)
	r.byPeer[key.peer] += len(data)
	if t.stranger {
		r.strangers.bytes += len(data)
	}
	t.highest = max(t.highest, progress)
	r.heard(t)
	if ahead := len(t.chunks) - (t.nextExpected() - t.firstChunk()); ahead > r.limits.MaxOutOfOrder {
		return fail("%d chunks buffered ahead of a gap (limit %d)", ahead, r.limits.MaxOutOfOrder)
	}
	return nil
}

// firstChunk is the progress of the first chunk: after the start, or after
// the accept slot when the sender's first chunk came there.
func (t *transfer) firstChunk() int {
	if _, ok := t.chunks[t.start+1]; ok || len(t.chunks) == 0 {
		return t.start + 1
	}
	return t.start + 2
}

func (t *transfer) nextExpected() int {
	n := t.firstChunk()
	for {
		if _, ok := t.chunks[n]; !ok {
			return n
		}
		n++
	}
}

func (r *reassembler) endLocked(key transferKey, t *transfer, progress int) (string, bool, error) {
	defer r.dropLocked(key)
	if progress <= t.highest {
		return "", false, fmt.Errorf("%w: end frame before its chunks", ErrTransferRefused)
	}
	if len(t.chunks) != t.totalChunks {
		return "", false, fmt.Errorf("%w: %d of %d chunks received", ErrTransferRefused, len(t.chunks), t.totalChunks)
	}
	first := t.firstChunk()
	buf := make([]byte, 0, t.totalBytes)
	for i := range t.totalChunks {
		data, ok := t.chunks[first+i]
		if !ok {
			return "", false, fmt.Errorf("%w: chunk at progress %d missing", ErrTransferRefused, first+i)
		}
		buf = append(buf, data...)
	}
	if len(buf) != t.totalBytes {
		return "", false, fmt.Errorf("%w: %d bytes received, %d declared", ErrTransferRefused, len(buf), t.totalBytes)
	}
	assembled := string(buf)
	if digestOf(assembled) != t.digest {
		return "", false, fmt.Errorf("%w: SHA-256 digest mismatch", ErrTransferRefused)
	}
	return assembled, true, nil
}

// dropLocked forgets a transfer and releases the bytes it held.
func (r *reassembler) dropLocked(key transferKey) {
	t, ok := r.transfers[key]
	if !ok {
		return
	}
	t.timer.Stop()
	r.buffered -= t.bytes
	if r.byPeer[key.peer] -= t.bytes; r.byPeer[key.peer] == 0 {
		delete(r.byPeer, key.peer)
	}
	if t.stranger {
		r.strangers.transfers--
		r.strangers.bytes -= t.bytes
	}
	delete(r.transfers, key)
}

// close forgets every transfer and stops its timer; frames that come after
// are refused.
func (r *reassembler) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for k := range r.transfers {
		r.dropLocked(k)
	}
}

// stats reports the transfers in progress and the bytes they hold.
func (r *reassembler) stats() (transfers, buffered int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.transfers), r.buffered
}
