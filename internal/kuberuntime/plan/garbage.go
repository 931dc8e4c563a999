package plan

import "github.com/nodelet/nodelet/internal/kuberuntime/state"

// Garbage is what of a pod's runtime objects no status needs any more.
type Garbage struct {
	// Containers to remove, with their log files.
	Containers []state.Container
	// Sandboxes to remove, by ID.
	Sandboxes []string
}
