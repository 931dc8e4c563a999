package server

import (
	"errors"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		verb         string
		subs         []string
	}{
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"POST", "/stats/summary", "create", []string{"stats"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/metrics/probes", "get", []string{"metrics"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/containerLogs/ns/p/c", "get", []string{"proxy"}},
		{"POST", "/exec/ns/p/c", "create", []string{"proxy"}},
		{"GET", "/portForward/ns/p", "get", []string{"proxy"}},
		{"GET", "/statsfoo", "get", []string{"proxy"}},
		{"DELETE", "/pods", "delete", []string{"pods", "proxy"}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			g := NewWithT(t)
			a := RequestAttributes(tc.method, tc.path)
			g.Expect(a.Verb).To(Equal(tc.verb))
			g.Expect(a.Subresources).To(Equal(tc.subs))
		})
	}
}

func TestParseLogRequest(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		query   string
		check   func(g Gomega, r LogRequest)
		wantErr bool
	}{
		{name: "none", query: "", check: func(g Gomega, r LogRequest) {
			g.Expect(r.Options.Follow).To(BeFalse())
			g.Expect(r.Options.TailLines).To(BeNil())
			g.Expect(r.Options.LimitBytes).To(BeNil())
			g.Expect(r.Options.Since.IsZero()).To(BeTrue())
		}},
		{name: "all flags", query: "follow=true&previous=true&timestamps=true&tailLines=5&limitBytes=10", check: func(g Gomega, r LogRequest) {
			g.Expect(r.Options.Follow).To(BeTrue())
			g.Expect(r.Previous).To(BeTrue())
			g.Expect(r.Options.Timestamp).To(BeTrue())
			g.Expect(*r.Options.TailLines).To(BeEquivalentTo(5))
			g.Expect(*r.Options.LimitBytes).To(BeEquivalentTo(10))
		}},
		{name: "tail zero", query: "tailLines=0", check: func(g Gomega, r LogRequest) { g.Expect(*r.Options.TailLines).To(BeZero()) }},
		{name: "since seconds", query: "sinceSeconds=10", check: func(g Gomega, r LogRequest) {
			g.Expect(r.Options.Since).To(Equal(now.Add(-10 * time.Second)))
		}},
		{name: "since time", query: "sinceTime=2026-01-02T03:00:00Z", check: func(g Gomega, r LogRequest) {
			g.Expect(r.Options.Since).To(Equal(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)))
		}},
		{name: "both since", query: "sinceSeconds=1&sinceTime=2026-01-02T03:00:00Z", wantErr: true},
		{name: "negative tail", query: "tailLines=-1", wantErr: true},
		{name: "zero limit", query: "limitBytes=0", wantErr: true},
		{name: "bad bool", query: "follow=yes", wantErr: true},
		{name: "bad time", query: "sinceTime=yesterday", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			q, err := url.ParseQuery(tc.query)
			g.Expect(err).NotTo(HaveOccurred())
			r, err := ParseLogRequest(q, now)
			if tc.wantErr {
				g.Expect(errors.Is(err, errBadRequest)).To(BeTrue(), "got %v", err)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, r)
		})
	}
}

func TestLogContainerID(t *testing.T) {
	pod := func(st ...corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}, {Name: "other"}}},
			Status:     corev1.PodStatus{ContainerStatuses: st},
		}
	}
	running := corev1.ContainerStatus{Name: "c", ContainerID: "containerd://new",
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://old"}}}
	fresh := corev1.ContainerStatus{Name: "c", ContainerID: "containerd://new",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	backingOff := corev1.ContainerStatus{Name: "c",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://old"}}}
	creating := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	debugged := pod(fresh)
	debugged.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger"}}}
	debugged.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "debugger", ContainerID: "containerd://dbg",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://dbg", ExitCode: 1}}}}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		container string
		previous  bool
		want      string
		wantErr   error
	}{
		{"current", pod(running), "c", false, "new", nil},
		{"previous", pod(running), "c", true, "old", nil},
		{"no previous", pod(fresh), "c", true, "", errBadRequest},
		{"crash looping reads the last run", pod(backingOff), "c", false, "old", nil},
		{"creating", pod(creating), "c", false, "", errBadRequest},
		{"no status yet", pod(), "other", false, "", errBadRequest},
		{"unknown container", pod(running), "nope", false, "", errNotFound},
		{"ephemeral container that exited", debugged, "debugger", false, "dbg", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			id, err := LogContainerID(tc.pod, tc.container, tc.previous)
			if tc.wantErr != nil {
				g.Expect(errors.Is(err, tc.wantErr)).To(BeTrue(), "got %v", err)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id).To(Equal(tc.want))
		})
	}
}

func TestParseStreamOptions(t *testing.T) {
	for _, tc := range []struct {
		query   string
		want    StreamOptions
		wantErr bool
	}{
		{"output=1", StreamOptions{Stdout: true}, false},
		{"input=1&output=1&error=1", StreamOptions{Stdin: true, Stdout: true, Stderr: true}, false},
		{"input=true&output=1&error=1&tty=1", StreamOptions{Stdin: true, Stdout: true, TTY: true}, false},
		{"tty=1", StreamOptions{}, true},
		{"", StreamOptions{}, true},
	} {
		t.Run(tc.query, func(t *testing.T) {
			g := NewWithT(t)
			q, _ := url.ParseQuery(tc.query)
			o, err := ParseStreamOptions(q)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o).To(Equal(tc.want))
		})
	}
}

func TestHostParsers(t *testing.T) {
	g := NewWithT(t)
	busy, err := ParseProcStatCPU([]byte("cpu  100 10 50 1000 20 5 5 1 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\nbtime 1700000000\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(busy).To(BeEquivalentTo((100 + 10 + 50 + 5 + 5 + 1) * 10_000_000))
	boot, err := ParseBootTime([]byte("cpu 1 2 3 4\nbtime 1700000000\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(boot).To(BeEquivalentTo(1700000000))
	_, err = ParseProcStatCPU([]byte("intr 1\n"))
	g.Expect(err).To(HaveOccurred())

	mem, err := ParseHostMemory([]byte("MemTotal: 1000 kB\nMemFree: 200 kB\nMemAvailable: 600 kB\nInactive(file): 300 kB\nAnonPages: 100 kB\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mem).To(Equal(HostMemory{Capacity: 1024000, Usage: 819200, WorkingSet: 512000, Available: 512000, RSS: 102400}))
	_, err = ParseHostMemory([]byte("MemFree: 1 kB\n"))
	g.Expect(err).To(HaveOccurred())

	dev, err := ParseNetDev([]byte(`Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0
  eth0: 2000 20 3 0 0 0 0 0 4000 40 5 0 0 0 0 0
`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dev).To(Equal([]NetDev{{Name: "eth0", RxBytes: 2000, RxErrors: 3, TxBytes: 4000, TxErrs: 5}}))
}
