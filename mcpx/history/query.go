package history

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Query selects a page of a topic's history. Bounds are exclusive; zero
// values mean unbounded.
type Query struct {
	Limit      int       // at most this many records (must be > 0)
	AfterSeq   uint64    // only records with a larger seq
	BeforeSeq  uint64    // only records with a smaller seq
	AfterTime  time.Time // only records received later
	BeforeTime time.Time // only records received earlier
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

// Query returns a page of topic's history, newest first. Without a lower
// bound it is the newest Limit records (below BeforeSeq/BeforeTime); with
// AfterSeq or AfterTime it is the Limit records right after that bound, so
// a reader can walk forward from a cursor without gaps. It first waits for
// pending writes (Sync), so it sees every record appended before it.
func (s *Store) Query(ctx context.Context, topic string, q Query) (Page, error) {
	if err := s.Sync(ctx); err != nil {
		return Page{}, err
	}
	if q.Limit <= 0 {
		return Page{}, nil
	}
	forward := q.AfterSeq > 0 || !q.AfterTime.IsZero()
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
		if forward {
			step = c.Next
			k, v = c.Seek(encodeUint(q.AfterSeq + 1))
		} else if q.BeforeSeq > 0 {
			k, _ = c.Seek(encodeUint(q.BeforeSeq))
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Last()
		}
		for ; k != nil; k, v = step() {
			r, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			if forward && q.BeforeSeq > 0 && r.Seq >= q.BeforeSeq {
				break
			}
			if !forward && r.Seq <= q.AfterSeq {
				break
			}
			if !cutoff.IsZero() && r.Received.Before(cutoff) {
				if forward {
					continue
				}
				break // older ones are expired too
			}
			if !q.AfterTime.IsZero() && !r.Received.After(q.AfterTime) {
				continue
			}
			if !q.BeforeTime.IsZero() && !r.Received.Before(q.BeforeTime) {
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

// Lookup returns the seq of the newest stored record with envelope id in
// topic.
func (s *Store) Lookup(ctx context.Context, topic, id string) (seq uint64, ok bool, err error) {
	if err := s.Sync(ctx); err != nil {
		return 0, false, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		tb := tx.Bucket(topicsBucket).Bucket([]byte(topic))
		if tb == nil {
			return nil
		}
		if v := tb.Bucket(idBucket).Get([]byte(id)); v != nil {
			seq, ok = decodeUint(v), true
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
