package nodeapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/volumestats"
)

// fakeVolumeCache serves fixed volume stats by pod UID.
type fakeVolumeCache map[types.UID]volumestats.PodStats

func (f fakeVolumeCache) PodVolumeStats(uid types.UID) (volumestats.PodStats, bool) {
	s, ok := f[uid]
	return s, ok
}

func volume(name string, used uint64, ephemeral bool, pvc *statsapi.PVCReference) volumestats.VolumeStats {
	return volumestats.VolumeStats{
		VolumeStats: statsapi.VolumeStats{Name: name, PVCRef: pvc, FsStats: statsapi.FsStats{
			UsedBytes: ptr.To(used), CapacityBytes: ptr.To[uint64](1 << 30), AvailableBytes: ptr.To[uint64](1 << 29),
			Inodes: ptr.To[uint64](100), InodesFree: ptr.To[uint64](90), InodesUsed: ptr.To[uint64](10),
		}},
		LocalEphemeral: ephemeral,
	}
}

func TestSummaryVolumes(t *testing.T) {
	g := NewWithT(t)
	f, h := summaryServer(t)
	claim := &statsapi.PVCReference{Name: "claim", Namespace: "ns"}
	f.Provider.Volumes = fakeVolumeCache{"uid-web": {UID: "uid-web", Namespace: "ns", Name: "web", Volumes: []volumestats.VolumeStats{
		volume("secret", 7, false, nil),
		volume("data", 1000, true, nil),
		volume("pv", 5, false, claim),
		volume("config", 20, true, nil),
	}}}
	sum, _ := getSummary(t, h, http.MethodGet, "/stats/summary")
	byName := map[string]statsapi.PodStats{}
	for _, p := range sum.Pods {
		byName[p.PodRef.Name] = p
	}
	web := byName["web"]
	names := []string{}
	for _, v := range web.VolumeStats {
		names = append(names, v.Name)
	}
	g.Expect(names).To(Equal([]string{"data", "config", "secret", "pv"}), "local ephemeral volumes first, as the kubelet lists them")
	g.Expect(web.VolumeStats[3].PVCRef).To(Equal(claim))
	g.Expect(web.VolumeStats[0].UsedBytes).To(Equal(ptr.To[uint64](1000)))
	g.Expect(web.VolumeStats[0].CapacityBytes).To(Equal(ptr.To[uint64](1 << 30)))
	g.Expect(web.EphemeralStorage.UsedBytes).To(Equal(ptr.To[uint64](350+1000+20)),
		"writable layer, logs and the local ephemeral volumes, not the secret's tmpfs or the claim")
	g.Expect(web.EphemeralStorage.InodesUsed).To(Equal(ptr.To[uint64](3+2+10+10)),
		"the inodes of the same: writable layer, logs, data and config")
	g.Expect(byName["idle"].VolumeStats).To(BeNil(), "a pod not measured yet has no volume list")

	only, _ := getSummary(t, h, http.MethodGet, "/stats/summary?only_cpu_and_memory=true")
	for _, p := range only.Pods {
		g.Expect(p.VolumeStats).To(BeNil(), p.PodRef.Name)
	}
}

func TestSummaryCountsEtcHosts(t *testing.T) {
	g := NewWithT(t)
	f, h := summaryServer(t)
	f.Provider.RootDir = t.TempDir()
	hosts := filepath.Join(f.Provider.RootDir, "pods", "uid-web", "etc-hosts")
	g.Expect(os.MkdirAll(filepath.Dir(hosts), 0o750)).To(Succeed())
	g.Expect(os.WriteFile(hosts, []byte(strings.Repeat("127.0.0.1 localhost\n", 300)), 0o644)).To(Succeed())
	u, err := volumestats.DiskUsage(hosts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Bytes).To(BeNumerically(">", 0))
	sum, _ := getSummary(t, h, http.MethodGet, "/stats/summary")
	for _, p := range sum.Pods {
		if p.PodRef.Name == "web" {
			g.Expect(p.EphemeralStorage.UsedBytes).To(Equal(ptr.To(350+uint64(u.Bytes))), "writable layer, logs and /etc/hosts")
			g.Expect(p.EphemeralStorage.InodesUsed).To(Equal(ptr.To[uint64](3+2+1)), "writable layer, logs and /etc/hosts")
		}
	}
}
