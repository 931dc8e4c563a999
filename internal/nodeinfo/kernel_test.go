package nodeinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckKernelDefaults(t *testing.T) {
	write := func(root string, values map[string]string) {
		for name, v := range values {
			path := filepath.Join(root, strings.ReplaceAll(name, ".", "/"))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	good := map[string]string{
		"vm.overcommit_memory": "1", "vm.panic_on_oom": "0", "kernel.panic": "10",
		"kernel.panic_on_oops": "1", "kernel.keys.root_maxkeys": "1000000", "kernel.keys.root_maxbytes": "25000000",
	}
	root := t.TempDir()
	write(root, good)
	if err := CheckKernelDefaults(root); err != nil {
		t.Fatalf("the kubelet's values: %v", err)
	}

	root = t.TempDir()
	write(root, good)
	write(root, map[string]string{"vm.overcommit_memory": "0", "kernel.panic": "0"})
	if err := os.Remove(filepath.Join(root, "kernel/keys/root_maxkeys")); err != nil {
		t.Fatal(err)
	}
	err := CheckKernelDefaults(root)
	if err == nil {
		t.Fatal("differing values accepted")
	}
	for _, want := range []string{"vm.overcommit_memory is 0, want 1", "kernel.panic is 0, want 10", "kernel.keys.root_maxkeys cannot be read"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "panic_on_oom") {
		t.Errorf("error %q names a setting at its value", err)
	}
}
