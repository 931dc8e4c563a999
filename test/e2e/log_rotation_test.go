package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// logRotationNode is the node the log rotation specs' nodelet runs.
	logRotationNode = "e2e-log-rotation"
	// The node's log settings: rotate at 1 MiB, keep 3 files, look every
	// 3 s (the least allowed).
	logMaxSize  = 1 << 20
	logMaxFiles = 3
	logInterval = 3 * time.Second
	// The writer writes logBurst numbered lines of about 1 KiB, then
	// sleeps a second, logSeconds times: about 1 MiB/s for a minute, then
	// it sleeps on.
	logBurst   = 1024
	logSeconds = 60
	// logRate bounds what the writer puts in its log per second: 1 MiB of
	// lines plus the runtime's timestamp and stream prefix of each.
	logRate = 11 * (1 << 20) / 10
	// logSlack is how late a rotation may come after a monitor tick, and
	// how long it takes.
	logSlack = 2 * time.Second
)

var _ = Describe("Container log rotation", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: logRotationNode, API: apiServer, Containerd: ctrd, Config: map[string]any{
			"containerLogMaxSize":         "1Mi",
			"containerLogMaxFiles":        logMaxFiles,
			"containerLogMonitorInterval": logInterval.String(),
		}}
	})

	// lineNumber is the number a writer's line starts with, or -1.
	lineNumber := func(line string) int {
		n, err := strconv.Atoi(strings.SplitN(line, " ", 2)[0])
		if err != nil {
			return -1
		}
		return n
	}
	// tailLine reads the last line of a CRI log file (its message), "" for
	// an empty file.
	cri := regexp.MustCompile(`^\S+ (stdout|stderr) [FP] `)
	lastLineOnDisk := func(path string) string {
		data, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		return cri.ReplaceAllString(lines[len(lines)-1], "")
	}

	It("keeps a fast writer's log within maxFiles files, readable and followable through the API server, and links it while it lives", func(ctx SpecContext) {
		admin := env.Admin
		cs, err := kubernetes.NewForConfig(apiServer.Config)
		Expect(err).NotTo(HaveOccurred())
		ns := utils.NewNamespace(ctx, admin)
		script := fmt.Sprintf(`pad=$(head -c 1000 /dev/zero | tr '\0' x); i=0; s=0
while [ $s -lt %d ]; do j=0; while [ $j -lt %d ]; do i=$((i+1)); echo "$i $pad"; j=$((j+1)); done; s=$((s+1)); sleep 1; done
sleep 3600`, logSeconds, logBurst)
		pod := utils.BusyboxPod(ns, "writer", logRotationNode, "sh", "-c", script)
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		Expect(admin.Create(ctx, pod)).To(Succeed())
		running := utils.WaitForPod(ctx, admin, ns, "writer", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).NotTo(BeEmpty())
		})
		id := strings.TrimPrefix(running.Status.ContainerStatuses[0].ContainerID, "containerd://")
		logDir := filepath.Join(env.Nodelet.PodLogsDir, ns+"_writer_"+string(running.UID), "main")
		current := filepath.Join(logDir, "0.log")
		link := filepath.Join(env.Nodelet.ContainerLogLinksDir, "writer_"+ns+"_main-"+id+".log")

		By("linking the log where log shippers look")
		Eventually(func(g Gomega) {
			target, err := os.Readlink(link)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(target).To(Equal(current))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())

		By("following the log through the API server")
		stream, err := cs.CoreV1().Pods(ns).GetLogs("writer", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stream.Close)
		var (
			mu             sync.Mutex
			followed, gaps int
			followedLines  int
		)
		followDone := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(followDone)
			sc := bufio.NewScanner(stream)
			sc.Buffer(make([]byte, 64<<10), 64<<10)
			for sc.Scan() {
				n := lineNumber(sc.Text())
				mu.Lock()
				if followed != 0 && n != followed+1 {
					gaps++
				}
				followed = n
				followedLines++
				mu.Unlock()
			}
		}()
		lastFollowed := func() int {
			mu.Lock()
			defer mu.Unlock()
			return followed
		}

		By("sampling the log files every second while the writer writes")
		// A file grows until the first monitor tick after it reached
		// maxSize: by at most one interval of writing (plus the slack of
		// a late tick) past maxSize. Only the current log and the newest
		// rotated one are uncompressed; at most maxFiles files exist, but
		// for a compression's temporary file.
		perFile := int64(logMaxSize) + int64(logRate)*int64((logInterval+logSlack)/time.Second)
		var maxTotal int64
		rotated := map[string]bool{}
		compressed := false
		rotationsSeenByFollow := 0
		start := time.Now()
		for i := 0; time.Since(start) < logSeconds*time.Second; i++ {
			entries, err := os.ReadDir(logDir)
			Expect(err).NotTo(HaveOccurred())
			var total int64
			files, uncompressed := 0, 0
			for _, e := range entries {
				fi, err := e.Info()
				if err != nil {
					continue // rotated or compressed meanwhile
				}
				total += fi.Size()
				if strings.HasSuffix(e.Name(), ".tmp") {
					continue
				}
				files++
				Expect(fi.Size()).To(BeNumerically("<=", perFile), "file %s", e.Name())
				if strings.HasSuffix(e.Name(), ".gz") {
					compressed = true
				} else {
					uncompressed++
				}
				if e.Name() != "0.log" && !rotated[strings.TrimSuffix(e.Name(), ".gz")] {
					rotated[strings.TrimSuffix(e.Name(), ".gz")] = true
					if lastFollowed() > 0 {
						rotationsSeenByFollow++
					}
				}
			}
			Expect(files).To(BeNumerically("<=", logMaxFiles), "files %v", entries)
			Expect(uncompressed).To(BeNumerically("<=", 2), "files %v", entries)
			maxTotal = max(maxTotal, total)

			if i%5 == 4 {
				// The newest lines, through the API server: within three
				// seconds of writing of the newest on disk, read after.
				var apiLast int
				Eventually(func(g Gomega) {
					out, err := cs.CoreV1().Pods(ns).GetLogs("writer", &corev1.PodLogOptions{TailLines: ptr.To[int64](5)}).DoRaw(ctx)
					g.Expect(err).NotTo(HaveOccurred())
					lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
					apiLast = lineNumber(lines[len(lines)-1])
					g.Expect(apiLast).To(BeNumerically(">", 0))
				}).WithTimeout(apiTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
				diskLast := lineNumber(lastLineOnDisk(current))
				if diskLast > 0 {
					Expect(apiLast).To(BeNumerically(">=", diskLast-3*logBurst), "newest line through the API server vs. on disk")
				}
			}
			time.Sleep(time.Second)
		}
		GinkgoWriter.Printf("log files: at most %d bytes in all (bound %d per file), %d rotations, followed %d lines with %d gaps\n",
			maxTotal, perFile, len(rotated), followedLines, gaps)
		Expect(compressed).To(BeTrue(), "a rotated file was compressed")
		Expect(len(rotated)).To(BeNumerically(">=", logSeconds/int(logInterval/time.Second)/2), "rotations in a minute")

		By("having delivered every line to the follower, across the rotations")
		final := logSeconds * logBurst
		Eventually(lastFollowed).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Equal(final))
		Expect(rotationsSeenByFollow).To(BeNumerically(">=", 2), "rotations while following")
		out, err := cs.CoreV1().Pods(ns).GetLogs("writer", &corev1.PodLogOptions{TailLines: ptr.To[int64](1)}).DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		if len(out) == 0 {
			// Rotated after the last write: a tail reads the current file
			// only, as the kubelet's does, and it is empty.
			Expect(lastLineOnDisk(current)).To(BeEmpty(), "the tail through the API server was empty")
		} else {
			Expect(lineNumber(string(out))).To(Equal(final), "the newest line through the API server")
		}
		metrics, err := env.Nodelet.Metrics(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(metrics).To(MatchRegexp(`(?m)^nodelet_container_log_rotations_total [1-9]`))

		By("removing the link with the pod")
		Expect(admin.Delete(ctx, running)).To(Succeed())
		Eventually(func(g Gomega) {
			err := admin.Get(ctx, client.ObjectKeyFromObject(running), &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod deleted: %v", err)
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		Eventually(func() error { _, err := os.Lstat(link); return err }).
			WithTimeout(apiTimeout).WithPolling(pollInterval).Should(MatchError(os.ErrNotExist))
		select {
		case <-followDone:
		case <-time.After(apiTimeout):
			Fail("the follow stream did not end with the container")
		}
	}, SpecTimeout(4*time.Minute))
})
