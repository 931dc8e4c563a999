package nodeapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// threeLines is app's log for the query tests; the fixture's clock is at
// 03:04:05.
const threeLines = "2026-01-02T03:04:00.000000000Z stdout F one\n" +
	"2026-01-02T03:04:01.000000000Z stderr F two\n" +
	"2026-01-02T03:04:02.500000000Z stdout F three\n"

func TestContainerLogsQuery(t *testing.T) {
	f := newAPIFixture(t)
	f.WriteLog(f.ids["app"], threeLines)
	for _, tc := range []struct {
		query string
		code  int
		body  string // the whole body when code is 200, a part of it otherwise
	}{
		{"", http.StatusOK, "one\ntwo\nthree\n"},
		{"tailLines=2", http.StatusOK, "two\nthree\n"},
		{"tailLines=1", http.StatusOK, "three\n"},
		{"tailLines=0", http.StatusOK, ""},
		{"tailLines=100", http.StatusOK, "one\ntwo\nthree\n"},
		{"limitBytes=6", http.StatusOK, "one\ntw"},
		{"limitBytes=1000", http.StatusOK, "one\ntwo\nthree\n"},
		{"tailLines=2&limitBytes=5", http.StatusOK, "two\nt"},
		{"timestamps=true", http.StatusOK, "2026-01-02T03:04:00.000000000Z one\n" +
			"2026-01-02T03:04:01.000000000Z two\n" +
			"2026-01-02T03:04:02.500000000Z three\n"},
		{"timestamps=1&tailLines=1", http.StatusOK, "2026-01-02T03:04:02.500000000Z three\n"},
		{"timestamps=false", http.StatusOK, "one\ntwo\nthree\n"},
		// sinceSeconds counts back from the server's clock, inclusive.
		{"sinceSeconds=4", http.StatusOK, "two\nthree\n"},
		{"sinceSeconds=3", http.StatusOK, "three\n"},
		{"sinceSeconds=1", http.StatusOK, ""},
		{"sinceSeconds=3600", http.StatusOK, "one\ntwo\nthree\n"},
		{"sinceTime=2026-01-02T03:04:01Z", http.StatusOK, "two\nthree\n"},
		{"sinceTime=2026-01-02T04:04:01%2B01:00", http.StatusOK, "two\nthree\n"},
		{"sinceTime=2026-01-02T03:04:02.6Z", http.StatusOK, ""},
		{"sinceTime=2026-01-02T03:04:01Z&tailLines=1", http.StatusOK, "three\n"},
		// Following a container that is not running reads to the end.
		{"follow=true&tailLines=1", http.StatusOK, "three\n"},
		{"follow=false", http.StatusOK, "one\ntwo\nthree\n"},
		{"previous=false", http.StatusOK, "one\ntwo\nthree\n"},
		{"previous=true", http.StatusOK, "app's first run\n"},

		{"tailLines=x", http.StatusBadRequest, `tailLines="x" is not an integer`},
		{"tailLines=-1", http.StatusBadRequest, "tailLines must be at least 0"},
		{"tailLines=1.5", http.StatusBadRequest, `tailLines="1.5" is not an integer`},
		{"limitBytes=0", http.StatusBadRequest, "limitBytes must be at least 1"},
		{"limitBytes=-5", http.StatusBadRequest, "limitBytes must be at least 1"},
		{"limitBytes=1k", http.StatusBadRequest, `limitBytes="1k" is not an integer`},
		{"sinceSeconds=0", http.StatusBadRequest, "sinceSeconds must be at least 1"},
		{"sinceSeconds=ten", http.StatusBadRequest, `sinceSeconds="ten" is not an integer`},
		{"sinceTime=2026-01-02", http.StatusBadRequest, `sinceTime "2026-01-02" is not an RFC 3339 time`},
		{"sinceTime=1767323045", http.StatusBadRequest, "is not an RFC 3339 time"},
		{"sinceSeconds=5&sinceTime=2026-01-02T03:04:01Z", http.StatusBadRequest, "at most one of sinceTime or sinceSeconds"},
		{"follow=yes", http.StatusBadRequest, `follow="yes" is not a boolean`},
		{"previous=2", http.StatusBadRequest, `previous="2" is not a boolean`},
		{"timestamps=on", http.StatusBadRequest, `timestamps="on" is not a boolean`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			g := NewWithT(t)
			// The container is not running when following, so that the
			// read ends; it is running otherwise.
			f.setState(f.ids["app"], !strings.Contains(tc.query, "follow=true"))
			w := f.do(http.MethodGet, "/containerLogs/ns/web/app?"+tc.query)
			g.Expect(w.Code).To(Equal(tc.code), "body: %s", w.Body.String())
			if tc.code != http.StatusOK {
				g.Expect(w.Body.String()).To(ContainSubstring(tc.body))
				return
			}
			g.Expect(w.Header().Get("Content-Type")).To(Equal("text/plain"))
			g.Expect(w.Body.String()).To(Equal(tc.body))
		})
	}
}

// setState makes the fake runtime report container id running or exited.
func (f *apiFixture) setState(id string, running bool) {
	f.rs.Lock()
	defer f.rs.Unlock()
	f.rs.Containers[id].State = runtimeapi.ContainerState_CONTAINER_EXITED
	if running {
		f.rs.Containers[id].State = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
}

func TestContainerLogsResolveTheContainer(t *testing.T) {
	f := newAPIFixture(t)
	for _, tc := range []struct {
		container, query string
		code             int
		body             string
	}{
		{"app", "", http.StatusOK, "app's second run\n"},
		{"app", "previous=true", http.StatusOK, "app's first run\n"},
		{"sidecar", "", http.StatusOK, "sidecar crashed\n"},
		{"sidecar", "previous=true", http.StatusOK, "sidecar crashed\n"},
		{"init", "", http.StatusOK, "init done\n"},
		{"debug", "", http.StatusOK, "debugged\n"},
		{"init", "previous=true", http.StatusBadRequest, `previous terminated container "init" in pod "web" not found`},
		{"pending", "", http.StatusBadRequest, `container "pending" in pod "web" is waiting to start`},
		{"nosuch", "", http.StatusNotFound, `container "nosuch" in pod "web"`},
		{"nolog", "", http.StatusBadRequest, `container "nolog" in pod "web" has no log file`},
	} {
		t.Run(tc.container+"?"+tc.query, func(t *testing.T) {
			g := NewWithT(t)
			w := f.do(http.MethodGet, "/containerLogs/ns/web/"+tc.container+"?"+tc.query)
			g.Expect(w.Code).To(Equal(tc.code), "body: %s", w.Body.String())
			if tc.code == http.StatusOK {
				g.Expect(w.Body.String()).To(Equal(tc.body))
			} else {
				g.Expect(w.Body.String()).To(ContainSubstring(tc.body))
			}
		})
	}
}

func TestContainerLogsOfAContainerTheRuntimeLost(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	f.rs.InjectError("ContainerStatus", statusNotFound())
	w := f.do(http.MethodGet, "/containerLogs/ns/web/app")
	g.Expect(w.Code).To(Equal(http.StatusNotFound), "body: %s", w.Body.String())
	g.Expect(w.Body.String()).To(ContainSubstring(`finding the log of container "app"`))
}

func TestContainerLogsOfAContainerNotOwnedAreNotServed(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	ctx := context.Background()
	// A container of the same runtime without this node's ownership label,
	// which a status written by someone else names.
	foreign, err := f.rs.FakeRuntimeService.CreateContainer(ctx, f.sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "foreign"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Labels:   map[string]string{kubetypes.KubernetesPodUIDLabel: webUID},
	}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	f.WriteLog(foreign, "2026-01-02T03:04:00.000000000Z stdout F secret\n")
	pod := &corev1.Pod{}
	g.Expect(f.pods.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, pod)).To(Succeed())
	pod.Status.ContainerStatuses[0].ContainerID = "containerd://" + foreign
	g.Expect(f.pods.Status().Update(ctx, pod)).To(Succeed())

	// The status is not what names the container: the log is app's own.
	w := f.do(http.MethodGet, "/containerLogs/ns/web/app")
	g.Expect(w.Code).To(Equal(http.StatusOK), "body: %s", w.Body.String())
	g.Expect(w.Body.String()).To(Equal("app's second run\n"))
	w = f.do(http.MethodGet, "/containerLogs/ns/web/app?previous=true")
	g.Expect(w.Body.String()).To(Equal("app's first run\n"))
}

// Whoever may write a pod's status may name any container of the node in
// it: another pod's on this node, or one of another container of the same
// pod. The log read is still the one of the named pod's named container.
func TestContainerLogsIgnoreTheStatus(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	ctx := context.Background()
	other := f.RunSandbox("uid-other", "other")
	victim := f.Container(other, "uid-other", "app", 0, true, "the other pod's secret")
	pod := &corev1.Pod{}
	g.Expect(f.pods.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, pod)).To(Succeed())
	for i := range pod.Status.ContainerStatuses {
		st := &pod.Status.ContainerStatuses[i]
		st.ContainerID = "containerd://" + victim
		st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ContainerID: "containerd://" + victim}
	}
	g.Expect(f.pods.Status().Update(ctx, pod)).To(Succeed())

	for _, tc := range []struct {
		target string
		code   int
		body   string
	}{
		{"/containerLogs/ns/web/app", http.StatusOK, "app's second run\n"},
		{"/containerLogs/ns/web/app?previous=true", http.StatusOK, "app's first run\n"},
		{"/containerLogs/ns/web/sidecar", http.StatusOK, "sidecar crashed\n"},
		{"/containerLogs/ns/web/nolog?previous=true", http.StatusBadRequest, `previous terminated container "nolog" in pod "web" not found`},
		{"/containerLogs/ns/web/pending", http.StatusBadRequest, `container "pending" in pod "web" is waiting to start`},
	} {
		w := f.do(http.MethodGet, tc.target)
		g.Expect(w.Body.String()).NotTo(ContainSubstring("secret"), tc.target)
		g.Expect(w.Code).To(Equal(tc.code), "%s: %s", tc.target, w.Body.String())
		g.Expect(w.Body.String()).To(ContainSubstring(tc.body), tc.target)
	}
}

func TestContainerLogsAreSentChunkedInFull(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	// More than the write buffer, so that it is written in several parts.
	var log, want strings.Builder
	for i := range 3000 {
		line := fmt.Sprintf("line %04d %s", i, strings.Repeat("x", 40))
		fmt.Fprintf(&log, "2026-01-02T03:04:00.000000000Z stdout F %s\n", line)
		want.WriteString(line + "\n")
	}
	g.Expect(want.Len()).To(BeNumerically(">", logBufferSize))
	f.WriteLog(f.ids["app"], log.String())
	srv := httptest.NewServer(f.server().Handler())
	defer srv.Close()

	for _, query := range []string{"", "tailLines=1"} {
		resp, err := http.Get(srv.URL + "/containerLogs/ns/web/app?" + query)
		g.Expect(err).NotTo(HaveOccurred())
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(resp.ContentLength).To(BeEquivalentTo(-1), "no Content-Length")
		g.Expect(resp.TransferEncoding).To(Equal([]string{"chunked"}))
		if query == "" {
			g.Expect(string(body)).To(Equal(want.String()))
		} else {
			g.Expect(string(body)).To(Equal("line 2999 " + strings.Repeat("x", 40) + "\n"))
		}
	}
}

// followApp starts a node API over a fixture whose container app logged
// one line, "first", and follows app's log; it returns the fixture, the
// log file and the stream.
func followApp(t *testing.T) (*apiFixture, string, *bufio.Reader) {
	t.Helper()
	g := NewWithT(t)
	f := newAPIFixture(t)
	path := f.WriteLog(f.ids["app"], "2026-01-02T03:04:00.000000000Z stdout F first\n")
	srv := httptest.NewServer(f.server().Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/containerLogs/ns/web/app?follow=true", http.NoBody)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = resp.Body.Close() })
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	return f, path, bufio.NewReader(resp.Body)
}

func TestFollowedLogsArriveLineByLine(t *testing.T) {
	g := NewWithT(t)
	f, path, r := followApp(t)
	ctx := t.Context()
	line, err := r.ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("first\n"), "before the log grows")

	appendLog := func(line string) {
		file, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = file.WriteString("2026-01-02T03:04:01.000000000Z stdout F " + line + "\n")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(file.Close()).To(Succeed())
	}
	appendLog("second")
	line, err = r.ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("second\n"), "while the container runs")

	appendLog("last")
	g.Expect(f.Client.StopContainer(ctx, f.ids["app"], 0)).To(Succeed())
	rest, err := io.ReadAll(r)
	g.Expect(err).NotTo(HaveOccurred(), "the stream ends once the container stopped")
	g.Expect(string(rest)).To(Equal("last\n"))
}

// TestFollowedLogsContinueAcrossRotation renames the followed log as a
// rotation does and makes a new one where the runtime writes next: the
// follower gets what went to the old file before the rename and then the
// new file's lines; a read without follow reads the new file.
func TestFollowedLogsContinueAcrossRotation(t *testing.T) {
	g := NewWithT(t)
	f, path, r := followApp(t)
	ctx := t.Context()
	line, err := r.ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("first\n"))

	appendTo := func(path, line string) {
		file, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = file.WriteString("2026-01-02T03:04:01.000000000Z stdout F " + line + "\n")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(file.Close()).To(Succeed())
	}
	// A second line makes sure the reader watches the directory: the
	// reader of k8s.io/cri-client starts watching at its first end of
	// file and misses a file made before that.
	appendTo(path, "second")
	line, err = r.ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("second\n"))
	// On a loaded machine the reader may have read both lines without
	// reaching the end of the file in between: give it the time to reach
	// it and watch the directory before the first rotation.
	time.Sleep(2 * time.Second)

	rotated := path + ".20260102-030402"
	for i := range 2 {
		// Written to the old file, renamed; the runtime reopens the log
		// and writes to the new file.
		appendTo(path, fmt.Sprintf("before rotation %d", i))
		g.Expect(os.Rename(path, rotated)).To(Succeed())
		appendTo(path, fmt.Sprintf("after rotation %d", i))
		for _, want := range []string{"before rotation %d\n", "after rotation %d\n"} {
			line, err := r.ReadString('\n')
			g.Expect(err).NotTo(HaveOccurred(), "rotation %d, %q", i, want)
			g.Expect(line).To(Equal(fmt.Sprintf(want, i)))
		}
		g.Expect(os.Remove(rotated)).To(Succeed())
	}
	g.Expect(f.do(http.MethodGet, "/containerLogs/ns/web/app?tailLines=1").Body.String()).To(Equal("after rotation 1\n"))

	appendTo(path, "last")
	g.Expect(f.Client.StopContainer(ctx, f.ids["app"], 0)).To(Succeed())
	rest, err := io.ReadAll(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(rest)).To(Equal("last\n"))
}
