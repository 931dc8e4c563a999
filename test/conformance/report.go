package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nodelet/nodelet/test/utils"
)

// List returns the names of the specs focus and skip select, from a dry
// run of the suite (no cluster needed).
func List(ctx context.Context, binDir string, focus, skip []string) ([]string, error) {
	dir, err := os.MkdirTemp("", "nodelet-conformance-list-")
	if err != nil {
		return nil, fmt.Errorf("creating the list directory: %w", err)
	}
	defer os.RemoveAll(dir)
	// The framework reads the kubeconfig's existence, not its content,
	// before a dry run.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		return nil, fmt.Errorf("writing a placeholder kubeconfig: %w", err)
	}
	var out bytes.Buffer
	r, err := Run(ctx, RunOptions{
		BinDir: binDir, Kubeconfig: kubeconfig, Focus: focus, Skip: skip,
		ReportDir: dir, DryRun: true, Output: &out,
	})
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, utils.LastBytes(out.String(), 4096))
	}
	return r.Names(Passed), nil
}

// Summarize prints the columns of a run: per agent the passed and failed
// counts and wall time, the failed specs with their messages, the specs
// the kubelet passes and nodelet fails, and skip entries the kubelet passes
// (which do not belong in the skip list).
func Summarize(agents []Agent, reports map[Agent]*Report, walls map[Agent]time.Duration, skips []SkipEntry, events map[Agent]map[string][]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-10s %8s %8s %8s %10s\n", "agent", "passed", "failed", "skipped", "wall")
	for _, a := range agents {
		r := reports[a]
		fmt.Fprintf(&b, "%-10s %8d %8d %8d %10s\n", a, r.Count(Passed), r.Count(Failed), len(r.SkippedAtRunTime()), walls[a].Round(time.Second))
	}
	b.WriteString("(skipped: specs that started and skipped themselves)\n")
	for _, a := range agents {
		n := 0
		for _, e := range skips {
			if e.AppliesTo(a) {
				n++
			}
		}
		fmt.Fprintf(&b, "(%s: %d specs of the skip list not run)\n", a, n)
	}
	for _, a := range agents {
		r := reports[a]
		failed := r.Names(Failed)
		fmt.Fprintf(&b, "\nFailed on %s (%d):\n", a, len(failed))
		for _, n := range failed {
			fmt.Fprintf(&b, "- %s\n%s\n", n, indent(r.Specs[n].Message, "    "))
			for _, e := range events[a][n] {
				fmt.Fprintf(&b, "    %s event: %s\n", a, e)
			}
		}
	}
	for _, a := range agents {
		r := reports[a]
		if skipped := r.SkippedAtRunTime(); len(skipped) > 0 {
			fmt.Fprintf(&b, "\nSkipped at run time on %s (%d):\n", a, len(skipped))
			for _, n := range skipped {
				fmt.Fprintf(&b, "- %s\n%s\n", n, indent(r.Specs[n].Message, "    "))
			}
		}
	}
	nodelet, kubelet := reports[AgentNodelet], reports[AgentKubelet]
	if nodelet != nil && kubelet != nil {
		b.WriteString(regressions(nodelet, kubelet))
	}
	return b.String()
}

// regressions is the table of specs the kubelet passes and nodelet fails,
// and the reverse.
func regressions(nodelet, kubelet *Report) string {
	var b strings.Builder
	var worse, better []string
	for name, k := range kubelet.Specs {
		n, ok := nodelet.Specs[name]
		if !ok {
			continue
		}
		switch {
		case k.Outcome == Passed && n.Outcome == Failed:
			worse = append(worse, name)
		case k.Outcome == Failed && n.Outcome == Passed:
			better = append(better, name)
		}
	}
	sort.Strings(worse)
	sort.Strings(better)
	fmt.Fprintf(&b, "\n| spec (kubelet passes, nodelet fails: %d) | kubelet | nodelet |\n|---|---|---|\n", len(worse))
	for _, n := range worse {
		fmt.Fprintf(&b, "| %s | passed | failed |\n", n)
	}
	fmt.Fprintf(&b, "\nnodelet passes, kubelet fails (%d):\n", len(better))
	for _, n := range better {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// CopyFile copies src to dst, best effort: a missing log is not worth
// failing a report for.
func CopyFile(src, dst string) {
	if src == "" {
		return
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return
	}
	_ = os.WriteFile(dst, data, 0o644)
}

// Leftovers records the cluster's directories and bridge now and returns
// a check to call after Stop: it names every process whose command line
// mentions one of the directories, every mount under them, and the bridge
// if it still exists.
func Leftovers(c *Cluster) func() string {
	var dirs []string
	bridge := ""
	if c.Containerd != nil {
		dirs = append(dirs, c.Containerd.Dir)
		bridge = c.Containerd.Bridge
	}
	if c.Nodelet != nil {
		dirs = append(dirs, c.Nodelet.Dir)
	}
	if c.Kubelet != nil {
		dirs = append(dirs, c.Kubelet.Dir)
	}
	if c.API != nil {
		dirs = append(dirs, c.API.Dir)
	}
	return func() string {
		var left []string
		for _, d := range dirs {
			if mounts, _ := utils.MountsUnder(d); len(mounts) > 0 {
				left = append(left, fmt.Sprintf("mounts %v", mounts))
			}
		}
		pids, err := utils.ProcessesUnder(dirs...)
		if err != nil {
			left = append(left, err.Error())
		}
		for _, pid := range pids {
			left = append(left, describeProcess(pid))
		}
		if bridge != "" {
			if _, err := os.Stat(filepath.Join("/sys/class/net", bridge)); err == nil {
				left = append(left, "bridge "+bridge)
			}
		}
		return strings.Join(left, "; ")
	}
}

// describeProcess names a process and its command line.
func describeProcess(pid int) string {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return fmt.Sprintf("process %d (%s)", pid, strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "))
}

// ProgressWriter passes the suite's output through a filter that prints a
// line to w for every failed spec and a count every 10 specs, so a long
// run shows where it is without the whole output.
func ProgressWriter(w io.Writer) io.Writer {
	return &progress{w: w, start: time.Now()}
}

type progress struct {
	mu      sync.Mutex
	w       io.Writer
	start   time.Time
	line    []byte
	specs   int
	failed  int
	pending bool // the next non-empty line names a failed spec
}

func (p *progress) Write(data []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range data {
		if c == '\n' {
			p.handle(string(p.line))
			p.line = p.line[:0]
			continue
		}
		p.line = append(p.line, c)
		// Passed specs are a bullet each, on one line that ends only at
		// the next failure or the end of the suite: count as they come.
		if bytes.HasSuffix(p.line, []byte("•")) {
			p.specs++
			if p.specs%10 == 0 {
				fmt.Fprintf(p.w, "conformance: %d specs done, %d failed, %s\n", p.specs, p.failed, time.Since(p.start).Round(time.Second))
			}
		}
	}
	return len(data), nil
}

func (p *progress) handle(line string) {
	t := strings.TrimSpace(line)
	switch {
	case p.pending && t != "" && !strings.HasPrefix(t, "•"):
		p.pending = false
		fmt.Fprintf(p.w, "conformance: FAILED %s\n", t)
	case strings.HasPrefix(t, "• [FAILED]") || strings.HasPrefix(t, "• [PANICKED]") || strings.HasPrefix(t, "• [TIMEDOUT]"):
		p.failed++
		p.pending = true
	}
}

// SpecTable is a markdown table of every spec's outcome on each agent
// (passed, failed, skipped; blank where the agent did not run it) and
// the totals: for suites small enough to show spec by spec.
func SpecTable(agents []Agent, reports map[Agent]*Report) string {
	names := map[string]bool{}
	for _, a := range agents {
		for n := range reports[a].Specs {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	b.WriteString("\n| spec |")
	for _, a := range agents {
		fmt.Fprintf(&b, " %s |", a)
	}
	b.WriteString("\n|---|")
	for range agents {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, n := range sorted {
		fmt.Fprintf(&b, "| %s |", strings.ReplaceAll(n, "|", `\|`))
		for _, a := range agents {
			fmt.Fprintf(&b, " %s |", reports[a].Specs[n].Outcome)
		}
		b.WriteString("\n")
	}
	b.WriteString("| **total** (passed / failed / skipped) |")
	for _, a := range agents {
		r := reports[a]
		fmt.Fprintf(&b, " %d / %d / %d |", r.Count(Passed), r.Count(Failed), r.Count(Skipped))
	}
	b.WriteString("\n")
	return b.String()
}
