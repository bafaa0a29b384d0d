// Package admission decides who gets a session when sessions are scarce.
//
// A table of sessions bounded in size (contextvm.Server's client sessions,
// the gateway's upstream sessions) admits a newcomer by Admit (policy.go):
// with an allow-list, unknown keys (those not on it) hold at most the
// table's size less a reserve, and a known key is never refused for room
// unknown keys hold, since in a full table one of theirs gives way to it.
// Otherwise a session gives way only when that costs its client nothing it
// would notice: Victim (victim.go) never picks a session with requests in
// flight, nor one that has been active within the grace period, and
// prefers the sessions of unknown keys; a known key is never displaced by
// an unknown one. When nobody may give way, the newcomer is refused and
// told when to try again. Limiter (limiter.go) bounds how fast new
// sessions start, per key and overall, so that a flood of throwaway keys
// costs the server a bounded amount of work whatever the table's size.
package admission
