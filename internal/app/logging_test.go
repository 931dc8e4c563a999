package app

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/options"
)

// helperArgsEnv carries the command line of the logging helper process:
// logging is set up once per process, so each case runs in its own.
const helperArgsEnv = "NODELET_LOGGING_HELPER_ARGS"

// TestLoggingHelper is not a test: run by TestLogging in a child process,
// it sets up logging from the arguments in helperArgsEnv and logs one
// message at verbosity 0 and one at verbosity 1.
func TestLoggingHelper(t *testing.T) {
	args, ok := os.LookupEnv(helperArgsEnv)
	if !ok {
		t.Skip("run by TestLogging")
	}
	opts, err := options.Parse(append(strings.Fields(args), "--node-name=n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := setUpLogging(opts); err != nil {
		t.Fatal(err)
	}
	log := ctrl.Log.WithName("test")
	log.Info("Message at zero", "key", "value")
	log.V(1).Info("Message at one")
}

func TestLogging(t *testing.T) {
	cases := []struct {
		name     string
		args     string
		wantJSON bool
		wantV1   bool
	}{
		{"text", "", false, false},
		{"text -v=1", "-v=1", false, true},
		{"old zap level", "--zap-log-level=debug", false, true},
		{"json", "--logging-format=json", true, false},
		{"json -v 1", "--logging-format=json -v 1", true, true},
		{"vmodule", "--vmodule=logging_test=1", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestLoggingHelper$")
			cmd.Env = append(os.Environ(), helperArgsEnv+"="+tc.args)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			var lines []string
			for l := range strings.SplitSeq(string(out), "\n") {
				if strings.Contains(l, "Message at") {
					lines = append(lines, l)
				}
			}
			if len(lines) == 0 {
				t.Fatalf("no message logged:\n%s", out)
			}
			for _, l := range lines {
				var m map[string]any
				isJSON := json.Unmarshal([]byte(l), &m) == nil
				if isJSON != tc.wantJSON {
					t.Errorf("line %q: JSON %v, want %v", l, isJSON, tc.wantJSON)
				}
				if isJSON && (m["msg"] != "Message at zero" && m["msg"] != "Message at one") {
					t.Errorf("line %q: msg %v", l, m["msg"])
				}
			}
			gotV1 := strings.Contains(string(out), "Message at one")
			if gotV1 != tc.wantV1 {
				t.Errorf("verbosity 1 message logged: %v, want %v\n%s", gotV1, tc.wantV1, out)
			}
		})
	}
}
