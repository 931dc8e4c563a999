package utils

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestHarnessDirsListsOnlyTheHarnessesAndEnvtests(t *testing.T) {
	tmp := t.TempDir()
	for _, d := range []string{"nodelet-containerd-1", "k8s_test_framework_2", "nodelet-vm-3", "go-build4", "other-nodelet-5"} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "nodelet-file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := harnessDirs(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range got {
		names = append(names, filepath.Base(d))
	}
	want := []string{"k8s_test_framework_2", "nodelet-containerd-1", "nodelet-vm-3"}
	if !slices.Equal(names, want) {
		t.Errorf("harness directories: %v, want %v", names, want)
	}
}

func TestLiveRunFindsTestBinariesAndTheLocalCluster(t *testing.T) {
	for _, tc := range []struct {
		args []string
		live bool
	}{
		{[]string{"/tmp/go-build1/b001/bench.test", "-test.bench", "."}, true},
		{[]string{"/work/bin/ginkgo", "run"}, true},
		{[]string{"bin/nodelet-localup", "up"}, true},
		{[]string{"/usr/bin/containerd", "--config", "x"}, false},
		{[]string{"/tmp/nodelet-x/kube-apiserver"}, false},
		{nil, false},
	} {
		_, live := liveRun([]procInfo{{pid: 4242, state: 'S', args: tc.args}})
		if live != tc.live {
			t.Errorf("%v: live %v, want %v", tc.args, live, tc.live)
		}
	}
	if _, live := liveRun([]procInfo{{pid: 4242, state: 'Z', args: []string{"e2e.test"}}}); live {
		t.Error("a zombie test binary counts as a live run")
	}
}

func TestReapSlotLeavesAHeldSlotAndClearsAFreeOne(t *testing.T) {
	logf := func(string, ...any) {}
	slots := t.TempDir()
	lock := func(name, content string) string {
		t.Helper()
		p := filepath.Join(slots, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// A live instance holds its slot's lock.
	held := lock("7.lock", "/tmp/nodelet-containerd-live\n")
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	dir, isHeld, err := reapSlot(held, logf)
	if err != nil || !isHeld || dir != "/tmp/nodelet-containerd-live" {
		t.Errorf("held slot: dir %q, held %v, err %v; want its directory, held", dir, isHeld, err)
	}
	if data, _ := os.ReadFile(held); !strings.Contains(string(data), "live") {
		t.Errorf("a held slot was cleared: %q", data)
	}

	// A free slot naming a dead instance's directory: torn down, cleared.
	// Slot 0 is never handed out, so no live instance has its bridge.
	deadDir, err := os.MkdirTemp("", instanceDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	free := lock("0.lock", deadDir+"\n")
	dir, isHeld, err = reapSlot(free, logf)
	if err != nil || isHeld || dir != deadDir {
		t.Errorf("free slot: dir %q, held %v, err %v; want %q torn down", dir, isHeld, err, deadDir)
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Errorf("the dead instance's directory is still there: %v", err)
		_ = os.RemoveAll(deadDir)
	}
	if data, _ := os.ReadFile(free); len(data) != 0 {
		t.Errorf("the free slot still names %q", data)
	}

	// A free slot naming what is not an instance directory is refused.
	refused := lock("9.lock", "/etc\n")
	if _, _, err := reapSlot(refused, logf); err == nil {
		t.Error("a slot naming /etc was torn down")
	}
}

func TestRemoveDeadSocketsKeepsTheListenedOnes(t *testing.T) {
	dir := t.TempDir()
	live, err := net.Listen("unix", filepath.Join(dir, "live"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead, err := net.Listen("unix", filepath.Join(dir, "dead"))
	if err != nil {
		t.Fatal(err)
	}
	// Closing a listener removes its file; a killed process's stays.
	dead.(*net.UnixListener).SetUnlinkOnClose(false)
	dead.Close()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := removeDeadSockets(dir)
	if err != nil || n != 1 {
		t.Fatalf("removed %d, err %v; want 1", n, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"file", "live"}) {
		t.Errorf("left %v, want the plain file and the listened-on socket", names)
	}
}
