// Package admission decides who gets a session when sessions are scarce.
//
// A table of sessions bounded in size (contextvm.Server's client sessions,
// the gateway's upstream sessions) admits a newcomer by evicting a session
// only when that costs its client nothing it would notice: Victim never
// picks a session with requests in flight, nor one that has been active
// within the grace period, and prefers the sessions of unknown keys (those
// not on an allow-list); a known key is never displaced by an unknown one.
// When nobody may give way, the newcomer is refused and told when to try
// again. Limiter bounds how fast new sessions start, per key and overall,
// so that a flood of throwaway keys costs the server a bounded amount of
// work whatever the table's size.
package admission
