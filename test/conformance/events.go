package conformance

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// agentEvent matches an event the framework dumps after a failed spec:
// "... event for <object>: {<source> } <Reason>: <message>".
var agentEvent = regexp.MustCompile(`event for ([^:]+): \{(nodelet|kubelet)[^}]*\} (\w+): (.*)$`)

// routineReasons are the events of a pod going its normal way; the others
// (Failed, BackOff, Unhealthy, FailedMount, …) say why a spec failed.
// MissingClusterDNS is routine here: the harness runs no cluster DNS.
var routineReasons = map[string]bool{
	"Pulled": true, "Created": true, "Started": true, "Killing": true, "Scheduled": true,
	"Pulling": true, "SandboxChanged": true, "MissingClusterDNS": true,
}

// AgentEvents reads the suite's output and returns, per failed spec, the
// node agent's non-routine events the framework dumped for it, each once.
func AgentEvents(logPath string) (map[string][]string, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, fmt.Errorf("reading the suite output: %w", err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	var spec string
	expectName := false
	seen := map[string]bool{}
	for sc.Scan() {
		line := sc.Text()
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "• [FAILED]") || strings.HasPrefix(t, "• [TIMEDOUT]") || strings.HasPrefix(t, "• [PANICKED]"):
			expectName, spec, seen = true, "", map[string]bool{}
		case expectName && strings.HasPrefix(t, "["):
			expectName, spec = false, failedSpecName(t)
		case spec != "":
			if m := agentEvent.FindStringSubmatch(line); len(m) == 5 && !routineReasons[m[3]] {
				e := m[3] + ": " + m[4]
				if !seen[e] {
					seen[e] = true
					out[spec] = append(out[spec], e)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the suite output: %w", err)
	}
	return out, nil
}

// failedSpecName turns ginkgo's "[sig-x] Container [It] text [labels]"
// into the name the JUnit report gives the spec.
func failedSpecName(s string) string {
	s = strings.Replace(s, " [It] ", " ", 1)
	if i := strings.LastIndex(s, " ["); i >= 0 && strings.Contains(s[i:], ", ") {
		s = s[:i]
	}
	return s
}
