package nodeapi

import (
	"errors"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
		{"GET", "/portForward/ns/p", "create", []string{"proxy"}},
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

func TestLogContainer(t *testing.T) {
	ctr := func(id string, created int64, attempt uint32, state runtimeapi.ContainerState) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, CreatedAt: created, State: state,
			Metadata: &runtimeapi.ContainerMetadata{Name: "c", Attempt: attempt}}
	}
	const (
		running = runtimeapi.ContainerState_CONTAINER_RUNNING
		exited  = runtimeapi.ContainerState_CONTAINER_EXITED
		created = runtimeapi.ContainerState_CONTAINER_CREATED
		unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	)
	for _, tc := range []struct {
		name     string
		found    []*runtimeapi.Container
		previous bool
		restarts bool
		want     string
		wantErr  string
	}{
		{name: "one running", found: []*runtimeapi.Container{ctr("a", 1, 0, running)}, want: "a"},
		{name: "newest of several, in any order", found: []*runtimeapi.Container{
			ctr("second", 2, 1, exited), ctr("third", 3, 2, running), ctr("first", 1, 0, exited)}, want: "third"},
		{name: "previous is the one before", found: []*runtimeapi.Container{
			ctr("second", 2, 1, exited), ctr("third", 3, 2, running), ctr("first", 1, 0, exited)}, previous: true, want: "second"},
		{name: "crash looping reads the last run", found: []*runtimeapi.Container{
			ctr("first", 1, 0, exited), ctr("second", 2, 1, exited)}, restarts: true, want: "second"},
		{name: "crash looping, previous is the last run too", found: []*runtimeapi.Container{
			ctr("first", 1, 0, exited), ctr("second", 2, 1, exited)}, restarts: true, previous: true, want: "second"},
		{name: "exited for good, previous is the run before", found: []*runtimeapi.Container{
			ctr("first", 1, 0, exited), ctr("second", 2, 1, exited)}, previous: true, want: "first"},
		{name: "exited for good once, no previous", found: []*runtimeapi.Container{
			ctr("first", 1, 0, exited)}, previous: true, wantErr: `previous terminated container "c" in pod "p" not found`},
		{name: "running and restarting, previous is the run before", found: []*runtimeapi.Container{
			ctr("first", 1, 0, exited), ctr("second", 2, 1, running)}, restarts: true, previous: true, want: "first"},
		{name: "a created container is not started yet", found: []*runtimeapi.Container{
			ctr("old", 1, 0, exited), ctr("new", 2, 1, created)}, want: "old"},
		{name: "previous skips a created container", found: []*runtimeapi.Container{
			ctr("old", 1, 0, exited), ctr("new", 2, 1, created)}, previous: true,
			wantErr: `previous terminated container "c" in pod "p" not found`},
		{name: "same creation time: the higher attempt", found: []*runtimeapi.Container{
			ctr("a0", 5, 0, exited), ctr("a1", 5, 1, running)}, want: "a1"},
		{name: "an unknown state still has a log", found: []*runtimeapi.Container{ctr("u", 1, 0, unknown)}, want: "u"},
		{name: "no previous", found: []*runtimeapi.Container{ctr("a", 1, 0, running)}, previous: true,
			wantErr: `previous terminated container "c" in pod "p" not found`},
		{name: "only created", found: []*runtimeapi.Container{ctr("n", 1, 0, created)},
			wantErr: `container "c" in pod "p" is waiting to start: ContainerCreating`},
		{name: "none", wantErr: `container "c" in pod "p" is waiting to start`},
		{name: "none, previous", previous: true, wantErr: `previous terminated container "c" in pod "p" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			id, err := LogContainer(tc.found, "p", "c", tc.previous, tc.restarts)
			if tc.wantErr != "" {
				g.Expect(errors.Is(err, errBadRequest)).To(BeTrue(), "got %v", err)
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
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
