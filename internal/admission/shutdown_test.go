package admission

import "testing"

func TestAdmitShuttingDown(t *testing.T) {
	if res := AdmitShuttingDown(false); !res.Admit {
		t.Errorf("not shutting down: %+v, want admitted", res)
	}
	want := Result{Reason: "NodeShutdown", Message: "Pod was rejected as the node is shutting down."}
	if res := AdmitShuttingDown(true); res != want {
		t.Errorf("shutting down: %+v, want %+v", res, want)
	}
}
