package containerlogs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestPodDirMarker(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ns_p_uid")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if owner, err := PodDirOwner(dir); err != nil || owner != "" {
		t.Errorf("an unmarked directory's owner: %q, %v; want none", owner, err)
	}
	for range 2 {
		if err := MarkPodDir(dir, "node-a"); err != nil {
			t.Fatal(err)
		}
	}
	if owner, err := PodDirOwner(dir); err != nil || owner != "node-a" {
		t.Errorf("a marked directory's owner: %q, %v; want node-a", owner, err)
	}
	if _, err := PodDirOwner(filepath.Join(root, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v, want not-exist", err)
	}

	// A link where the marker belongs is no marker, and is not written
	// through.
	linked := filepath.Join(root, "ns_l_uid")
	if err := os.Mkdir(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(root, "elsewhere")
	if err := os.WriteFile(elsewhere, []byte("node-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(linked, PodDirMarker)); err != nil {
		t.Fatal(err)
	}
	if owner, err := PodDirOwner(linked); err != nil || owner != "" {
		t.Errorf("a directory whose marker is a link: %q, %v; want none", owner, err)
	}
	if err := MarkPodDir(linked, "node-b"); err == nil {
		t.Error("marked a directory through a link")
	}
	// A link to a directory is not a pod log directory of anyone's.
	if err := os.Symlink(dir, filepath.Join(root, "ns_s_uid")); err != nil {
		t.Fatal(err)
	}
	if owner, err := PodDirOwner(filepath.Join(root, "ns_s_uid")); err != nil || owner != "" {
		t.Errorf("a link to a marked directory: %q, %v; want none", owner, err)
	}
}
