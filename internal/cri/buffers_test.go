package cri

import (
	"testing"

	"google.golang.org/grpc/mem"
)

// TestAMessageBufferFitsTheMessage checks that a message is read into a
// buffer at most twice its size, not into gRPC's default 1 MiB one.
func TestAMessageBufferFitsTheMessage(t *testing.T) {
	pool := mem.DefaultBufferPool()
	for _, size := range []int{100, 3 << 10, 33 << 10, 60 << 10, 200 << 10, 600 << 10, 1 << 20, 3 << 20} {
		buf := pool.Get(size)
		if len(*buf) != size {
			t.Errorf("Get(%d) gave %d bytes", size, len(*buf))
		}
		if c := cap(*buf); c > 2*size && c > 256 {
			t.Errorf("Get(%d) gave a buffer of capacity %d, want at most %d", size, c, 2*size)
		}
		pool.Put(buf)
	}
}
