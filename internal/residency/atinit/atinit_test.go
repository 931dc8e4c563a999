package atinit

import "testing"

// Importing the package released the binary's read-only mappings during
// the test binary's initialization.
func TestImportReleasedTheBinary(t *testing.T) {
	if Err != nil {
		t.Fatalf("release at init: %v", Err)
	}
	if Released == 0 {
		t.Error("release at init advised no mapping of the binary")
	}
}
