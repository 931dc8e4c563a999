package criconfig

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestEnvFileValue(t *testing.T) {
	for _, tc := range []struct {
		name, file, key, want, wantErr string
	}{
		{name: "a value", file: "A='1'\nB='two words'\n", key: "B", want: "two words"},
		{name: "comments, blanks and indentation", file: "# c\n\n   \n  A='x' # why\n", key: "A", want: "x"},
		{name: "literal content", file: `A='$HOME "q" \n'` + "\n", key: "A", want: `$HOME "q" \n`},
		{name: "over lines", file: "A='one\ntwo'\nB='3'\n", key: "A", want: "one\ntwo"},
		{name: "missing key", file: "A='1'\n", key: "B", want: ""},
		{name: "a blank after = is empty", file: "A= '1'\n", key: "A", want: ""},
		{name: "the first definition", file: "A='1'\nA='2'\n", key: "A", want: "1"},
		{name: "no quotes", file: "A=1\n", key: "A", wantErr: "single quotes"},
		{name: "a blank before =", file: "A ='1'\n", key: "A", wantErr: "blank before"},
		{name: "no =", file: "A\n", key: "A", wantErr: "no '='"},
		{name: "text after the quote", file: "A='1' x\n", key: "A", wantErr: "after the closing quote"},
		{name: "an unclosed quote", file: "A='1\n", key: "A", wantErr: "never closed"},
		{name: "a bad line before the key", file: "X=1\nA='1'\n", key: "A", wantErr: "single quotes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envFileValue(strings.NewReader(tc.file), tc.key)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("envFileValue = %q, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("envFileValue = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestFileKeyRefEnv(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.env"), []byte("TOKEN='abc'\nEMPTY=''\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(volume, path string) (io.ReadCloser, error) {
		if volume != "shared" {
			return nil, os.ErrNotExist
		}
		return os.Open(filepath.Join(dir, path))
	}
	ref := func(key string, optional bool) v1.EnvVar {
		return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{
			VolumeName: "shared", Path: "config.env", Key: key, Optional: ptr.To(optional)}}}
	}
	for _, tc := range []struct {
		name    string
		env     v1.EnvVar
		want    []string
		wantErr bool
	}{
		{name: "found", env: ref("TOKEN", false), want: []string{"V=abc"}},
		{name: "missing", env: ref("NONE", false), wantErr: true},
		{name: "missing, optional", env: ref("NONE", true)},
		{name: "empty is missing, as the kubelet's", env: ref("EMPTY", false), wantErr: true},
		{name: "another volume", env: v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{
			VolumeName: "other", Path: "config.env", Key: "TOKEN", Optional: ptr.To(true)}}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Env: []v1.EnvVar{tc.env}}}}}
			env, err := ResolveEnv(pod, &pod.Spec.Containers[0], ContainerOptions{OpenVolumeFile: open})
			if tc.wantErr {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("ResolveEnv = %v, %v; want a *ConfigError", env, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range env {
				got = append(got, e.Name+"="+e.Value)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("env %q, want %q", got, tc.want)
			}
		})
	}
}
