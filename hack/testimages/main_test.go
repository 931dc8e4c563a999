package main

import "testing"

func TestArchiveName(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"nodelet.test/busybox:1.35", "busybox-1.35.tar"},
		{"nodelet.test/pause:1.0", "pause-1.0.tar"},
		{"registry:5000/a/b:c", "b-c.tar"},
	} {
		if got := archiveName(tc.image); got != tc.want {
			t.Errorf("archiveName(%q) = %q, want %q", tc.image, got, tc.want)
		}
	}
}
