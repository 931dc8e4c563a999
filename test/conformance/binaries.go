package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nodelet/nodelet/test/utils"
)

// The binaries hack/conformance.sh builds.
const (
	E2ETestBinary = "e2e.test"
	GinkgoBinary  = "ginkgo"
	KubeletBinary = "kubelet"
	AgnhostBinary = "agnhost"
)

// Binaries returns the directory holding the named binaries, building the
// missing ones with hack/conformance.sh (a no-op when they are cached; the
// first build takes many minutes). CONFORMANCE_BIN, when set to a directory
// that holds them all, is used as it is. The script's progress goes to
// progress when that is not nil.
func Binaries(ctx context.Context, progress *os.File, names ...string) (string, error) {
	if dir := os.Getenv("CONFORMANCE_BIN"); dir != "" && haveAll(dir, names) {
		return dir, nil
	}
	root, err := utils.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(root, "hack", "conformance.sh")}, names...)...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if progress != nil {
		cmd.Stderr = progress
	}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %v with hack/conformance.sh: %w\n%s", names, err, lastBytes(stderr.String(), 4096))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if !haveAll(dir, names) {
		return "", fmt.Errorf("hack/conformance.sh printed %q, which does not hold %v", dir, names)
	}
	return dir, nil
}

func haveAll(dir string, names []string) bool {
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// lastBytes returns at most the last n bytes of s.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
