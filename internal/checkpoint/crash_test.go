package checkpoint

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// crashDirEnv tells TestHelperProcess, run as a child process, where to write.
const crashDirEnv = "NODELET_CHECKPOINT_CRASH_DIR"

var crashKeys = func() []string {
	var keys []string
	for i := range 16 {
		keys = append(keys, fmt.Sprintf("pod-%02d", i))
	}
	return keys
}()

// crashValue is what the child writes: generation gen of key, with a payload
// whose length alternates between generations, so that a torn write of a long
// value over a short one (or the reverse) cannot pass for a whole one.
type crashValue struct {
	Key     string `json:"key"`
	Gen     int    `json:"gen"`
	Payload string `json:"payload"`
}

func crashPayload(gen int) string {
	n := 16
	if gen%2 == 1 {
		n = 64 << 10
	}
	return strings.Repeat(string(rune('a'+gen%26)), n)
}

// TestHelperProcess is not a test: TestCrashSafety runs the test binary again
// with crashDirEnv set, and this loops writing crashKeys, one generation after
// another, printing "gen N" once every key holds generation N, until it is
// killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child process of TestCrashSafety")
	}
	s, err := NewFileStore(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for gen := 0; ; gen++ {
		for _, key := range crashKeys {
			if err := s.CreateCheckpoint(key, NewData(crashValue{Key: key, Gen: gen, Payload: crashPayload(gen)})); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		fmt.Printf("gen %d\n", gen)
	}
}

// TestCrashSafety kills a writer with SIGKILL at a random moment and checks
// that every key then holds a complete value, old or new, and that the torn
// temporary file, if any, is neither listed nor kept.
func TestCrashSafety(t *testing.T) {
	const iterations = 5
	tempSeen := 0
	for iter := range iterations {
		dir := filepath.Join(t.TempDir(), "cp")
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}

		// Wait until every key holds a few complete generations, then let
		// the child run on for a random while and kill it.
		minGen := 1 + rand.IntN(3)
		lastGen := -1
		lines := bufio.NewScanner(stdout)
		for lastGen < minGen && lines.Scan() {
			if g, ok := strings.CutPrefix(lines.Text(), "gen "); ok {
				lastGen, _ = strconv.Atoi(g)
			}
		}
		if lastGen < minGen {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("iteration %d: child stopped before writing generation %d: %v\n%s", iter, minGen, lines.Err(), stderr.String())
		}
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		go func() { // Keep the pipe drained so Wait does not block on it.
			for lines.Scan() {
			}
		}()
		_ = cmd.Wait() // killed: the exit status says nothing

		for _, name := range dirNames(t, dir) {
			if atomicfile.IsTemp(name) {
				tempSeen++
			}
		}
		s, err := NewFileStore(dir)
		if err != nil {
			t.Fatalf("iteration %d: NewFileStore after the crash: %v", iter, err)
		}
		for _, name := range dirNames(t, dir) {
			if !slices.Contains(crashKeys, name) {
				t.Errorf("iteration %d: %s left in the store after opening it", iter, name)
			}
		}
		keys, err := s.ListCheckpoints()
		if err != nil || !slices.Equal(keys, crashKeys) {
			t.Errorf("iteration %d: ListCheckpoints = %v, %v; want %v", iter, keys, err, crashKeys)
		}
		for _, key := range crashKeys {
			d := &Data[crashValue]{}
			if err := s.GetCheckpoint(key, d); err != nil {
				t.Errorf("iteration %d: GetCheckpoint(%q): %v", iter, key, err)
				continue
			}
			v := d.Value
			if v.Key != key || v.Gen < lastGen || v.Payload != crashPayload(v.Gen) {
				t.Errorf("iteration %d: %q holds key %q, generation %d (want >= %d), payload of %d bytes: not a value that was written",
					iter, key, v.Key, v.Gen, lastGen, len(v.Payload))
			}
		}
	}
	t.Logf("%d of %d kills left a temporary file behind", tempSeen, iterations)
}
