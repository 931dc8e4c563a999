package memprofile

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

// goDefaultRate is Go's own memory profiling rate.
const goDefaultRate = 512 * 1024

// rateEnv asks a re-executed test binary to check that Enable restores
// the rate GODEBUG set.
const rateEnv = "MEMPROFILE_TEST_WANT_RATE"

func TestImportingTurnsProfilingOffAndEnableBackOn(t *testing.T) {
	want := goDefaultRate
	if s := os.Getenv(rateEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", rateEnv, s, err)
		}
		want = n
	}
	if runtime.MemProfileRate != 0 {
		t.Fatalf("MemProfileRate = %d after init, want 0", runtime.MemProfileRate)
	}
	t.Cleanup(func() { runtime.MemProfileRate = 0 })
	Enable()
	if runtime.MemProfileRate != want {
		t.Fatalf("MemProfileRate = %d after Enable, want %d", runtime.MemProfileRate, want)
	}
}

func TestEnableRestoresTheRateGODEBUGChose(t *testing.T) {
	if os.Getenv(rateEnv) != "" {
		t.Skip("running inside the re-executed binary")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^TestImportingTurnsProfilingOffAndEnableBackOn$", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=memprofilerate=4096", rateEnv+"=4096")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with GODEBUG=memprofilerate=4096: %v\n%s", err, out)
	}
}
