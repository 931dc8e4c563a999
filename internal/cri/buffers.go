package cri

import (
	"fmt"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// bufferTiers are the capacities, as powers of two, of the buffers gRPC
// takes from its pool to read a message into: from 256 bytes to 1 MiB,
// every power of two. A larger message gets a buffer of its own size.
//
// gRPC's default pool has tiers of 256 B, 4, 16 and 32 KiB and 1 MiB, so a
// message of 33 KiB to 1 MiB is read into a 1 MiB buffer, which is zeroed
// in full each time it is reused. The runtime's lists of a node with a
// hundred pods are 40–100 KiB: every relist, log sweep and metrics scrape
// held and cleared a MiB per list, and the pool kept them.
var bufferTiers = []uint8{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}

// init makes the tiered pool gRPC's default, for every client in the
// process (the runtime's, the CSI drivers' and the device plugins'). gRPC
// takes it only at init.
func init() {
	pool, err := mem.NewBinaryTieredBufferPool(bufferTiers...)
	if err != nil {
		panic(fmt.Sprintf("cri: gRPC buffer pool: %v", err))
	}
	experimental.SetDefaultBufferPool(pool)
}
