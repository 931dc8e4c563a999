package cgroups

import (
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	ocgroups "github.com/opencontainers/cgroups"
	ocmanager "github.com/opencontainers/cgroups/manager"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/metrics"
)

// realManager is a Manager over a private cgroupfs tree, removed at the
// end; it skips the test where cgroups cannot be made (not root).
func realManager(t *testing.T) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making cgroups needs root")
	}
	root := fmt.Sprintf("/nodelet-unit-%d", os.Getpid())
	m, err := New(Options{Driver: Cgroupfs, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Setup(); err != nil {
		t.Skipf("cgroups cannot be made here: %v", err)
	}
	t.Cleanup(func() {
		for _, n := range []Name{m.kubepods.Child(BurstableName), m.kubepods.Child(BestEffortName), m.kubepods, m.kubepods.Parent()} {
			if err := m.destroy(context.Background(), n); err != nil {
				t.Errorf("removing %s: %v", n.Cgroupfs(), err)
			}
		}
	})
	return m
}

func qosPod(uid string, cpu string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)}}
	c := v1.Container{Name: "app"}
	if cpu != "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	}
	pod.Spec.Containers = []v1.Container{c}
	return pod
}

func (m *Manager) exists(t *testing.T, n Name) bool {
	t.Helper()
	lib, err := m.lib(n)
	if err != nil {
		t.Fatal(err)
	}
	return ocgroups.PathExists(dirOf(lib))
}

func TestPodCgroupsAreMadeAndRemovedWithoutRewritingUnchangedQoS(t *testing.T) {
	g := NewWithT(t)
	m := realManager(t)
	ctx := context.Background()
	burstable, besteffort := qosPod("burstable-1", "100m"), qosPod("besteffort-1", "")
	g.Expect(m.EnsurePod(burstable)).To(Succeed())
	before := histogramCount(t, opUpdate)
	// A best-effort pod changes nothing in the burstable cgroup.
	g.Expect(m.EnsurePod(besteffort)).To(Succeed())
	g.Expect(histogramCount(t, opUpdate)-before).To(Equal(1.0), "only the pod's own cgroup is set")
	g.Expect(m.exists(t, PodName(m.kubepods, besteffort))).To(BeTrue())

	before = histogramCount(t, opUpdate)
	g.Expect(m.RemovePod(ctx, besteffort.UID)).To(Succeed())
	g.Expect(histogramCount(t, opUpdate)-before).To(BeZero(), "the burstable cgroup is unchanged")
	g.Expect(m.exists(t, PodName(m.kubepods, besteffort))).To(BeFalse())

	// The burstable pod's removal changes the burstable cgroup's shares.
	g.Expect(m.RemovePod(ctx, burstable.UID)).To(Succeed())
	g.Expect(histogramCount(t, opUpdate) - before).To(Equal(1.0))
	g.Expect(m.exists(t, PodName(m.kubepods, burstable))).To(BeFalse())

	// A pod this Manager never saw (after a restart) is looked for under
	// every QoS cgroup.
	g.Expect(m.EnsurePod(besteffort)).To(Succeed())
	fresh, err := New(m.opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fresh.RemovePod(ctx, besteffort.UID)).To(Succeed())
	g.Expect(m.exists(t, PodName(m.kubepods, besteffort))).To(BeFalse())
}

// histogramCount is how many observations kubelet_cgroup_manager_duration_seconds
// holds for op.
func histogramCount(t *testing.T, op string) float64 {
	t.Helper()
	h, err := metrics.CgroupManagerDuration.GetMetricWithLabelValues(op)
	if err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := h.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return float64(m.GetHistogram().GetSampleCount())
}

func TestPodCgroupPathsAreTheLibrarysOwn(t *testing.T) {
	g := NewWithT(t)
	m := realManager(t)
	for _, pod := range []*v1.Pod{qosPod("burstable-2", "100m"), qosPod("besteffort-2", "")} {
		n := PodName(m.kubepods, pod)
		lib, err := m.lib(n)
		g.Expect(err).NotTo(HaveOccurred())
		own, err := ocmanager.New(&ocgroups.Cgroup{Path: n.Cgroupfs(), Resources: &ocgroups.Resources{SkipDevices: true}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lib.GetPaths()).To(Equal(own.GetPaths()))
		g.Expect(m.EnsurePod(pod)).To(Succeed())
		g.Expect(m.exists(t, n)).To(BeTrue())
		g.Expect(m.RemovePod(context.Background(), pod.UID)).To(Succeed())
		g.Expect(m.exists(t, n)).To(BeFalse())
	}
	g.Expect(m.qosPaths).To(HaveLen(2), "the QoS cgroups' paths are resolved once each")
}

// BenchmarkPodCgroupLookup opens a pod cgroup as Manager.lib does, and as
// the library alone does (resolving every controller's mount).
func BenchmarkPodCgroupLookup(b *testing.B) {
	m, err := New(Options{Driver: Cgroupfs, Root: "/nodelet-bench"})
	if err != nil {
		b.Fatal(err)
	}
	n := PodName(m.kubepods, qosPod("besteffort-3", ""))
	b.Run("manager", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.lib(n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		for b.Loop() {
			if _, err := ocmanager.New(&ocgroups.Cgroup{Path: n.Cgroupfs(), Resources: &ocgroups.Resources{SkipDevices: true}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
