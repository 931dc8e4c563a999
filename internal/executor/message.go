package executor

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

const (
	// maxTerminationMessage is the most of a termination message file that
	// is reported, as the API allows.
	maxTerminationMessage = 4096
	// fallbackLogBytes and fallbackLogLines bound the log tail reported for
	// FallbackToLogsOnError, as the kubelet does.
	fallbackLogBytes = 2048
	fallbackLogLines = 80
)

// fillTerminationMessages sets the message of every exited container of pod
// from its termination message file or, for a failed container whose policy
// is FallbackToLogsOnError and whose file is empty, from its log's tail.
func (e *Executor) fillTerminationMessages(pod *v1.Pod, rt *state.PodRuntime) {
	for i := range rt.Containers {
		c := &rt.Containers[i]
		if c.State != state.ContainerExited {
			continue
		}
		spec := podspec.ContainerSpec(pod, c.Name)
		if spec == nil {
			continue
		}
		msg := readLimited(e.Volumes.TerminationMessagePath(pod, c.Name, int32(c.Attempt)), maxTerminationMessage)
		if msg == "" && c.ExitCode != 0 && spec.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError {
			logPath := filepath.Join(criconfig.PodLogDirectory(e.Sandbox.PodLogsDir, pod), criconfig.ContainerLogPath(c.Name, c.Attempt))
			msg = logTail(logPath)
		}
		if msg != "" {
			c.Message = msg
		}
	}
}

func readLimited(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, limit))
	return string(b)
}

// logTail returns the message text of the last lines of a CRI log file
// (lines of the form "<time> <stream> <tag> <text>").
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 64 * 1024
	if st, err := f.Stat(); err == nil && st.Size() > window {
		_, _ = f.Seek(st.Size()-window, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > fallbackLogLines {
		lines = lines[len(lines)-fallbackLogLines:]
	}
	var out strings.Builder
	for _, l := range lines {
		parts := bytes.SplitN(l, []byte(" "), 4)
		if len(parts) == 4 {
			out.Write(parts[3])
			if string(parts[2]) == "F" {
				out.WriteByte('\n')
			}
		}
	}
	s := out.String()
	if len(s) > fallbackLogBytes {
		s = s[len(s)-fallbackLogBytes:]
	}
	return s
}
