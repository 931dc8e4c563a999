package utils

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// modulePath is the nodelet module's path, as its go.mod declares it.
const modulePath = "github.com/nodelet/nodelet"

// RepoRoot returns the root of the nodelet module: the first directory at or
// above the working directory whose go.mod declares the nodelet module (a
// module nested in the repository, such as an example extension, is passed
// over), or else, for a module outside the repository that requires
// nodelet, the directory the go command resolves the nodelet module to.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if declaresNodelet(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", modulePath).Output()
	if root := strings.TrimSpace(string(out)); err == nil && root != "" {
		return root, nil
	}
	return "", fmt.Errorf("finding the repository root: no go.mod of %s at or above %s, and the go command does not resolve it", modulePath, dir)
}

// declaresNodelet reports whether the go.mod at path declares the nodelet
// module.
func declaresNodelet(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == modulePath {
			return true
		}
	}
	return false
}

// CacheDir returns <cache>/<sub>, created, where <cache> is $NODELET_CACHE
// or ${XDG_CACHE_HOME:-$HOME/.cache}/nodelet, as in hack/envtest.sh.
func CacheDir(sub string) (string, error) {
	base := os.Getenv("NODELET_CACHE")
	if base == "" {
		userCache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("finding the user cache directory: %w", err)
		}
		base = filepath.Join(userCache, "nodelet")
	}
	dir := filepath.Join(base, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating cache directory %s: %w", dir, err)
	}
	return dir, nil
}

// runHackScript runs hack/<name> from the repository root and returns its
// standard output; its standard error is kept for the error message.
func runHackScript(ctx context.Context, name string) (string, error) {
	return RunHackScript(ctx, nil, name)
}

// RunHackScript runs hack/<name> with args from the repository root and
// returns its standard output, trimmed. Its standard error goes to
// progress when that is not nil, else it is kept for the error message.
func RunHackScript(ctx context.Context, progress io.Writer, name string, args ...string) (string, error) {
	return runHack(ctx, progress, []string{"bash"}, name, args)
}

// runHackScriptNiced is RunHackScript at a lower CPU priority (nice 10),
// for a build in the background of running specs.
func runHackScriptNiced(ctx context.Context, name string) (string, error) {
	return runHack(ctx, nil, []string{"nice", "-n", "10", "bash"}, name, nil)
}

func runHack(ctx context.Context, progress io.Writer, shell []string, name string, args []string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	argv := append(append(shell[1:len(shell):len(shell)], filepath.Join(root, "hack", name)), args...)
	cmd := exec.CommandContext(ctx, shell[0], argv...)
	cmd.Dir = root
	cmd.Stdin = nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if progress != nil {
		cmd.Stderr = progress
	}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running hack/%s: %w\n%s", name, err, LastBytes(stderr.String(), 4096))
	}
	return string(bytes.TrimSpace(stdout.Bytes())), nil
}

// BinDirOf returns the directory named by the last line of out, the
// output of a script that builds binaries, after checking that it holds
// the executables want.
func BinDirOf(out string, want ...string) (string, error) {
	lines := strings.Split(out, "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if !HasExecutables(dir, want...) {
		return "", fmt.Errorf("the build printed %q, which does not hold %v", dir, want)
	}
	return dir, nil
}

// HasExecutables reports whether dir holds every one of names as an
// executable file.
func HasExecutables(dir string, names ...string) bool {
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// depsMu serializes installs: apt would wait for its lock anyway.
var depsMu sync.Mutex

// ensureDeps installs the Debian packages the harness runs when one of the
// given commands is missing from PATH.
func ensureDeps(ctx context.Context, commands ...string) error {
	depsMu.Lock()
	defer depsMu.Unlock()
	missing := false
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	if _, err := runHackScript(ctx, "install-deps.sh"); err != nil {
		return fmt.Errorf("installing test dependencies: %w", err)
	}
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%s is not on PATH after hack/install-deps.sh: %w", c, err)
		}
	}
	return nil
}

// TailLines returns the last n lines of the file at path (a process's
// log, for a failure message), or why it cannot be read.
func TailLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LastBytes returns at most the last n bytes of s, marked as cut when
// they are not all of it.
func LastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
