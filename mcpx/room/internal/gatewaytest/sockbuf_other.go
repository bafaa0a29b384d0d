//go:build !unix

package gatewaytest

import "net"

// smallReceiveBuffer is a plain dialer where socket options are not set.
func smallReceiveBuffer() *net.Dialer { return &net.Dialer{} }
