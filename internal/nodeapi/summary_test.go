package nodeapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fake "k8s.io/cri-api/pkg/apis/testing"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/stats/statstest"
)

// summaryServer serves the stats fixture's provider, with an image
// filesystem, a writable layer and a log file for web's container.
func summaryServer(t *testing.T) (*statstest.Fixture, http.Handler) {
	t.Helper()
	f := statstest.New(t)
	images := fake.NewFakeImageService()
	images.SetFakeFilesystemUsage([]*runtimeapi.FilesystemUsage{{
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd"},
		UsedBytes:  &runtimeapi.UInt64Value{Value: 250},
		InodesUsed: &runtimeapi.UInt64Value{Value: 25},
	}})
	rt, err := cri.New(f.RuntimeService, images, cri.Options{NodeName: statstest.NodeName})
	if err != nil {
		t.Fatal(err)
	}
	f.Provider.Runtime = rt
	now := f.Clock.Now().UnixNano()
	f.RuntimeService.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: f.ContainerID, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: cri.OwnerLabels(statstest.NodeName)},
		Cpu: &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 3_000_000_000},
			UsageNanoCores: &runtimeapi.UInt64Value{Value: 250_000_000}},
		Memory: &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 4096},
			UsageBytes: &runtimeapi.UInt64Value{Value: 8192}, RssBytes: &runtimeapi.UInt64Value{Value: 1024}},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: now, UsedBytes: &runtimeapi.UInt64Value{Value: 300},
			InodesUsed: &runtimeapi.UInt64Value{Value: 3}},
	}})
	logDir := filepath.Join(f.Provider.PodLogsDir, "ns_web_uid-web", "app")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "0.log"), []byte(strings.Repeat("x", 50)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := New(Options{
		NodeName:      statstest.NodeName,
		Authenticator: NewAuthenticator(Authenticator{Anonymous: true}),
		Authorizer:    NewAuthorizer(Authorizer{NodeName: statstest.NodeName}),
		Pods:          f.Provider.Pods,
		Runtime:       rt,
		Stats:         f.Provider,
		Clock:         f.Clock,
	})
	return f, s.Handler()
}

func getSummary(t *testing.T, h http.Handler, method, target string) (*statsapi.Summary, string) {
	t.Helper()
	g := NewWithT(t)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusOK), "body: %s", w.Body.String())
	g.Expect(w.Header().Get("Content-Type")).To(Equal("application/json"))
	sum := &statsapi.Summary{}
	g.Expect(json.Unmarshal(w.Body.Bytes(), sum)).To(Succeed())
	return sum, w.Body.String()
}

func TestSummaryEndpoint(t *testing.T) {
	g := NewWithT(t)
	f, h := summaryServer(t)
	at := metav1.NewTime(f.Clock.Now())
	sum, raw := getSummary(t, h, http.MethodGet, "/stats/summary")

	n := sum.Node
	g.Expect(n.NodeName).To(Equal(statstest.NodeName))
	g.Expect(n.StartTime.Unix()).To(BeEquivalentTo(1000), "boot time")
	g.Expect(n.CPU.Time.Equal(&at)).To(BeTrue())
	g.Expect(n.CPU.UsageCoreNanoSeconds).To(Equal(ptr.To[uint64](2_000_000_000)))
	g.Expect(n.CPU.UsageNanoCores).To(BeNil(), "no rate from one sample")
	g.Expect(n.Memory.WorkingSetBytes).To(Equal(ptr.To[uint64](500 * 1024)))
	g.Expect(n.Memory.UsageBytes).To(Equal(ptr.To[uint64](600 * 1024)))
	g.Expect(n.Memory.AvailableBytes).To(Equal(ptr.To[uint64](500 * 1024)))
	g.Expect(n.Network.Name).To(Equal("eth0"))
	g.Expect(n.Network.RxBytes).To(Equal(ptr.To[uint64](10)))
	g.Expect(n.Network.TxBytes).To(Equal(ptr.To[uint64](20)))
	g.Expect(n.Fs).To(Equal(&statsapi.FsStats{Time: at,
		CapacityBytes: ptr.To[uint64](1000), AvailableBytes: ptr.To[uint64](400), UsedBytes: ptr.To[uint64](600),
		Inodes: ptr.To[uint64](100), InodesFree: ptr.To[uint64](60), InodesUsed: ptr.To[uint64](40)}))
	g.Expect(n.Runtime.ImageFs.CapacityBytes).To(Equal(ptr.To[uint64](1000)))
	g.Expect(n.Runtime.ImageFs.UsedBytes).To(Equal(ptr.To[uint64](250)), "the runtime's, not the filesystem's")
	g.Expect(n.Runtime.ImageFs.InodesUsed).To(Equal(ptr.To[uint64](25)))
	g.Expect(n.Rlimit).NotTo(BeNil())
	g.Expect(n.Rlimit.MaxPID).To(BeNil(), "pid_max is not readable here")
	g.Expect(n.CPU.PSI).To(BeNil(), "no pressure files: a cgroup v1 host")
	g.Expect(n.Memory.PSI).To(BeNil())
	g.Expect(n.IO).To(BeNil())

	g.Expect(sum.Pods).To(HaveLen(2))
	g.Expect([]string{sum.Pods[0].PodRef.Name, sum.Pods[1].PodRef.Name}).To(ConsistOf("web", "idle"))
	g.Expect(raw).To(ContainSubstring(`"containers":[]`), "a pod without containers has an empty list, not null")
	var web statsapi.PodStats
	for _, p := range sum.Pods {
		if p.PodRef.Name == "web" {
			web = p
		}
	}
	g.Expect(web.PodRef).To(Equal(statsapi.PodReference{Name: "web", Namespace: "ns", UID: "uid-web"}))
	g.Expect(web.Containers).To(HaveLen(1))
	c := web.Containers[0]
	g.Expect(c.Name).To(Equal("app"))
	g.Expect(c.CPU.UsageCoreNanoSeconds).To(Equal(ptr.To[uint64](3_000_000_000)))
	g.Expect(c.CPU.UsageNanoCores).To(Equal(ptr.To[uint64](250_000_000)), "the runtime's rate")
	g.Expect(c.Memory.WorkingSetBytes).To(Equal(ptr.To[uint64](4096)))
	g.Expect(c.Memory.UsageBytes).To(Equal(ptr.To[uint64](8192)))
	g.Expect(c.Memory.RSSBytes).To(Equal(ptr.To[uint64](1024)))
	g.Expect(c.Memory.AvailableBytes).To(BeNil(), "no limit")
	g.Expect(c.Rootfs.UsedBytes).To(Equal(ptr.To[uint64](300)))
	g.Expect(c.Rootfs.InodesUsed).To(Equal(ptr.To[uint64](3)))
	g.Expect(c.Logs.UsedBytes).To(Equal(ptr.To[uint64](50)))
	g.Expect(c.Logs.InodesUsed).To(Equal(ptr.To[uint64](2)), "the directory and its file")
	g.Expect(c.Logs.CapacityBytes).To(Equal(ptr.To[uint64](1000)))
	g.Expect(web.CPU.UsageCoreNanoSeconds).To(Equal(ptr.To[uint64](3_000_000_000)))
	g.Expect(web.CPU.UsageNanoCores).To(Equal(ptr.To[uint64](250_000_000)))
	g.Expect(web.Memory.WorkingSetBytes).To(Equal(ptr.To[uint64](4096)))
	g.Expect(web.EphemeralStorage.UsedBytes).To(Equal(ptr.To[uint64](350)), "writable layer and logs")
	g.Expect(web.EphemeralStorage.InodesUsed).To(Equal(ptr.To[uint64](3+2)), "the writable layer's inodes, the log directory and its file")
	g.Expect(web.EphemeralStorage.CapacityBytes).To(Equal(ptr.To[uint64](1000)))

	post, _ := getSummary(t, h, http.MethodPost, "/stats/summary")
	g.Expect(post.Node.NodeName).To(Equal(statstest.NodeName))
	g.Expect(post.Pods).To(HaveLen(2))
}

func TestSummaryOnlyCPUAndMemory(t *testing.T) {
	g := NewWithT(t)
	_, h := summaryServer(t)
	sum, _ := getSummary(t, h, http.MethodGet, "/stats/summary?only_cpu_and_memory=true")
	g.Expect(sum.Node.CPU).NotTo(BeNil())
	g.Expect(sum.Node.Memory).NotTo(BeNil())
	g.Expect(sum.Node.Fs).To(BeNil())
	g.Expect(sum.Node.Network).To(BeNil())
	g.Expect(sum.Node.Runtime).To(BeNil())
	g.Expect(sum.Node.Rlimit).To(BeNil())
	for _, p := range sum.Pods {
		g.Expect(p.EphemeralStorage).To(BeNil(), p.PodRef.Name)
		g.Expect(p.Network).To(BeNil(), p.PodRef.Name)
		for _, c := range p.Containers {
			g.Expect(c.CPU).NotTo(BeNil())
			g.Expect(c.Memory).NotTo(BeNil())
			g.Expect(c.Rootfs).To(BeNil())
			g.Expect(c.Logs).To(BeNil())
		}
	}

	// Anything but a boolean true is the full summary, as the kubelet does.
	for _, q := range []string{"only_cpu_and_memory=false", "only_cpu_and_memory=nope", "only_cpu_and_memory="} {
		sum, _ := getSummary(t, h, http.MethodGet, "/stats/summary?"+q)
		g.Expect(sum.Node.Fs).NotTo(BeNil(), q)
	}
}

func TestSummaryEndpointErrors(t *testing.T) {
	g := NewWithT(t)
	f, h := summaryServer(t)
	f.Provider.Host = statstest.Host{}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/stats/summary", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusInternalServerError))
	g.Expect(w.Body.String()).To(ContainSubstring("reading node CPU usage"))

	f, h = summaryServer(t)
	f.RuntimeService.InjectError("ListContainerStats", statusNotFound())
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/stats/summary", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusNotFound), "a runtime NotFound keeps its meaning")
	g.Expect(w.Body.String()).To(ContainSubstring("listing container stats"))
}

func TestResourceMetrics(t *testing.T) {
	g := NewWithT(t)
	f, h := summaryServer(t)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/resource", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusOK))
	ms := f.Clock.Now().UnixMilli()
	body := w.Body.String()
	for _, line := range []string{
		"resource_scrape_error 0",
		"node_cpu_usage_seconds_total 2 " + itoa(ms),
		"node_memory_working_set_bytes 512000 " + itoa(ms),
		`pod_cpu_usage_seconds_total{namespace="ns",pod="web"} 3 ` + itoa(ms),
		`pod_memory_working_set_bytes{namespace="ns",pod="web"} 4096 ` + itoa(ms),
		`container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web"} 3 ` + itoa(ms),
		`container_memory_working_set_bytes{container="app",namespace="ns",pod="web"} 4096 ` + itoa(ms),
		"# TYPE node_cpu_usage_seconds_total counter",
		"# TYPE container_cpu_usage_seconds_total counter",
		"# TYPE container_memory_working_set_bytes gauge",
		"# TYPE container_start_time_seconds gauge",
	} {
		g.Expect(strings.Split(body, "\n")).To(ContainElement(line))
	}
	g.Expect(body).To(MatchRegexp(`(?m)^container_start_time_seconds\{container="app",namespace="ns",pod="web"\} \S+ \d+$`))
	g.Expect(body).NotTo(ContainSubstring(`pod="idle"`), "a pod without usage has no series")

	f.Provider.Host = statstest.Host{}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/resource", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusOK))
	g.Expect(strings.Split(w.Body.String(), "\n")).To(ContainElement("resource_scrape_error 1"))
	g.Expect(w.Body.String()).NotTo(ContainSubstring("node_cpu_usage_seconds_total"))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// On a cgroup v2 host the summary carries pressure stall information: the
// node's from the root cgroup's pressure files, a container's from the
// runtime's stats. A cgroup v1 host (TestSummaryEndpoint) has none.
func TestSummaryPressure(t *testing.T) {
	g := NewWithT(t)
	f, h := summaryServer(t)
	host := f.Provider.Host.(statstest.Host)
	host["/sys/fs/cgroup/cpu.pressure"] = "some avg10=1.50 avg60=0.50 avg300=0.10 total=2000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	host["/sys/fs/cgroup/memory.pressure"] = "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n"
	host["/sys/fs/cgroup/io.pressure"] = "some avg10=2.00 avg60=1.00 avg300=0.25 total=90\nfull avg10=1.00 avg60=0.50 avg300=0.12 total=40\n"
	now := f.Clock.Now().UnixNano()
	psi := func(some, full uint64) *runtimeapi.PsiStats {
		return &runtimeapi.PsiStats{Some: &runtimeapi.PsiData{Total: some, Avg10: 3.5}, Full: &runtimeapi.PsiData{Total: full}}
	}
	f.RuntimeService.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: f.ContainerID, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: cri.OwnerLabels(statstest.NodeName)},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 1}, Psi: psi(100, 10)},
		Memory: &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 1},
			Psi: psi(200, 20)},
		Io: &runtimeapi.IoUsage{Timestamp: now, Psi: psi(300, 30)},
	}})

	sum, _ := getSummary(t, h, http.MethodGet, "/stats/summary")
	n := sum.Node
	g.Expect(n.CPU.PSI).To(Equal(&statsapi.PSIStats{
		Some: statsapi.PSIData{Avg10: 1.5, Avg60: 0.5, Avg300: 0.1, Total: 2_000_000}, Full: statsapi.PSIData{}}), "microseconds become nanoseconds")
	g.Expect(n.Memory.PSI.Full.Total).To(BeEquivalentTo(3000))
	g.Expect(n.IO).NotTo(BeNil())
	g.Expect(n.IO.PSI.Some).To(Equal(statsapi.PSIData{Avg10: 2, Avg60: 1, Avg300: 0.25, Total: 90_000}))

	var web statsapi.PodStats
	for _, p := range sum.Pods {
		if p.PodRef.Name == "web" {
			web = p
		}
	}
	g.Expect(web.Containers).To(HaveLen(1))
	c := web.Containers[0]
	g.Expect(c.CPU.PSI).To(Equal(&statsapi.PSIStats{Some: statsapi.PSIData{Total: 100, Avg10: 3.5}, Full: statsapi.PSIData{Total: 10}}), "the runtime's, already nanoseconds")
	g.Expect(c.Memory.PSI.Some.Total).To(BeEquivalentTo(200))
	g.Expect(c.IO).NotTo(BeNil())
	g.Expect(c.IO.PSI.Full.Total).To(BeEquivalentTo(30))

	only, _ := getSummary(t, h, http.MethodGet, "/stats/summary?only_cpu_and_memory=true")
	g.Expect(only.Node.CPU.PSI).NotTo(BeNil())
	g.Expect(only.Node.IO).To(BeNil(), "only CPU and memory")
}
