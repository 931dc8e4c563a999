package volume

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// setUpPod is what the manager remembers of a pod whose volumes are all set
// up: the fingerprint of the pod metadata its downward API files were
// written from, and what each claim or CSI volume resolved to.
type setUpPod struct {
	meta     string
	resolved map[string]PodVolume
}

// IsSetUp reports whether every volume of the pod has been set up since it
// was last torn down (or since the manager was created).
func (m *Manager) IsSetUp(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.setUp[uid]
	return ok
}

// markSetUp records the pod as set up, with what its claim and CSI volumes
// resolved to.
func (m *Manager) markSetUp(pod *v1.Pod, resolved map[string]PodVolume) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setUp[pod.UID] = setUpPod{meta: metaFingerprint(pod), resolved: resolved}
}

// markMetaWritten records the pod metadata its downward API files now hold.
func (m *Manager) markMetaWritten(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st, ok := m.setUp[pod.UID]; ok {
		st.meta = metaFingerprint(pod)
		m.setUp[pod.UID] = st
	}
}

func (m *Manager) forgetSetUp(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.setUp, uid)
}

// Update rewrites the named volumes of a pod whose volumes are set up, after
// a change of an object they project (see VolumesProjecting). Content that did
// not change is left alone; each version is swapped in atomically. A pod
// that is not set up is left alone: SetUp will write everything. Names of
// volumes without content (emptyDir, hostPath) or not in the pod are
// ignored. Errors are *SetUpError values, joined.
func (m *Manager) Update(ctx context.Context, pod *v1.Pod, names []string) error {
	if len(names) == 0 {
		return nil
	}
	defer m.locks.Lock(string(pod.UID))()
	if !m.IsSetUp(pod.UID) {
		return nil
	}
	return m.rewrite(ctx, pod, func(vol *v1.Volume) bool { return slices.Contains(names, vol.Name) })
}

// Refresh rewrites what is due in the volumes of a set-up pod without any
// object changing: the volumes with a service account token due for refresh
// (NextRefresh has passed), and the downward API files when the pod's
// labels or annotations changed since they were written. With nothing due it
// reads and writes nothing. A pod that is not set up is left alone.
func (m *Manager) Refresh(ctx context.Context, pod *v1.Pod) error {
	defer m.locks.Lock(string(pod.UID))()
	m.mu.Lock()
	st, ok := m.setUp[pod.UID]
	m.mu.Unlock()
	if !ok {
		return nil
	}
	metaChanged := st.meta != metaFingerprint(pod)
	next, hasTokens := m.tokens.nextRefresh(pod.UID)
	tokensDue := hasTokens && !m.clock.Now().Before(next)
	nextCert, hasCerts := m.podCerts.nextRefresh(pod.UID)
	tokensDue = tokensDue || (hasCerts && !m.clock.Now().Before(nextCert))
	if !metaChanged && !tokensDue {
		return nil
	}
	err := m.rewrite(ctx, pod, func(vol *v1.Volume) bool {
		downward, token := podDependent(vol)
		return (metaChanged && downward) || (tokensDue && token)
	})
	if err == nil && metaChanged {
		m.markMetaWritten(pod)
	}
	return err
}

// rewrite writes the content volumes of pod that match. The pod's lock is
// held.
func (m *Manager) rewrite(ctx context.Context, pod *v1.Pod, match func(*v1.Volume) bool) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if !hasContent(vol) || !match(vol) {
			continue
		}
		if err := m.setUpVolume(ctx, pod, vol); err != nil {
			errs = append(errs, &SetUpError{Volume: vol.Name, Err: err})
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("updating volumes of pod %s: %w", klog.KObj(pod), err)
	}
	return nil
}

// hasContent says whether nodelet writes the volume's files.
func hasContent(vol *v1.Volume) bool {
	s := &vol.VolumeSource
	return s.ConfigMap != nil || s.Secret != nil || s.DownwardAPI != nil || s.Projected != nil
}

// podDependent says whether a volume's content comes from the pod itself
// (downward API files, directly or projected) and whether it holds service
// account tokens or pod certificates (both refreshed on a schedule).
func podDependent(vol *v1.Volume) (downward, token bool) {
	switch s := &vol.VolumeSource; {
	case s.DownwardAPI != nil:
		return true, false
	case s.Projected != nil:
		for _, p := range s.Projected.Sources {
			downward = downward || p.DownwardAPI != nil
			token = token || p.ServiceAccountToken != nil || p.PodCertificate != nil
		}
	}
	return downward, token
}

// VolumesProjectingObjects returns the names of pod's volumes whose content
// comes, entirely or in part, from ConfigMaps or Secrets.
func VolumesProjectingObjects(pod *v1.Pod) []string {
	return volumesProjecting(pod, func(s *v1.VolumeSource) bool {
		return s.ConfigMap != nil || s.Secret != nil
	}, func(p *v1.VolumeProjection) bool {
		return p.ConfigMap != nil || p.Secret != nil
	})
}

// VolumesProjectingConfigMap returns the names of pod's volumes whose
// content comes, entirely or in part, from the ConfigMap name.
func VolumesProjectingConfigMap(pod *v1.Pod, name string) []string {
	return volumesProjecting(pod, func(s *v1.VolumeSource) bool {
		return s.ConfigMap != nil && s.ConfigMap.Name == name
	}, func(p *v1.VolumeProjection) bool {
		return p.ConfigMap != nil && p.ConfigMap.Name == name
	})
}

// VolumesProjectingSecret returns the names of pod's volumes whose content
// comes, entirely or in part, from the Secret name.
func VolumesProjectingSecret(pod *v1.Pod, name string) []string {
	return volumesProjecting(pod, func(s *v1.VolumeSource) bool {
		return s.Secret != nil && s.Secret.SecretName == name
	}, func(p *v1.VolumeProjection) bool {
		return p.Secret != nil && p.Secret.Name == name
	})
}

func volumesProjecting(pod *v1.Pod, direct func(*v1.VolumeSource) bool, projected func(*v1.VolumeProjection) bool) []string {
	var out []string
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if direct(&vol.VolumeSource) {
			out = append(out, vol.Name)
			continue
		}
		if vol.Projected == nil {
			continue
		}
		for j := range vol.Projected.Sources {
			if projected(&vol.Projected.Sources[j]) {
				out = append(out, vol.Name)
				break
			}
		}
	}
	return out
}

// metaFingerprint identifies the pod metadata downward API files are made
// of that can change while the pod runs: its labels and annotations.
func metaFingerprint(pod *v1.Pod) string {
	// Maps marshal with sorted keys: equal metadata, equal fingerprint.
	data, err := json.Marshal([]map[string]string{pod.Labels, pod.Annotations})
	if err != nil {
		// Maps of strings always marshal.
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
