package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDeployedImage(t *testing.T) {
	cases := []struct {
		name, kustomization, want, wantErr string
	}{
		{"nodelet entry", "images:\n- name: other\n  newName: x\n  newTag: \"1\"\n- name: nodelet\n  newName: ghcr.io/nodelet/nodelet\n  newTag: v0.1.0\n",
			"ghcr.io/nodelet/nodelet:v0.1.0", ""},
		{"no tag", "images:\n- name: nodelet\n  newName: ghcr.io/nodelet/nodelet\n", "", "no images entry for nodelet"},
		{"no images", "resources: [a.yaml]\n", "", "no images entry for nodelet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kustomization.yaml")
			if err := os.WriteFile(path, []byte(tc.kustomization), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := deployedImage(path)
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("deployedImage = %q, %v; want %q, error containing %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestDefaultKustomizationNamesTheImage: make image without --tag reads
// config/default, as run from the repository root.
func TestDefaultKustomizationNamesTheImage(t *testing.T) {
	got, err := deployedImage(filepath.Join("..", "..", kustomization))
	if err != nil || !strings.HasPrefix(got, "ghcr.io/nodelet/nodelet:") {
		t.Errorf("deployedImage(config/default) = %q, %v", got, err)
	}
}

func TestRootfs(t *testing.T) {
	epoch := time.Unix(1700000000, 0).UTC()
	data, err := rootfs([]byte("binary")).Tar(epoch)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"tmp/": 0o1777, "nodelet": 0o755}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		mode, ok := want[hdr.Name]
		if !ok || hdr.Mode != mode || !hdr.ModTime.Equal(epoch) || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("entry %s mode %o time %v owner %d:%d; want one of %v, stamped %v, root", hdr.Name, hdr.Mode, hdr.ModTime, hdr.Uid, hdr.Gid, want, epoch)
		}
		delete(want, hdr.Name)
	}
	if len(want) > 0 {
		t.Errorf("entries missing: %v", want)
	}
}
