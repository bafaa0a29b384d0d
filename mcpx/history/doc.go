// Package history is the durable, per-topic envelope log of an MCPx
// gateway, in a bbolt file.
//
// Each topic has a monotonic sequence number. NextSeq hands them out in
// memory; Append queues a record for the single writer goroutine, which
// commits whatever has queued up in one transaction (group commit: one
// fsync per batch, however many records and topics), so storing history
// never limits how fast a gateway fans envelopes out. Append never waits
// and reports each record's commit to a callback: a gateway acknowledges
// an envelope only from there. The queue is bounded: Reserve takes a place
// in it before the record exists, waiting while it is full, so that a slow
// disk pushes back the publisher that reserves, outside any lock shared
// with others. Sync waits for everything appended so far to be committed;
// queries call it, so a reader always sees its own writes.
//
// Sequence numbers never repeat, even after a crash that loses the records
// still queued: the store marks itself dirty while open, with its queue
// bound, and after an unclean shutdown each topic resumes past the largest
// number of records that could have been in flight.
//
// Retention is by count per topic and by age; both are applied as batches
// are written and by a periodic sweep, and queries never return a record
// past its age. Topics and their history outlive their participants.
//
// Files: store.go (the Store: its buckets, the writer goroutine and its
// queue, sequence numbers and retention), record.go (a record's bytes on
// disk), query.go (Cursor, Query and Page: reading a topic back).
package history
