package volume

import (
	"k8s.io/apimachinery/pkg/types"
)

// EmptyDirPath is where the pod's emptyDir volume of that name lives on
// the node (for a medium Memory one, the tmpfs mount point).
func (m *Manager) EmptyDirPath(uid types.UID, name string) string {
	return m.volumeDir(uid, emptyDirPlugin, name)
}
