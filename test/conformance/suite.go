package conformance

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RunOptions describe one run of e2e.test through the ginkgo CLI.
type RunOptions struct {
	// BinDir holds e2e.test and ginkgo.
	BinDir string
	// Kubeconfig is the admin kubeconfig of the cluster.
	Kubeconfig string
	// Focus and Skip are regular expressions over spec names; a spec runs
	// when it matches any Focus and no Skip.
	Focus, Skip []string
	// Procs is the number of parallel ginkgo processes (1 when 0).
	Procs int
	// Nodes is the cluster's number of nodes, given to every ginkgo
	// process: the e2e framework counts the nodes in its first process
	// only, so without it the specs that need several nodes skip
	// themselves in the others ("Requires at least 2 nodes (not -1)").
	// Unset when 0.
	Nodes int
	// ReportDir receives the JUnit report and the e2e framework's files.
	ReportDir string
	// Timeout is the whole suite's ginkgo --timeout (1h when 0).
	Timeout time.Duration
	// KubeletRootDir is the node agent's root directory, which the CSI
	// specs' manifests mount as hostPath volumes (--kubelet-root-dir);
	// e2e.test's default (/var/lib/kubelet) when empty.
	KubeletRootDir string
	// DryRun lists the selected specs without running them.
	DryRun bool
	// Output receives the suite's output; nil discards it.
	Output io.Writer
}

// junitFile is the e2e framework's JUnit report in ReportDir (spec names
// without ginkgo's label suffix). The framework writes it after the suite,
// also after an interrupt, from ginkgo's first process.
const junitFile = "junit_01.xml"

// Run runs the selected specs and returns their outcomes read from the
// JUnit report. A suite with failed specs is not an error; a suite that
// could not run or wrote no report is.
func Run(ctx context.Context, opts RunOptions) (*Report, error) {
	if err := os.MkdirAll(opts.ReportDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the report directory: %w", err)
	}
	report := filepath.Join(opts.ReportDir, junitFile)
	_ = os.Remove(report)
	cmd := exec.CommandContext(ctx, filepath.Join(opts.BinDir, GinkgoBinary), ginkgoArgs(opts)...)
	cmd.Dir = opts.ReportDir
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	// The suite runs as long as it runs; the context's cancel interrupts
	// it like ^C so that ginkgo still writes its report.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	// After an interrupt ginkgo runs the specs' cleanup (namespace
	// deletion) and the report; give it that long.
	cmd.WaitDelay = 3 * time.Minute
	runErr := cmd.Run()
	r, err := ReadJUnit(report)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("running e2e.test: %w", runErr), err)
	}
	return r, nil
}

// ginkgoArgs are the ginkgo CLI's flags, the test binary, and after "--"
// the e2e framework's flags.
func ginkgoArgs(opts RunOptions) []string {
	procs := max(opts.Procs, 1)
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = time.Hour
	}
	args := []string{
		"--procs=" + strconv.Itoa(procs),
		"--timeout=" + timeout.String(),
		"--no-color",
		"--silence-skips",
	}
	if opts.DryRun {
		args = append(args, "--dry-run", "-v")
	}
	for _, f := range opts.Focus {
		args = append(args, "--focus="+f)
	}
	for _, s := range opts.Skip {
		args = append(args, "--skip="+s)
	}
	args = append(args, filepath.Join(opts.BinDir, E2ETestBinary), "--",
		"--kubeconfig="+opts.Kubeconfig,
		"--provider=skeleton",
		// No system pods to wait for: nothing but the nodes.
		"--minStartupPods=0",
		"--allowed-not-ready-nodes=0",
		"--report-dir="+opts.ReportDir,
		"--disable-log-dump",
	)
	if opts.Nodes > 0 {
		args = append(args, "--num-nodes="+strconv.Itoa(opts.Nodes))
	}
	if opts.KubeletRootDir != "" {
		args = append(args, "--kubelet-root-dir="+opts.KubeletRootDir)
	}
	return args
}

// Outcome is what became of one spec.
type Outcome string

// The outcomes of a spec.
const (
	Passed  Outcome = "passed"
	Failed  Outcome = "failed"
	Skipped Outcome = "skipped"
)

// SpecResult is one spec's outcome.
type SpecResult struct {
	Name    string
	Outcome Outcome
	// Message is the failure's message (the first lines of it), or why
	// a spec that started skipped itself (empty for the specs the focus
	// and skip expressions left out).
	Message  string
	Duration time.Duration
}

// Report is the outcome of the specs of one run, by name.
type Report struct {
	Specs map[string]SpecResult
}

// Count returns how many specs had outcome o.
func (r *Report) Count(o Outcome) int {
	n := 0
	for _, s := range r.Specs {
		if s.Outcome == o {
			n++
		}
	}
	return n
}

// SkippedAtRunTime returns the names of the specs that started and
// skipped themselves, sorted.
func (r *Report) SkippedAtRunTime() []string {
	var names []string
	for _, s := range r.Specs {
		if s.Outcome == Skipped && s.Message != "" {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Names returns the names of the specs with outcome o, sorted.
func (r *Report) Names(o Outcome) []string {
	var names []string
	for _, s := range r.Specs {
		if s.Outcome == o {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	return names
}

type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Time    float64       `xml:"time,attr"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
	Skipped *junitMessage `xml:"skipped"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// ReadJUnit reads a ginkgo JUnit report. The suite's own nodes
// (BeforeSuite, AfterSuite, report entries) are left out unless they
// failed: a failed BeforeSuite fails every spec.
func ReadJUnit(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the JUnit report: %w", err)
	}
	var suites junitSuites
	if err := xml.Unmarshal(data, &suites); err != nil {
		return nil, fmt.Errorf("parsing the JUnit report %s: %w", path, err)
	}
	r := &Report{Specs: map[string]SpecResult{}}
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			res := caseResult(c)
			if !strings.HasPrefix(c.Name, "[It]") && res.Outcome != Failed {
				continue
			}
			r.Specs[res.Name] = res
		}
	}
	return r, nil
}

func caseResult(c junitCase) SpecResult {
	res := SpecResult{
		Name:     SpecName(c.Name),
		Outcome:  Passed,
		Duration: time.Duration(c.Time * float64(time.Second)),
	}
	switch {
	case c.Failure != nil:
		res.Outcome, res.Message = Failed, firstLines(c.Failure.Message+"\n"+c.Failure.Text, 6)
	case c.Error != nil:
		res.Outcome, res.Message = Failed, firstLines(c.Error.Message+"\n"+c.Error.Text, 6)
	case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
		res.Outcome = Skipped
		// Ginkgo writes a bare "skipped" for a spec it never started,
		// "skipped - <why>" for one that skipped itself (too few nodes,
		// a missing capability).
		if c.Skipped != nil && c.Skipped.Message != "skipped" {
			res.Message = firstLines(strings.TrimPrefix(c.Skipped.Message, "skipped - "), 3)
		}
	}
	return res
}

// SpecName is a spec's name as the JUnit report gives it without the
// leaf node type ("[It] ") and the labels ginkgo appends in brackets
// after a space.
func SpecName(name string) string {
	name = strings.TrimPrefix(name, "[It] ")
	if i := strings.LastIndex(name, " ["); i >= 0 && strings.HasSuffix(name, "]") && strings.Contains(name[i:], ", ") {
		name = name[:i]
	}
	return strings.TrimSpace(name)
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
