package containerlogs

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/metrics"
)

// fakeRuntime holds containers by ID; reopening a log makes a new empty
// file where the runtime writes, as containerd does.
type fakeRuntime struct {
	mu         sync.Mutex
	containers map[string]*runtimeapi.ContainerStatus
	labels     map[string]map[string]string
	reopenErr  error
	reopened   []string
	// statusErr fails the status of these containers.
	statusErr map[string]error
	// statusCalls counts ContainerStatus calls by container ID.
	statusCalls map[string]int
}

func (f *fakeRuntime) add(id, pod, container, logPath string, state runtimeapi.ContainerState) {
	if f.containers == nil {
		f.containers, f.labels = map[string]*runtimeapi.ContainerStatus{}, map[string]map[string]string{}
	}
	f.containers[id] = &runtimeapi.ContainerStatus{Id: id, State: state, LogPath: logPath}
	f.labels[id] = map[string]string{
		kubetypes.KubernetesPodNameLabel:       pod,
		kubetypes.KubernetesPodNamespaceLabel:  "ns",
		kubetypes.KubernetesContainerNameLabel: container,
	}
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Container
	for id, st := range f.containers {
		out = append(out, &runtimeapi.Container{Id: id, State: st.State, Labels: f.labels[id]})
	}
	return out, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statusCalls == nil {
		f.statusCalls = map[string]int{}
	}
	f.statusCalls[id]++
	if err := f.statusErr[id]; err != nil {
		return nil, err
	}
	return f.containers[id], nil
}

func (f *fakeRuntime) ReopenContainerLog(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reopenErr != nil {
		return f.reopenErr
	}
	f.reopened = append(f.reopened, id)
	return os.WriteFile(f.containers[id].LogPath, nil, 0o640)
}

// testNode is the node the managers of the tests run.
const testNode = "node-a"

func newManager(t *testing.T, rt Runtime, clk *clocktesting.FakeClock, maxFiles int) (*Manager, string, string) {
	t.Helper()
	base := t.TempDir()
	logs, links := filepath.Join(base, "pods"), filepath.Join(base, "containers")
	m, err := New(rt, Options{PodLogsDir: logs, LinksDir: links, NodeName: testNode, MaxSize: 100, MaxFiles: maxFiles, MaxWorkers: 2,
		MonitorInterval: time.Second, Clock: clk, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	return m, logs, links
}

func writeLog(t testing.TB, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o640); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestSyncRotatesCompressesAndKeepsMaxFiles(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{}
	m, logs, _ := newManager(t, rt, clk, 3)
	dir := filepath.Join(logs, "ns_p_uid", "c")
	log := filepath.Join(dir, "0.log")
	rt.add("id1", "p", "c", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	for i := range 4 {
		writeLog(t, log, 150+i)
		if err := m.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Second)
	}
	got := names(t, dir)
	want := []string{"0.log", "0.log.20261124-230002.gz", "0.log.20261124-230003"}
	if !slices.Equal(got, want) {
		t.Fatalf("files after 4 rotations with maxFiles 3: %v, want %v", got, want)
	}
	zr, err := os.Open(filepath.Join(dir, want[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = zr.Close() }()
	gz, err := gzip.NewReader(zr)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(gz)
	if err != nil || len(data) != 152 {
		t.Errorf("compressed file holds %d bytes (%v), want the 152 of the third log", len(data), err)
	}
	fi, err := os.Stat(filepath.Join(dir, want[1]))
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("compressed file mode %v (%v), want the log's 0640", fi.Mode().Perm(), err)
	}

	// A small log is left alone.
	writeLog(t, log, 10)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Errorf("files after a sync of a small log: %v, want %v", got, want)
	}
}

func TestSyncAsksTheLogPathOfANewContainerOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{statusErr: map[string]error{"id2": errors.New("busy")}}
	m, logs, _ := newManager(t, rt, clk, 3)
	for _, id := range []string{"id1", "id2"} {
		log := filepath.Join(logs, "ns_p_uid", id, "0.log")
		writeLog(t, log, 10)
		rt.add(id, "p", id, log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	}
	syncNow := func() {
		t.Helper()
		if err := m.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	syncNow()
	syncNow()
	if got := rt.statusCalls["id1"]; got != 1 {
		t.Errorf("status of a known container asked %d times over two syncs, want 1", got)
	}
	if got := rt.statusCalls["id2"]; got != 2 {
		t.Errorf("status that failed asked %d times over two syncs, want 2 (once each)", got)
	}

	// A container removed and listed again (a restart of the runtime
	// reusing nothing) is asked again.
	rt.mu.Lock()
	delete(rt.statusErr, "id2")
	saved := rt.containers["id1"]
	delete(rt.containers, "id1")
	rt.mu.Unlock()
	syncNow()
	rt.mu.Lock()
	rt.containers["id1"] = saved
	rt.mu.Unlock()
	syncNow()
	if got := rt.statusCalls["id1"]; got != 2 {
		t.Errorf("status of a container forgotten and listed again asked %d times, want 2", got)
	}
	if got := rt.statusCalls["id2"]; got != 3 {
		t.Errorf("status of a container that failed then answered asked %d times, want 3", got)
	}
}

func TestSyncNeedsNoStatusOfALinkedContainer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{}
	m, logs, links := newManager(t, rt, clk, 3)
	log := filepath.Join(logs, "ns_p_uid", "c", "0.log")
	writeLog(t, log, 200)
	rt.add("id", "p", "c", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := m.Link("p", "ns", "c", "id", log); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rt.statusCalls["id"]; got != 0 {
		t.Errorf("status of a container linked at its creation asked %d times, want 0", got)
	}
	// The sync still rotates its log, past its size: it knows the path.
	if got := names(t, filepath.Dir(log)); len(got) < 2 {
		t.Errorf("files after a sync of a log past its size: %v, want it rotated", got)
	}
	if got := names(t, links); !slices.Equal(got, []string{"p_ns_c-id.log"}) {
		t.Errorf("links: %v", got)
	}
}

func TestSyncRenamesBackWhenReopenFails(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{reopenErr: errors.New("no")}
	m, logs, _ := newManager(t, rt, clk, 3)
	dir := filepath.Join(logs, "ns_p_uid", "c")
	log := filepath.Join(dir, "0.log")
	rt.add("id1", "p", "c", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	writeLog(t, log, 150)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"0.log"}) {
		t.Errorf("files after a failed reopen: %v, want the log under its name", got)
	}
}

func TestSyncNeverLeavesThePodLogsDir(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{}
	m, logs, _ := newManager(t, rt, clk, 2)
	outside := t.TempDir()
	writeLog(t, filepath.Join(outside, "0.log"), 150)
	writeLog(t, filepath.Join(outside, "0.log.20261124-225959"), 150)
	// A container directory that is a link out of the pod log directory,
	// and a log path that names a file outside it.
	if err := os.MkdirAll(filepath.Join(logs, "ns_p_uid"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(logs, "ns_p_uid", "c")); err != nil {
		t.Fatal(err)
	}
	rt.add("id1", "p", "c", filepath.Join(logs, "ns_p_uid", "c", "0.log"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.add("id2", "p", "d", filepath.Join(logs, "..", filepath.Base(outside), "0.log"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.add("id3", "p", "e", filepath.Join(outside, "0.log"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := names(t, outside); !slices.Equal(got, []string{"0.log", "0.log.20261124-225959"}) {
		t.Errorf("files outside the pod log directory changed: %v", got)
	}
	if len(rt.reopened) != 0 {
		t.Errorf("reopened %v", rt.reopened)
	}
}

func TestLinksAndSweep(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{}
	m, logs, links := newManager(t, rt, clk, 3)
	live := filepath.Join(logs, "ns_p_uid", "c", "0.log")
	writeLog(t, live, 1)
	rt.add("live", "p", "c", live, runtimeapi.ContainerState_CONTAINER_EXITED)
	if err := m.Link("p", "ns", "c", "live", live); err != nil {
		t.Fatal(err)
	}
	if err := m.Link("p", "ns", "c", "live", live); err != nil {
		t.Errorf("making a link twice: %v", err)
	}
	if err := m.Link("p", "ns", "c", "x", "/etc/passwd"); err == nil {
		t.Error("made a link to a file outside the pod log directory")
	}
	if err := MarkPodDir(filepath.Join(logs, "ns_p_uid"), testNode); err != nil {
		t.Fatal(err)
	}
	// A link elsewhere; one of a removed container, into this node's pod
	// log directory; a missing one; a kubelet's, into its own pod log
	// directory in the same root (no marker); another node's; and one
	// into a pod log directory that is gone.
	if err := os.Symlink("/var/log/pods/other/0.log", filepath.Join(links, "q_ns_c-other.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(logs, "ns_p_uid", "c", "1.log"), filepath.Join(links, "p_ns_c-gone.log")); err != nil {
		t.Fatal(err)
	}
	kubelet := filepath.Join(logs, "ns_k_kuid", "c", "0.log")
	writeLog(t, kubelet, 1)
	if err := os.Symlink(kubelet, filepath.Join(links, "k_ns_c-kubelet.log")); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(logs, "ns_o_ouid", "c", "0.log")
	writeLog(t, other, 1)
	if err := MarkPodDir(filepath.Dir(filepath.Dir(other)), "node-b"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(links, "o_ns_c-othernode.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(logs, "ns_g_guid", "c", "0.log"), filepath.Join(links, "g_ns_c-dangling.log")); err != nil {
		t.Fatal(err)
	}
	live2 := filepath.Join(logs, "ns_p_uid", "d", "0.log")
	writeLog(t, live2, 1)
	rt.add("live2", "p", "d", live2, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"k_ns_c-kubelet.log", "o_ns_c-othernode.log", "p_ns_c-live.log", "p_ns_d-live2.log", "q_ns_c-other.log"}
	if got := names(t, links); !slices.Equal(got, want) {
		t.Errorf("links after a sweep: %v, want %v", got, want)
	}
	if target, err := os.Readlink(filepath.Join(links, "p_ns_d-live2.log")); err != nil || target != live2 {
		t.Errorf("repaired link points to %q (%v), want %q", target, err, live2)
	}

	rotated := live + ".20261124-225959.gz"
	writeLog(t, rotated, 1)
	if err := m.Forget("live", live); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(n string) bool { return n == "p_ns_c-live.log" })
	if got := names(t, links); !slices.Equal(got, want) {
		t.Errorf("links after Forget: %v, want %v", got, want)
	}
	if got := names(t, filepath.Dir(live)); !slices.Equal(got, []string{"0.log"}) {
		t.Errorf("files after Forget: %v, want only the current log, the remover's", got)
	}
}

func TestNoLinksWhenLinksDirIsEmpty(t *testing.T) {
	logs := t.TempDir()
	m, err := New(&fakeRuntime{}, Options{PodLogsDir: logs, MaxSize: 100, MaxFiles: 2, MaxWorkers: 1, MonitorInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Link("p", "ns", "c", "id", filepath.Join(logs, "0.log")); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSweepKeepsTheLinkOfAContainerWhoseStatusFails(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{}
	m, logs, links := newManager(t, rt, clk, 3)
	log := filepath.Join(logs, "ns_p_uid", "c", "0.log")
	writeLog(t, log, 1)
	rt.add("id", "p", "c", log, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := m.Link("p", "ns", "c", "id", log); err != nil {
		t.Fatal(err)
	}
	rt.statusErr = map[string]error{"id": errors.New("deadline exceeded")}
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := names(t, links); !slices.Equal(got, []string{"p_ns_c-id.log"}) {
		t.Errorf("links after a sync that could not read the container's status: %v", got)
	}
}

func TestForgetFindsTheLinkByNameOrBySearch(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	m, logs, links := newManager(t, &fakeRuntime{}, clk, 3)
	log := filepath.Join(logs, "ns_p_uid", "c", "0.log")
	writeLog(t, log, 1)
	// Names this long lose the end of the container ID.
	long := strings.Repeat("p", 200)
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, id := range []string{a, b} {
		if err := m.Link(long, "ns", "c", id, log); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Link("p", "ns", "c", "c", log); err != nil {
		t.Fatal(err)
	}
	if got := len(names(t, links)); got != 3 {
		t.Fatalf("%d links made, want 3", got)
	}

	// A link this manager made goes by its name, even one cut short.
	if err := m.Forget(a, ""); err != nil {
		t.Fatal(err)
	}
	if got := names(t, links); len(got) != 2 || slices.Contains(got, LinkName(long, "ns", "c", a)) {
		t.Errorf("links after forgetting a cut-short one: %v", got)
	}

	// A manager that never saw the container (nodelet restarted) searches
	// the directory.
	fresh, err := New(&fakeRuntime{}, m.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Forget("c", ""); err != nil {
		t.Fatal(err)
	}
	if got := names(t, links); !slices.Equal(got, []string{LinkName(long, "ns", "c", b)}) {
		t.Errorf("links after a fresh manager forgot c: %v, want only b's", got)
	}
}

func TestSyncRotatesOnlyRunningLogsAtMaxSizeAndCountsUnreadableOnes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{}
	m, logs, _ := newManager(t, rt, clk, 3)
	path := func(c string) string { return filepath.Join(logs, "ns_p_uid", c, "0.log") }
	writeLog(t, path("small"), 99)
	writeLog(t, path("big"), 100)
	writeLog(t, path("exited"), 150)
	// A directory where the log should be: rotate says it is no file.
	if err := os.MkdirAll(path("odd"), 0o755); err != nil {
		t.Fatal(err)
	}
	rt.add("id-small", "p", "small", path("small"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.add("id-big", "p", "big", path("big"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.add("id-exited", "p", "exited", path("exited"), runtimeapi.ContainerState_CONTAINER_EXITED)
	rt.add("id-gone", "p", "gone", path("gone"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.add("id-odd", "p", "odd", path("odd"), runtimeapi.ContainerState_CONTAINER_RUNNING)
	failures := testutil.ToFloat64(metrics.ContainerLogRotationFailures)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rt.reopened, []string{"id-big"}) {
		t.Errorf("reopened %v, want only the running log at MaxSize", rt.reopened)
	}
	if got := testutil.ToFloat64(metrics.ContainerLogRotationFailures) - failures; got != 1 {
		t.Errorf("rotation failures grew by %v, want 1 (the directory in the log's place)", got)
	}
	if got := names(t, filepath.Join(logs, "ns_p_uid", "small")); !slices.Equal(got, []string{"0.log"}) {
		t.Errorf("files of the small log: %v", got)
	}
}

// TestSyncRemakesTheLinksRemovedSinceTheLastSync removes some of the
// links of running containers between syncs: the next sync makes them
// again, and leaves the others as they are.
func TestSyncRemakesTheLinksRemovedSinceTheLastSync(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC))
	rt := &fakeRuntime{}
	m, logs, links := newManager(t, rt, clk, 3)
	var want []string
	for _, c := range []string{"a", "b", "c", "d", "e"} {
		log := filepath.Join(logs, "ns_p_uid", c, "0.log")
		writeLog(t, log, 1)
		rt.add("id-"+c, "p", c, log, runtimeapi.ContainerState_CONTAINER_RUNNING)
		want = append(want, LinkName("p", "ns", c, "id-"+c))
	}
	repaired := testutil.ToFloat64(metrics.ContainerLogLinksRepaired)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := names(t, links); !slices.Equal(got, want) {
		t.Fatalf("links after the first sync: %v, want %v", got, want)
	}
	for _, name := range []string{want[1], want[4]} {
		if err := os.Remove(filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := names(t, links); !slices.Equal(got, want) {
		t.Errorf("links after a sync: %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(metrics.ContainerLogLinksRepaired) - repaired; got != 7 {
		t.Errorf("links repaired: %v, want 7 (five made, two made again)", got)
	}
}
