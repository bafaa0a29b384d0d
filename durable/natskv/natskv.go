// Package natskv is a durable.Store on a NATS JetStream key-value bucket:
// the store several processes share when they serve one identity together
// (cvm gateway --nats). A Claim is the bucket's Create (a write that
// succeeds only when the key is absent), so of any number of processes
// claiming one key exactly one wins; every record carries a per-key TTL
// (Nats-TTL), so the bucket forgets it when it expires, as the durable
// stores do. A Swap writes only over the revision it read, so that
// processes changing one record (a payment channel's) never overwrite each
// other's change.
//
// Durability is the NATS server's: with R1 file storage an acknowledged
// write survives a kill -9 of the NATS server, and an OS crash only with
// sync_interval: always; a bucket of 3 replicas survives the loss of one
// NATS node. See docs/replicas.md.
package natskv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure Open.
type Options struct {
	// Replicas of the bucket (default 1; 3 on a 3-server NATS cluster).
	Replicas int
	// Now is the clock for expiries (default time.Now).
	Now func() time.Time
}

// Store is a durable.Store on one JetStream key-value bucket. Safe for
// concurrent use.
type Store struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	bucket string
	now    func() time.Time
	closed atomic.Bool
}

var _ durable.Swapper = (*Store)(nil)

// markerTTL is how long the bucket keeps the marker of an expired key: it
// must be set for per-key TTLs to be accepted at all (the stream's
// AllowMsgTTL), and a second is the least NATS takes.
const markerTTL = time.Second

// Open creates the bucket if it does not exist, or opens it. bucket must be
// a valid bucket name ([-_a-zA-Z0-9]+).
func Open(ctx context.Context, js jetstream.JetStream, bucket string, opts Options) (*Store, error) {
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         bucket,
		Description:    "cvm durable store",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       opts.Replicas,
		LimitMarkerTTL: markerTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("natskv: bucket %s: %w", bucket, err)
	}
	return &Store{js: js, kv: kv, bucket: bucket, now: opts.Now}, nil
}

// key names a record in the bucket: the space (dots allowed, as in
// "contextvm.executed") and the key in hex, so that any bytes make a valid
// key.
func key(space string, k []byte) string { return space + "." + hex.EncodeToString(k) }

// A value is the record's expiry (Unix nanoseconds, 8 bytes big-endian)
// and then its bytes. NATS expires a key in whole seconds, rounded up, so
// reads check the exact expiry themselves.
func encode(expires time.Time, v []byte) []byte {
	b := make([]byte, 8, 8+len(v))
	binary.BigEndian.PutUint64(b, uint64(expires.UnixNano()))
	return append(b, v...)
}

func decode(b []byte) (time.Time, []byte, bool) {
	if len(b) < 8 {
		return time.Time{}, nil, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))), b[8:], true
}

// ttl is what NATS is told: whole seconds, at least one, never sooner than
// expires.
func (s *Store) ttl(expires time.Time) time.Duration {
	d := expires.Sub(s.now())
	secs := (d + time.Second - 1) / time.Second
	return max(secs, 1) * time.Second
}

// Claim implements durable.Store with the bucket's Create. A claim whose
// acknowledgement was lost is recognised by the nonce in its value, so a
// lost ack never turns into "someone else has it".
func (s *Store) Claim(ctx context.Context, space string, k []byte, expires time.Time) (bool, error) {
	if s.closed.Load() {
		return false, durable.ErrClosed
	}
	if !expires.After(s.now()) {
		return false, nil
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	name := key(space, k)
	val := encode(expires, nonce[:])
	_, err := s.kv.Create(ctx, name, val, jetstream.KeyTTL(s.ttl(expires)))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		// The write may have landed with its ack lost: the key then
		// holds our nonce.
		if e, gerr := s.kv.Get(ctx, name); gerr == nil && string(e.Value()) == string(val) {
			return true, nil
		}
		return false, fmt.Errorf("natskv: claim: %w", err)
	}
	e, err := s.kv.Get(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false, nil // gone between the two calls: claimed by another, then expired
	case err != nil:
		return false, fmt.Errorf("natskv: claim: %w", err)
	}
	if old, _, ok := decode(e.Value()); ok && !old.After(s.now()) {
		// Expired by our clock, not yet by NATS's whole seconds: take it
		// over, guarded by its revision so that only one taker wins.
		if _, err := s.publish(ctx, name, val, expires, jetstream.WithExpectLastSequencePerSubject(e.Revision())); err != nil {
			return false, nil
		}
		return true, nil
	}
	return false, nil
}

// publish writes a record with its per-key TTL. The bucket's Put and Update
// would drop the TTL (nats.go#1994), so the record is published on the
// bucket's subject as Create does.
func (s *Store) publish(ctx context.Context, name string, val []byte, expires time.Time, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	opts = append(opts, jetstream.WithMsgTTL(s.ttl(expires)))
	return s.js.Publish(ctx, "$KV."+s.bucket+"."+name, val, opts...)
}

// Get implements durable.Store.
func (s *Store) Get(ctx context.Context, space string, k []byte) ([]byte, bool, error) {
	if s.closed.Load() {
		return nil, false, durable.ErrClosed
	}
	e, err := s.kv.Get(ctx, key(space, k))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("natskv: get: %w", err)
	}
	expires, v, ok := decode(e.Value())
	if !ok || !expires.After(s.now()) {
		return nil, false, nil
	}
	if len(v) == 0 {
		v = nil
	}
	return v, true, nil
}

// Put implements durable.Store.
func (s *Store) Put(ctx context.Context, space string, k, value []byte, expires time.Time) error {
	if s.closed.Load() {
		return durable.ErrClosed
	}
	if !expires.After(s.now()) {
		return nil
	}
	if _, err := s.publish(ctx, key(space, k), encode(expires, value), expires); err != nil {
		return fmt.Errorf("natskv: put: %w", err)
	}
	return nil
}

// Swap implements durable.Swapper with the bucket's revisions: the record
// is read, compared with old, and written back only if the key's revision
// is still the one read (or, where there was none, with Create), so that of
// any number of processes swapping from one old value at most one wins. A
// swap whose acknowledgement was lost is recognised by the key holding its
// value, expiry included, as a Claim is by its nonce.
func (s *Store) Swap(ctx context.Context, space string, k, old, value []byte, expires time.Time) (bool, error) {
	if s.closed.Load() {
		return false, durable.ErrClosed
	}
	name := key(space, k)
	val := encode(expires, value)
	e, err := s.kv.Get(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		if old != nil {
			return false, nil
		}
		_, err = s.kv.Create(ctx, name, val, jetstream.KeyTTL(s.ttl(expires)))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil
		}
	case err != nil:
		return false, fmt.Errorf("natskv: swap: %w", err)
	default:
		until, v, ok := decode(e.Value())
		live := ok && until.After(s.now())
		if old == nil && live || old != nil && (!live || !bytes.Equal(v, old)) {
			return false, nil
		}
		_, err = s.publish(ctx, name, val, expires, jetstream.WithExpectLastSequencePerSubject(e.Revision()))
		if wrongRevision(err) {
			return false, nil
		}
	}
	if err != nil {
		if e, gerr := s.kv.Get(ctx, name); gerr == nil && bytes.Equal(e.Value(), val) {
			return true, nil
		}
		return false, fmt.Errorf("natskv: swap: %w", err)
	}
	return true, nil
}

// wrongRevision reports whether err is JetStream's refusal of a write whose
// expected revision is not the key's: 10071, or 10164 on a replicated
// bucket.
func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Delete removes key from space; absent is no error. Not part of
// durable.Store: the replica group uses it for records that end before they
// expire.
func (s *Store) Delete(ctx context.Context, space string, k []byte) error {
	if s.closed.Load() {
		return durable.ErrClosed
	}
	if err := s.kv.Purge(ctx, key(space, k), jetstream.PurgeTTL(markerTTL)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("natskv: delete: %w", err)
	}
	return nil
}

// Keys lists the keys of space whose records have not been removed (bytes
// as given to Put or Claim). Not part of durable.Store.
func (s *Store) Keys(ctx context.Context, space string) ([][]byte, error) {
	if s.closed.Load() {
		return nil, durable.ErrClosed
	}
	l, err := s.kv.ListKeysFiltered(ctx, space+".*")
	if err != nil {
		return nil, fmt.Errorf("natskv: keys: %w", err)
	}
	defer l.Stop()
	var out [][]byte
	for name := range l.Keys() {
		b, err := hex.DecodeString(name[len(space)+1:])
		if err == nil {
			out = append(out, b)
		}
	}
	return out, nil
}

// Lease holds key in space for holder until ttl from now: it takes the key
// when no one holds it (or the holding has expired), or renews it when
// holder holds it. held is false when another holder has it; any error
// means "not held" too. Two callers never both get held for the same
// instant by NATS's account (Create, or an update guarded by the key's
// revision); a holder that stops renewing loses it after ttl. Not part of
// durable.Store: the replica group elects its announcer with it.
func (s *Store) Lease(ctx context.Context, space string, k, holder []byte, ttl time.Duration) (held bool, err error) {
	if s.closed.Load() {
		return false, durable.ErrClosed
	}
	name := key(space, k)
	expires := s.now().Add(ttl)
	val := encode(expires, holder)
	e, err := s.kv.Get(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		_, err := s.kv.Create(ctx, name, val, jetstream.KeyTTL(s.ttl(expires)))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil
		}
		return err == nil, err
	case err != nil:
		return false, fmt.Errorf("natskv: lease: %w", err)
	}
	if until, h, ok := decode(e.Value()); ok && string(h) != string(holder) && until.After(s.now()) {
		return false, nil
	}
	if _, err := s.publish(ctx, name, val, expires, jetstream.WithExpectLastSequencePerSubject(e.Revision())); err != nil {
		return false, fmt.Errorf("natskv: lease: %w", err)
	}
	return true, nil
}

// Close implements durable.Store. It does not close the NATS connection,
// which the caller owns; records are as durable as NATS made them.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}
