package volume

import (
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestSetUpHostPath(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	regular := filepath.Join(base, "file")
	sock := filepath.Join(base, "s.sock")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	tests := []struct {
		name     string
		path     string
		typ      v1.HostPathType
		wantErr  string
		wantMode fs.FileMode // of what the type creates
	}{
		{name: "unset type checks nothing", path: filepath.Join(base, "absent"), typ: v1.HostPathUnset},
		{name: "DirectoryOrCreate creates 0755", path: filepath.Join(base, "new/dir"), typ: v1.HostPathDirectoryOrCreate, wantMode: 0o755},
		{name: "DirectoryOrCreate accepts a directory", path: dir, typ: v1.HostPathDirectoryOrCreate},
		{name: "DirectoryOrCreate refuses a file", path: regular, typ: v1.HostPathDirectoryOrCreate, wantErr: "is not a directory"},
		{name: "FileOrCreate creates 0644", path: filepath.Join(base, "new2/file"), typ: v1.HostPathFileOrCreate, wantMode: 0o644},
		{name: "FileOrCreate accepts a file", path: regular, typ: v1.HostPathFileOrCreate},
		{name: "FileOrCreate refuses a directory", path: dir, typ: v1.HostPathFileOrCreate, wantErr: "is not a file"},
		{name: "Directory", path: dir, typ: v1.HostPathDirectory},
		{name: "Directory missing", path: filepath.Join(base, "absent"), typ: v1.HostPathDirectory, wantErr: "does not exist"},
		{name: "Directory is a file", path: regular, typ: v1.HostPathDirectory, wantErr: "is not a directory"},
		{name: "File", path: regular, typ: v1.HostPathFile},
		{name: "File is a directory", path: dir, typ: v1.HostPathFile, wantErr: "is not a file"},
		{name: "Socket", path: sock, typ: v1.HostPathSocket},
		{name: "Socket is a file", path: regular, typ: v1.HostPathSocket, wantErr: "is not a socket"},
		{name: "CharDevice", path: "/dev/null", typ: v1.HostPathCharDev},
		{name: "CharDevice is a directory", path: dir, typ: v1.HostPathCharDev, wantErr: "is not a character device"},
		{name: "BlockDevice is a character device", path: "/dev/null", typ: v1.HostPathBlockDev, wantErr: "is not a block device"},
		{name: "unknown type", path: dir, typ: "Pipe", wantErr: `hostPath type "Pipe" is not valid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t)
			pod := testPod(v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: tt.path, Type: &tt.typ}}})
			err := e.m.SetUp(context.Background(), pod)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SetUp error = %v, want it to contain %q", err, tt.wantErr)
				}
				_ = setUpErrorFor(t, err, "host")
				return
			}
			if err != nil {
				t.Fatalf("SetUp: %v", err)
			}
			if tt.wantMode != 0 {
				assertMode(t, tt.path, tt.wantMode)
			}
		})
	}
}
