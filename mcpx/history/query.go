package history

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Cursor is an exclusive bound of a Query: a seq, or, when Time is set, the
// time the gateway received a record.
type Cursor struct {
	Seq  uint64
	Time time.Time
}

// AtSeq is a cursor at seq n.
func AtSeq(n uint64) *Cursor { return &Cursor{Seq: n} }

// AtTime is a cursor at receive time t. The zero time is the cursor at seq
// 0: every record is after both.
func AtTime(t time.Time) *Cursor { return &Cursor{Time: t} }

// Query selects a page of a topic's history.
type Query struct {
	Limit int // at most this many records (must be > 0)
	// After and Before are exclusive bounds; nil is no bound. With After
	// (even at seq 0) the page is the Limit records right after it, so that
	// a reader walks forward from a cursor without gaps; without, the
	// newest Limit records below Before.
	After, Before *Cursor
	// Visible, when set, hides records the reader may not see. Hidden
	// records do not count against Limit.
	Visible func(from string, to []string) bool
}

// Page is the answer to a Query: records newest first, and whether more
// matching records lie beyond the page.
type Page struct {
	Records []Record
	More    bool
}

// Query returns a page of topic's history, newest first (see Query). It
// first waits for pending writes (Sync), so it sees every record appended
// before it.
func (s *Store) Query(ctx context.Context, topic string, q Query) (Page, error) {
	if err := s.Sync(ctx); err != nil {
		return Page{}, err
	}
	if q.Limit <= 0 {
		return Page{}, nil
	}
	forward := q.After != nil
	after, before := bound(q.After), bound(q.Before)
	cutoff := s.cutoff()
	var page Page
	err := s.db.View(func(tx *bolt.Tx) error {
		tb := tx.Bucket(topicsBucket).Bucket([]byte(topic))
		if tb == nil {
			return nil
		}
		c := tb.Bucket(seqBucket).Cursor()
		var k, v []byte
		step := c.Prev
		switch {
		case forward && after.seq == math.MaxUint64:
			return nil // nothing comes after the last possible seq
		case forward:
			step = c.Next
			k, v = c.Seek(encodeUint(after.seq + 1))
		case before.isSeq:
			if k, _ = c.Seek(encodeUint(before.seq)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		default:
			k, v = c.Last()
		}
		for ; k != nil; k, v = step() {
			r, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			if before.isSeq && r.Seq >= before.seq {
				if forward {
					break
				}
				continue
			}
			if !cutoff.IsZero() && r.Received.Before(cutoff) {
				if forward {
					continue
				}
				break // older ones are expired too
			}
			if !after.time.IsZero() && !r.Received.After(after.time) {
				continue
			}
			if !before.time.IsZero() && !r.Received.Before(before.time) {
				continue
			}
			if q.Visible != nil && !q.Visible(r.From, r.To) {
				continue
			}
			if len(page.Records) == q.Limit {
				page.More = true
				break
			}
			r.Data = bytes.Clone(r.Data)
			page.Records = append(page.Records, r)
		}
		return nil
	})
	if forward {
		for i, j := 0, len(page.Records)-1; i < j; i, j = i+1, j-1 {
			page.Records[i], page.Records[j] = page.Records[j], page.Records[i]
		}
	}
	return page, err
}

// cursorBound is a Cursor resolved: a seq bound (isSeq) or a time bound.
type cursorBound struct {
	isSeq bool
	seq   uint64
	time  time.Time
}

func bound(c *Cursor) cursorBound {
	switch {
	case c == nil:
		return cursorBound{}
	case c.Time.IsZero():
		return cursorBound{isSeq: true, seq: c.Seq}
	default:
		return cursorBound{time: c.Time}
	}
}

// Lookup returns the seq of the newest record of topic with envelope id
// that the reader may see (visible, as in Query; nil: any) and that has not
// expired. A record the reader may not read is not a cursor for it either:
// otherwise its answer would tell the reader that the record exists.
func (s *Store) Lookup(ctx context.Context, topic, id string, visible func(from string, to []string) bool) (seq uint64, ok bool, err error) {
	if err := s.Sync(ctx); err != nil {
		return 0, false, err
	}
	cutoff := s.cutoff()
	err = s.db.View(func(tx *bolt.Tx) error {
		tb := tx.Bucket(topicsBucket).Bucket([]byte(topic))
		if tb == nil {
			return nil
		}
		ids, seqs := tb.Bucket(idsBucket), tb.Bucket(seqBucket)
		prefix := idPrefix(id)
		var found []uint64 // oldest first; an id is normally used once
		c := ids.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(k) == len(prefix)+8 {
				found = append(found, binary.BigEndian.Uint64(k[len(prefix):]))
			}
		}
		for i := len(found) - 1; i >= 0; i-- {
			key := encodeUint(found[i])
			v := seqs.Get(key)
			if v == nil {
				continue // the index outlived its record: nothing to find
			}
			r, err := decodeRecord(key, v)
			if err != nil {
				return err
			}
			if !cutoff.IsZero() && r.Received.Before(cutoff) {
				return nil // older ones are expired too
			}
			if visible == nil || visible(r.From, r.To) {
				seq, ok = r.Seq, true
				return nil
			}
		}
		return nil
	})
	return seq, ok, err
}

// Topics lists the topics that have ever stored a record.
func (s *Store) Topics() ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(topicsBucket).ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}
