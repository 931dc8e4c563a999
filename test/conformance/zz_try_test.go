package conformance

import (
	"os"
	"testing"
)

func TestTryEvents(t *testing.T) {
	ev, err := AgentEvents(os.Getenv("LOGF"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ev {
		t.Log(k)
		for _, e := range v {
			t.Log("   ", e)
		}
	}
}
