package podspec

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// ContainerHash returns a stable hash of the parts of a container spec that
// can change while the pod exists and require the container to be
// recreated: its name and image (every other container field is immutable
// in the API, or resized in place). Hashing only those keeps containers
// running when an API server upgrade adds defaults to the spec.
func ContainerHash(c *v1.Container) string {
	canonical, err := json.Marshal(struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}{c.Name, c.Image})
	if err != nil {
		// Marshalling two strings cannot fail.
		panic(err)
	}
	h := fnv.New64a()
	_, _ = h.Write(canonical)
	return strconv.FormatUint(h.Sum64(), 16)
}
