package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
	kubetypes "k8s.io/kubelet/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// bigLogBytes is the size of the log kubectl logs reads.
	bigLogBytes = 10 * mib
	// logRuns is how often the big log is read each way.
	logRuns = 3
	// execRuns is how many kubectl exec -- true are timed.
	execRuns = 20
	// followWindow is how long nodelet's CPU is measured with and without
	// a follower of a container writing 1 MiB/s.
	followWindow = 20 * time.Second
)

// BenchmarkNodeAPI measures the node API through the API server with the
// envtest-built kubectl, against the floor of the same work done straight
// on the node: the log file read with cri-client's reader, ExecSync
// through the CRI, and the log followed with the same reader.
func BenchmarkNodeAPI(b *testing.B) {
	c := startCluster(b)
	floor := newCRIFloor(b, c.ctrd)
	for i := range b.N {
		ctx := b.Context()
		n, stopNodelet := c.startNodelet(b, fmt.Sprintf("nodeapi-%d", i))
		ns := c.newNamespace(b, fmt.Sprintf("bench-nodeapi-%d", i))
		// 127-character lines, then a marker: 10 MiB of log text.
		line := strings.Repeat("x", 126)
		bigLog := c.runPod(b, ns, "biglog", fmt.Sprintf("yes %s | head -c %d; echo done-writing; sleep 3600", line, bigLogBytes))
		writer := c.runPod(b, ns, "writer", fmt.Sprintf("while true; do yes %s | head -c %d; sleep 1; done", line, mib))
		shell := c.runPod(b, ns, "shell", "sleep 3600")

		logPath := filepath.Join(n.PodLogsDir, fmt.Sprintf("%s_%s_%s", ns, bigLog.Name, bigLog.UID), "main", "0.log")
		waitForLogLine(b, logPath, "done-writing")

		var apiFirst, apiTotal, fileFirst, fileTotal, kubectlAlone []time.Duration
		var apiBytes, fileBytes int64
		var logsCPU time.Duration
		for range logRuns {
			before, err := n.Usage()
			if err != nil {
				b.Fatal(err)
			}
			first, total, size := c.timeKubectl(b, "logs", "-n", ns, bigLog.Name)
			after, err := n.Usage()
			if err != nil {
				b.Fatal(err)
			}
			logsCPU += after.CPU - before.CPU
			apiFirst, apiTotal, apiBytes = append(apiFirst, first), append(apiTotal, total), size
			first, total, size = timeReadLogs(b, logPath)
			fileFirst, fileTotal, fileBytes = append(fileFirst, first), append(fileTotal, total), size
		}
		if apiBytes != fileBytes || apiBytes < bigLogBytes {
			b.Fatalf("kubectl logs read %d bytes, the file reader %d; want both %d and more", apiBytes, fileBytes, bigLogBytes)
		}

		// What kubectl itself costs: starting and printing its version.
		for range logRuns {
			_, total, _ := c.timeKubectl(b, "version", "--client")
			kubectlAlone = append(kubectlAlone, total)
		}

		var execs, execFloor []time.Duration
		shellID := containerID(b, floor, shell)
		for range execRuns {
			_, total, _ := c.timeKubectl(b, "exec", "-n", ns, shell.Name, "--", "true")
			execs = append(execs, total)
			t0 := time.Now()
			if _, _, err := floor.rs.ExecSync(ctx, shellID, []string{"true"}, 10*time.Second); err != nil {
				b.Fatalf("ExecSync true: %v", err)
			}
			execFloor = append(execFloor, time.Since(t0))
		}

		idle := cpuOver(b, n, followWindow)
		follower := c.followWithKubectl(b, ns, writer.Name)
		following := cpuOver(b, n, followWindow)
		streamed := follower.stop()
		fileFollow, fileStreamed := followFileCPU(b, filepath.Join(n.PodLogsDir, fmt.Sprintf("%s_%s_%s", ns, writer.Name, writer.UID), "main", "0.log"),
			containerID(b, floor, writer), floor, followWindow)
		stopNodelet()

		mibps := func(n int64, d time.Duration) string { return fmt.Sprintf("%.1f MiB/s", float64(n)/mib/d.Seconds()) }
		apiP50, fileP50 := percentile(apiTotal, 50), percentile(fileTotal, 50)
		printTable(fmt.Sprintf("node API through the API server (node %s, %s)", benchNode, machine()), []row{
			{"kubectl logs 10 MiB: time to first byte p50", fmtDur(percentile(apiFirst, 50)), "", ""},
			{"  floor: file read with cri-client, first byte p50", fmtShort(percentile(fileFirst, 50)), "", ""},
			{"kubectl logs 10 MiB: total p50 / throughput", fmtDur(apiP50) + " / " + mibps(apiBytes, apiP50), "", ""},
			{"  floor: file read with cri-client, total p50 / throughput", fmtDur(fileP50) + " / " + mibps(fileBytes, fileP50), "", ""},
			{"kubectl logs 10 MiB: nodelet CPU per read", fmtShort(logsCPU / logRuns), "", ""},
			{"  (kubectl version --client alone p50)", fmtDur(percentile(kubectlAlone, 50)), "", ""},
			{fmt.Sprintf("kubectl exec -- true p50 (%d runs)", execRuns), fmtDur(percentile(execs, 50)), "", ""},
			{"  floor: CRI ExecSync true p50", fmtDur(percentile(execFloor, 50)), "", ""},
			{"nodelet CPU, container writing 1 MiB/s, no follower", fmtCPU(idle, followWindow), "", ""},
			{"nodelet CPU, same, one kubectl logs -f", fmtCPU(following, followWindow) + fmt.Sprintf(" (%.1f MiB streamed)", float64(streamed)/mib), "", ""},
			{"  floor: following the file with cri-client in-process", fmtCPU(fileFollow, followWindow) + fmt.Sprintf(" (%.1f MiB read)", float64(fileStreamed)/mib), "", ""},
		})
		b.ReportMetric(percentile(apiFirst, 50).Seconds()*1000, "ms-logs-ttfb")
		b.ReportMetric(float64(apiBytes)/mib/apiP50.Seconds(), "MiB/s-logs")
		b.ReportMetric(percentile(execs, 50).Seconds()*1000, "ms-p50-exec")
		b.ReportMetric(percentile(execFloor, 50).Seconds()*1000, "ms-p50-execsync-floor")
		b.ReportMetric((following-idle).Seconds()/followWindow.Seconds()*100, "%cpu-follow")
	}
}

// fmtShort is fmtDur with a fraction below ten milliseconds.
func fmtShort(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmtDur(d)
}

func fmtCPU(d, window time.Duration) string {
	return fmt.Sprintf("%.2fs in %s (%.1f%% of a core)", d.Seconds(), window, d.Seconds()/window.Seconds()*100)
}

// runPod starts a busybox pod running script and waits until it runs.
func (c *cluster) runPod(b *testing.B, ns, name, script string) *corev1.Pod {
	b.Helper()
	pod := sleeperPod(ns, name)
	pod.Spec.Containers[0].Command = []string{"sh", "-c", script}
	created, err := c.admin.CoreV1().Pods(ns).Create(b.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("creating pod %s: %v", name, err)
	}
	deadline := time.Now().Add(podsTimeout)
	for {
		p, err := c.admin.CoreV1().Pods(ns).Get(b.Context(), name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			return created
		}
		if time.Now().After(deadline) {
			b.Fatalf("pod %s not running after %s (last error %v)", name, podsTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForLogLine waits until the CRI log file at path ends with a line
// holding marker.
func waitForLogLine(b *testing.B, path, marker string) {
	b.Helper()
	deadline := time.Now().Add(podsTimeout)
	for time.Now().Before(deadline) {
		f, err := os.Open(path)
		if err == nil {
			st, _ := f.Stat()
			buf := make([]byte, 512)
			off := max(st.Size()-int64(len(buf)), 0)
			k, _ := f.ReadAt(buf, off)
			_ = f.Close()
			if bytes.Contains(buf[:k], []byte(marker)) {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatalf("log %s has no %q after %s", path, marker, podsTimeout)
}

// firstByteWriter counts what is written and notes when the first byte came.
type firstByteWriter struct {
	start time.Time
	first atomic.Int64
	n     atomic.Int64
}

func (w *firstByteWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.first.CompareAndSwap(0, int64(time.Since(w.start)))
	}
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// timeKubectl runs kubectl as the admin and returns the time to its first
// byte of output, its total time and the bytes it printed.
func (c *cluster) timeKubectl(b *testing.B, args ...string) (first, total time.Duration, size int64) {
	b.Helper()
	cmd, err := c.api.Kubectl(b.Context(), args...)
	if err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	w := &firstByteWriter{start: time.Now()}
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("kubectl %v: %v: %s", args, err, stderr.String())
	}
	return time.Duration(w.first.Load()), time.Since(w.start), w.n.Load()
}

// timeReadLogs reads a CRI log file with cri-client's reader, as nodelet
// does, into nothing.
func timeReadLogs(b *testing.B, path string) (first, total time.Duration, size int64) {
	b.Helper()
	w := &firstByteWriter{start: time.Now()}
	if err := logs.ReadLogs(b.Context(), path, "", &logs.LogOptions{}, nil, w, w); err != nil {
		b.Fatalf("reading %s: %v", path, err)
	}
	return time.Duration(w.first.Load()), time.Since(w.start), w.n.Load()
}

func containerID(b *testing.B, f *criFloor, pod *corev1.Pod) string {
	b.Helper()
	found, err := f.rs.ListContainers(b.Context(), &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{kubetypes.KubernetesPodUIDLabel: string(pod.UID)},
	})
	if err != nil || len(found) != 1 {
		b.Fatalf("finding the container of %s: %v (%d found)", pod.Name, err, len(found))
	}
	return found[0].GetId()
}

// cpuOver returns nodelet's CPU time over the next window.
func cpuOver(b *testing.B, n *utils.Nodelet, window time.Duration) time.Duration {
	b.Helper()
	before, err := n.Usage()
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(window)
	after, err := n.Usage()
	if err != nil {
		b.Fatal(err)
	}
	return after.CPU - before.CPU
}

type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
	w      *firstByteWriter
}

func (f *follower) stop() int64 {
	f.cancel()
	<-f.done
	return f.w.n.Load()
}

// followWithKubectl starts kubectl logs -f on pod's log.
func (c *cluster) followWithKubectl(b *testing.B, ns, pod string) *follower {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	cmd, err := c.api.Kubectl(ctx, "logs", "-f", "--tail=0", "-n", ns, pod)
	if err != nil {
		b.Fatal(err)
	}
	f := &follower{cancel: cancel, done: make(chan struct{}), w: &firstByteWriter{start: time.Now()}}
	cmd.Stdout, cmd.Stderr = f.w, io.Discard
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting kubectl logs -f: %v", err)
	}
	go func() { _ = cmd.Wait(); close(f.done) }()
	return f
}

// followFileCPU follows the log at path with cri-client's reader in this
// process for window and returns this process's CPU time meanwhile (the
// benchmark does nothing else then) and the bytes read.
func followFileCPU(b *testing.B, path, id string, f *criFloor, window time.Duration) (time.Duration, int64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), window)
	defer cancel()
	before, err := utils.ProcessUsage(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	w := &firstByteWriter{start: time.Now()}
	// Errors end the read when the window closes; the bytes tell the rest.
	_ = logs.ReadLogs(ctx, path, id, &logs.LogOptions{Follow: true, TailLines: ptr.To[int64](0)}, f.rs, w, w)
	<-ctx.Done()
	after, err := utils.ProcessUsage(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	return after.CPU - before.CPU, w.n.Load()
}
