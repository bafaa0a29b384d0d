// Command hello prints its crypto backend, for Build's test.
package main

import (
	"fmt"

	"github.com/cvmgo/cvm/internal/secp"
)

func main() { fmt.Println("hello", secp.Backend) }
