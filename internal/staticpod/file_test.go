package staticpod

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// manifestOf is a pod manifest named name running image.
func manifestOf(name, image string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec: {containers: [{name: c, image: \"" + image + "\"}]}\n"
}

// recorder collects what a source hands out.
type recorder struct {
	mu       sync.Mutex
	updates  [][]*corev1.Pod
	problems []Problem
	changed  chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 100)} }

func (r *recorder) update(pods []*corev1.Pod) {
	r.mu.Lock()
	r.updates = append(r.updates, pods)
	r.mu.Unlock()
	r.changed <- struct{}{}
}

func (r *recorder) report(p Problem) {
	r.mu.Lock()
	r.problems = append(r.problems, p)
	r.mu.Unlock()
	r.changed <- struct{}{}
}

// state is the pod names of the last update, how many updates and problems there were.
func (r *recorder) state() (last string, updates int, problems []Problem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.updates) > 0 {
		var names []string
		for _, p := range r.updates[len(r.updates)-1] {
			names = append(names, p.Name)
		}
		last = strings.Join(names, ",")
	}
	return last, len(r.updates), append([]Problem(nil), r.problems...)
}

// waitFor waits until the last update has these pod names.
func (r *recorder) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if last, n, _ := r.state(); n > 0 && last == want {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			last, n, problems := r.state()
			t.Fatalf("pods %q after %d updates (problems %v), want %q", last, n, problems, want)
		}
	}
}

// waitProblems waits until n problems were reported.
func (r *recorder) waitProblems(t *testing.T, n int) []Problem {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if _, _, problems := r.state(); len(problems) >= n {
			return problems
		}
		select {
		case <-r.changed:
		case <-deadline:
			_, _, problems := r.state()
			t.Fatalf("problems %v, want %d", problems, n)
		}
	}
}

// quiet checks that nothing is handed out for a while.
func (r *recorder) quiet(t *testing.T) {
	t.Helper()
	_, before, pb := r.state()
	time.Sleep(300 * time.Millisecond)
	if _, after, pa := r.state(); after != before || len(pa) != len(pb) {
		t.Errorf("%d updates and %d problems, want %d and %d", after, len(pa), before, len(pb))
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startFile runs a FileSource on path; a long period makes the file system
// events the only trigger after the first read unless period is given.
func startFile(t *testing.T, path string, period time.Duration) *recorder {
	t.Helper()
	r := newRecorder()
	s := &FileSource{Path: path, NodeName: "node", Period: period, Update: r.update, Report: r.report, Log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return r
}

func TestFileSourceDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "b.yaml"), manifestOf("b", "busybox:1"))
	write(t, filepath.Join(dir, ".hidden.yaml"), manifestOf("hidden", "busybox:1"))
	write(t, filepath.Join(dir, "a.yaml.swp"), "not yaml: [")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "sub", "c.yaml"), manifestOf("c", "busybox:1"))
	r := startFile(t, dir, time.Hour)
	r.waitFor(t, "b-node")
	_, _, problems := r.state()
	if len(problems) != 1 || problems[0].Origin != filepath.Join(dir, "a.yaml.swp") || problems[0].Source != SourceFile {
		t.Fatalf("problems %v, want one for a.yaml.swp", problems)
	}

	// Added, changed and removed files are seen without waiting for the period.
	write(t, filepath.Join(dir, "a.yaml"), manifestOf("a", "busybox:1"))
	r.waitFor(t, "a-node,b-node")
	_, n, _ := r.state()
	write(t, filepath.Join(dir, "b.yaml"), manifestOf("b", "busybox:2"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		last := r.updates[len(r.updates)-1]
		r.mu.Unlock()
		if len(last) == 2 && last[1].Spec.Containers[0].Image == "busybox:2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("change of b.yaml not seen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, m, _ := r.state(); m <= n {
		t.Errorf("no update for the change")
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "b-node")

	// A file that turns bad is dropped and reported once; the others stay.
	write(t, filepath.Join(dir, "a.yaml"), manifestOf("a", "busybox:1"))
	r.waitFor(t, "a-node,b-node")
	write(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c")
	r.waitFor(t, "b-node")
	_, _, problems = r.state()
	if len(problems) != 2 || problems[1].Origin != filepath.Join(dir, "a.yaml") {
		t.Fatalf("problems %v, want a second one for a.yaml", problems)
	}
	// Touching an unrelated file rereads the directory but neither updates nor reports again.
	write(t, filepath.Join(dir, ".other"), "x")
	r.quiet(t)

	// A file defining a pod another file has is left out and reported.
	write(t, filepath.Join(dir, "c.yaml"), manifestOf("b", "busybox:3"))
	problems = r.waitProblems(t, 3)
	if len(problems) != 3 || problems[2].Origin != filepath.Join(dir, "c.yaml") || !strings.Contains(problems[2].Err.Error(), "already defined by") {
		t.Fatalf("problems %v, want a third one for c.yaml", problems)
	}
	if last, _, _ := r.state(); last != "b-node" {
		t.Errorf("pods %q, want b-node", last)
	}
}

func TestFileSourceDirectoryCreatedLater(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	r := startFile(t, dir, time.Hour)
	r.waitFor(t, "") // the first, empty set: a missing directory is no error
	if _, _, problems := r.state(); len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the directory is watched
	write(t, filepath.Join(dir, "a.yaml"), manifestOf("a", "busybox:1"))
	r.waitFor(t, "a-node")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	write(t, filepath.Join(dir, "b.yaml"), manifestOf("b", "busybox:1"))
	r.waitFor(t, "b-node")
}

func TestFileSourceSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.yaml")
	write(t, path, manifestOf("a", "busybox:1"))
	write(t, filepath.Join(dir, "other.yaml"), manifestOf("other", "busybox:1"))
	r := startFile(t, path, time.Hour)
	r.waitFor(t, "a-node")
	write(t, path, manifestOf("b", "busybox:1"))
	r.waitFor(t, "b-node")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "")
}

// A read hands out the pods only when they changed.
func TestFileSourceSync(t *testing.T) {
	dir := t.TempDir()
	r := newRecorder()
	s := &FileSource{Path: dir, NodeName: "node", Period: 50 * time.Millisecond, Update: r.update, Report: r.report, Log: logr.Discard()}
	s.files = map[string]*manifest{}
	s.sync()
	if last, n, _ := r.state(); n != 1 || last != "" {
		t.Fatalf("first sync: %d updates %q", n, last)
	}
	s.sync()
	if _, n, _ := r.state(); n != 1 {
		t.Fatalf("an unchanged path gave another update")
	}
	write(t, filepath.Join(dir, "a.yaml"), manifestOf("a", "busybox:1"))
	s.sync()
	if last, n, _ := r.state(); n != 2 || last != "a-node" {
		t.Fatalf("after a new file: %d updates %q", n, last)
	}

	if err := (&FileSource{Period: time.Second}).Start(context.Background()); err == nil {
		t.Error("Start with no path succeeded")
	}
}

// Without a file system watch, the period alone finds changes.
func TestFileSourcePolls(t *testing.T) {
	dir := t.TempDir()
	r := newRecorder()
	s := &FileSource{Path: dir, NodeName: "node", Period: 50 * time.Millisecond, Update: r.update, Report: r.report, Log: logr.Discard(), poll: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	r.waitFor(t, "")
	write(t, filepath.Join(dir, "a.yaml"), manifestOf("a", "busybox:1"))
	r.waitFor(t, "a-node")
}

// A manifest file past maxManifestBytes is reported and not read; the
// other files of the directory still run.
func TestFileSourceRefusesAHugeFile(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), manifestOf("a", "busybox:1"))
	huge := manifestOf("huge", "busybox:1") + "# " + strings.Repeat("x", maxManifestBytes) + "\n"
	write(t, filepath.Join(dir, "huge.yaml"), huge)
	r := newRecorder()
	s := &FileSource{Path: dir, NodeName: "node", Period: time.Hour, Update: r.update, Report: r.report, Log: logr.Discard()}
	s.files = map[string]*manifest{}
	s.sync()
	last, _, problems := r.state()
	if last != "a-node" {
		t.Errorf("pods %q, want a-node alone", last)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Err.Error(), "larger than") {
		t.Errorf("problems %v, want one saying huge.yaml is too large", problems)
	}
}
