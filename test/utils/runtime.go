package utils

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The container runtimes the harness can run, as $RUNTIME names them.
const (
	// RuntimeContainerd2 is containerd 2 with a current runc, built from
	// the Go module proxy by hack/runtime.sh: the default.
	RuntimeContainerd2 = "containerd2"
	// RuntimeContainerd16 is Debian 12's containerd 1.6 and runc 1.1
	// (hack/install-deps.sh installs them).
	RuntimeContainerd16 = "containerd1.6"
)

// RuntimeEnv is the environment variable that selects the runtime every
// suite runs: RuntimeContainerd2 (the default) or RuntimeContainerd16.
const RuntimeEnv = "RUNTIME"

// SelectedRuntime returns the runtime $RUNTIME selects, RuntimeContainerd2
// when it is unset, or an error naming the ones there are.
func SelectedRuntime() (string, error) {
	switch r := os.Getenv(RuntimeEnv); r {
	case "", RuntimeContainerd2:
		return RuntimeContainerd2, nil
	case RuntimeContainerd16, "containerd1":
		return RuntimeContainerd16, nil
	default:
		return "", fmt.Errorf("%s=%q: want %s or %s", RuntimeEnv, r, RuntimeContainerd2, RuntimeContainerd16)
	}
}

// IsContainerd2 reports whether the selected runtime is containerd 2 (an
// invalid $RUNTIME is not; RuntimeBinDir reports it).
func IsContainerd2() bool {
	r, err := SelectedRuntime()
	return err == nil && r == RuntimeContainerd2
}

// runtimeBinaries are the executables a runtime directory holds.
var runtimeBinaries = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"}

var runtimeDir struct {
	sync.Mutex
	dir string
}

// RuntimeBinDir returns the directory that holds the selected runtime's
// containerd, containerd-shim-runc-v2, ctr and runc: what `hack/runtime.sh
// $RUNTIME` prints, which builds containerd 2 and runc into the cache the
// first time (a few minutes; a second caller waits for the first build)
// and links Debian's binaries for containerd1.6, installing the Debian
// packages first when they are missing. Resolved once per process.
func RuntimeBinDir(ctx context.Context) (string, error) {
	runtimeDir.Lock()
	defer runtimeDir.Unlock()
	if runtimeDir.dir != "" {
		return runtimeDir.dir, nil
	}
	rt, err := SelectedRuntime()
	if err != nil {
		return "", err
	}
	if rt == RuntimeContainerd16 {
		if err := ensureDeps(ctx, "containerd", "ctr", "runc"); err != nil {
			return "", err
		}
	}
	out, err := RunHackScript(ctx, nil, "runtime.sh", rt)
	if err != nil {
		return "", fmt.Errorf("resolving the %s runtime: %w", rt, err)
	}
	dir, err := BinDirOf(out, runtimeBinaries...)
	if err != nil {
		return "", fmt.Errorf("resolving the %s runtime: %w", rt, err)
	}
	runtimeDir.dir = dir
	return dir, nil
}

// RuntimeBinary returns the path of the selected runtime's executable name
// ("containerd", "ctr", "containerd-shim-runc-v2" or "runc"). Every test
// and tool that runs one of them by name uses this, so that all of them
// run the same runtime.
func RuntimeBinary(ctx context.Context, name string) (string, error) {
	dir, err := RuntimeBinDir(ctx)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// RuntimePathEnv returns env with the selected runtime's directory first
// on PATH (containerd finds containerd-shim-runc-v2 there, and the shim
// finds runc), and then extra.
func RuntimePathEnv(ctx context.Context, env []string, extra ...string) ([]string, error) {
	dir, err := RuntimeBinDir(ctx)
	if err != nil {
		return nil, err
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	out := make([]string, 0, len(env)+1+len(extra))
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "PATH="+dir+string(os.PathListSeparator)+path)
	return append(out, extra...), nil
}
