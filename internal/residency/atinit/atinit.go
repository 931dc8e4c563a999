package atinit

import "github.com/nodelet/nodelet/internal/residency"

// Released is how many bytes of the binary's mappings the release at
// initialization advised, and Err why it failed (it costs memory, not
// correctness; the agent logs it once it has a logger).
var (
	Released int64
	Err      error
)

func init() {
	Released, Err = residency.Release()
}
