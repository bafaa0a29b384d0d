package outbound

import "net/netip"

// notPublic4 are the IPv4 ranges of the IANA special-purpose address
// registry (RFC 6890 and successors) that are not reachable on the public
// Internet, plus multicast and the reserved 240/4. A stranger's URL naming
// one is a request into the operator's own network (or a cloud metadata
// service at 169.254.169.254), never a picture or document on the web.
var notPublic4 = prefixes(
	"0.0.0.0/8",       // "this network", 0.0.0.0 among it (reaches loopback on Linux)
	"10.0.0.0/8",      // private (RFC 1918)
	"100.64.0.0/10",   // shared address space, carrier-grade NAT (RFC 6598)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local, cloud metadata services
	"172.16.0.0/12",   // private (RFC 1918)
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // documentation (TEST-NET-1)
	"192.88.99.0/24",  // deprecated 6to4 relay anycast
	"192.168.0.0/16",  // private (RFC 1918)
	"198.18.0.0/15",   // benchmarking (RFC 2544)
	"198.51.100.0/24", // documentation (TEST-NET-2)
	"203.0.113.0/24",  // documentation (TEST-NET-3)
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, and the limited broadcast 255.255.255.255
)

// notPublic6 are the IPv6 ranges inside global unicast (2000::/3; nothing
// outside it is public: loopback, unique-local fc00::/7, link-local,
// multicast, ...) that are not public either.
var notPublic6 = prefixes(
	"2001::/23",     // IETF protocol assignments: Teredo, benchmarking 2001:2::/48, ORCHID
	"2001:db8::/32", // documentation
	"3fff::/20",     // documentation (RFC 9637)
)

// Addresses that carry an IPv4 address inside an IPv6 one: they are as
// public as the IPv4 address they carry.
var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64 prefix (RFC 6052): low 32 bits
	sixTo4  = netip.MustParsePrefix("2002::/16")    // 6to4 (RFC 3056): bits 16–48
	global6 = netip.MustParsePrefix("2000::/3")
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// IsPublic reports whether ip is an address on the public Internet: a
// global unicast address outside every special-purpose range that is not
// globally reachable. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d), NAT64
// and 6to4 addresses are judged by the IPv4 address they carry. An
// address with a zone is never public.
func IsPublic(ip netip.Addr) bool {
	if !ip.IsValid() || ip.Zone() != "" {
		return false
	}
	ip = ip.Unmap()
	if ip.Is4() {
		for _, p := range notPublic4 {
			if p.Contains(ip) {
				return false
			}
		}
		return true
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return IsPublic(netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(ip):
		return IsPublic(netip.AddrFrom4([4]byte(b[2:6])))
	case !global6.Contains(ip):
		return false
	}
	for _, p := range notPublic6 {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}
