package outbound

import (
	"errors"
	"net/netip"
	"testing"
)

func TestIsPublic(t *testing.T) {
	notPublic := []string{
		"127.0.0.1", "127.255.255.254", "::1", // loopback
		"10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", // RFC 1918
		"100.64.0.1", "100.127.255.255", // CGNAT
		"169.254.169.254", "169.254.0.1", "fe80::1", "fe80::1%eth0", // link-local, metadata
		"fc00::1", "fd12:3456::1", // unique-local
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", // IPv4-mapped
		"0.0.0.0", "0.1.2.3", "::", // unspecified, "this network"
		"224.0.0.1", "239.255.255.250", "ff02::1", "ff0e::1", // multicast
		"255.255.255.255", "240.0.0.1", // reserved, broadcast
		"192.0.2.1", "198.51.100.7", "203.0.113.9", "2001:db8::1", "3fff::1", // documentation
		"198.18.0.1", "198.19.255.255", "2001:2::1", // benchmarking
		"192.0.0.8", "192.88.99.1", "2001::1", // protocol assignments, 6to4 relay, Teredo
		"64:ff9b::7f00:1", "64:ff9b::a00:1", // NAT64 of loopback, of 10.0.0.1
		"2002:7f00:1::1", "2002:a9fe:a9fe::1", // 6to4 of loopback, of 169.254.169.254
		"::127.0.0.1", "100::1", // IPv4-compatible, discard-only: outside 2000::/3
	}
	public := []string{
		"8.8.8.8", "1.1.1.1", "93.184.215.14",
		"100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "192.0.3.1", "198.20.0.1", "223.255.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001::200e",
		"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
	}
	for _, s := range notPublic {
		if IsPublic(netip.MustParseAddr(s)) {
			t.Errorf("%s is public", s)
		}
	}
	for _, s := range public {
		if !IsPublic(netip.MustParseAddr(s)) {
			t.Errorf("%s is not public", s)
		}
	}
	if IsPublic(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
}

// TestControl_JudgesTheAddressDialled: the dialer's hook, which sees the
// address after DNS, refuses what is not public unless exactly allowed.
func TestControl_JudgesTheAddressDialled(t *testing.T) {
	f := New(Options{Allow: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("[::1]:9090")}})
	for addr, want := range map[string]error{
		"127.0.0.1:8080":          nil,
		"[::ffff:127.0.0.1]:8080": nil, // the same address, as IPv4-mapped
		"[::1]:9090":              nil,
		"127.0.0.1:8081":          ErrNotPublic, // another port of an allowed host
		"127.0.0.2:8080":          ErrNotPublic,
		"[::1]:8080":              ErrNotPublic,
		"[::ffff:10.0.0.1]:80":    ErrNotPublic,
		"[fe80::1%eth0]:80":       ErrNotPublic,
		"169.254.169.254:80":      ErrNotPublic,
		"0.0.0.0:8080":            ErrNotPublic,
		"8.8.8.8:443":             nil,
		"[2606:4700::1111]:443":   nil,
		"not an address":          ErrNotPublic,
	} {
		if err := f.control("tcp", addr, nil); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("dial %s: %v, want %v", addr, err, want)
		}
	}
}

func FuzzIsPublic(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "8.8.8.8", "2606:4700::1"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ip, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		if IsPublic(ip) && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
			ip.IsMulticast() || ip.IsUnspecified() || !ip.Unmap().IsGlobalUnicast()) {
			t.Fatalf("%s is public", ip)
		}
		if ip.Is4() && IsPublic(ip) != IsPublic(netip.AddrFrom16(ip.As16())) {
			t.Fatalf("%s and its IPv4-mapped form disagree", ip)
		}
	})
}
