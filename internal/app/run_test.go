package app

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// TestImplicitConfig: without --kubeconfig, nodelet reads $KUBECONFIG or
// the in-cluster config, never the user's ~/.kube/config.
func TestImplicitConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	kubeconfig := func(server string) string {
		return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\n" +
			"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	}
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), []byte(kubeconfig("https://admin.example:6443")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", "")
	if c, err := implicitConfig(); err == nil || !strings.Contains(err.Error(), "no API server configured") {
		t.Fatalf("with only ~/.kube/config: got %v, %v; want no API server", c, err)
	}
	env := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(env, []byte(kubeconfig("https://node.example:6443")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", env)
	c, err := implicitConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Host != "https://node.example:6443" {
		t.Fatalf("host %q, want $KUBECONFIG's", c.Host)
	}
}

func TestSetGCTarget(t *testing.T) {
	prev := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(prev); debug.SetMemoryLimit(prevLimit) })

	t.Setenv("GOGC", "80")
	k := setGCTarget(logr.Discard())
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=80 set: GC percent %d after setGCTarget, want it left alone (100)", got)
	}
	if k == nil {
		t.Error("GOGC=80 set: no memory limit kept")
	}
	k.Stop()

	t.Setenv("GOGC", "off")
	if k := setGCTarget(logr.Discard()); k != nil {
		k.Stop()
		t.Error("GOGC=off: a memory limit kept")
	}

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	k = setGCTarget(logr.Discard())
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GOGC unset: GC percent %d after setGCTarget, want %d", got, defaultGCPercent)
	}
	if k == nil {
		t.Fatal("GOGC unset: no memory limit kept")
	}
	k.Stop()
}
