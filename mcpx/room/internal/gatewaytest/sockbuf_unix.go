//go:build unix

package gatewaytest

import (
	"net"
	"syscall"
)

// smallReceiveBuffer makes a test client's socket buffer only a few KiB.
// Linux otherwise grows a loopback receive buffer to megabytes, and a
// client that stops reading would take that long to show as a slow
// consumer: the gateway's send queue, not the kernel, should hold the
// backlog the test is about.
func smallReceiveBuffer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<10)
		})
		if err != nil {
			return err
		}
		return serr
	}}
}
