package volume

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func projectedVolume(name string, sources ...v1.VolumeProjection) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: sources}}}
}

func TestVolumesProjecting(t *testing.T) {
	pod := testPod(
		configMapVolume("cm", "app", nil, nil, nil),
		configMapVolume("cm-other", "other", nil, nil, nil),
		secretVolume("sec", "app", nil, nil, nil),
		projectedVolume("mixed",
			v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
			v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "app"}}},
			v1.VolumeProjection{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}},
			v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "app"}}},
		),
		v1.Volume{Name: "empty", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"configMap direct and projected, once each", VolumesProjectingConfigMap(pod, "app"), []string{"cm", "mixed"}},
		{"configMap only direct", VolumesProjectingConfigMap(pod, "other"), []string{"cm-other"}},
		{"a Secret of a ConfigMap's name is not the ConfigMap", VolumesProjectingSecret(pod, "app"), []string{"sec"}},
		{"secret only projected", VolumesProjectingSecret(pod, "creds"), []string{"mixed"}},
		{"nothing", VolumesProjectingConfigMap(pod, "creds"), nil},
		{"any object", VolumesProjectingObjects(pod), []string{"cm", "cm-other", "sec", "mixed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Equal(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestPodDependent(t *testing.T) {
	for _, tc := range []struct {
		name            string
		vol             v1.Volume
		downward, token bool
	}{
		{"configMap", configMapVolume("v", "x", nil, nil, nil), false, false},
		{"downwardAPI", v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}}, true, false},
		{"projected token", projectedVolume("v", v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{}}), false, true},
		{"projected downwardAPI and configMap", projectedVolume("v",
			v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{}},
			v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{}}), true, false},
		{"projected all", projectedVolume("v",
			v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{}},
			v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{}}), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, tok := podDependent(&tc.vol)
			if d != tc.downward || tok != tc.token {
				t.Errorf("podDependent = %v, %v; want %v, %v", d, tok, tc.downward, tc.token)
			}
		})
	}
}

// countingFetcher counts the reads of a fakeFetcher.
type countingFetcher struct {
	*fakeFetcher
	reads int
}

func (c *countingFetcher) ConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	c.reads++
	return c.fakeFetcher.ConfigMap(ctx, ns, name)
}

func (c *countingFetcher) Secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	c.reads++
	return c.fakeFetcher.Secret(ctx, ns, name)
}

func TestSetUpOnceThenUpdate(t *testing.T) {
	e := newTestEnv(t)
	f := &countingFetcher{fakeFetcher: e.f}
	e.m.fetcher = f
	e.f.setConfigMap("app", map[string]string{"k": "v1"})
	e.f.setSecret("creds", map[string]string{"user": "u1"})
	pod := testPod(
		configMapVolume("cm", "app", nil, nil, nil),
		projectedVolume("mixed",
			v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "app"}}},
			v1.VolumeProjection{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}},
		),
	)
	ctx := context.Background()

	// Not set up: Update and Refresh leave the pod alone.
	if err := e.m.Update(ctx, pod, []string{"cm"}); err != nil || f.reads != 0 || e.m.IsSetUp(pod.UID) {
		t.Fatalf("Update before SetUp: err %v, %d reads, set up %v; want nothing done", err, f.reads, e.m.IsSetUp(pod.UID))
	}
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	if !e.m.IsSetUp(pod.UID) || f.reads != 3 {
		t.Fatalf("after SetUp: set up %v, %d reads; want true, 3", e.m.IsSetUp(pod.UID), f.reads)
	}

	// Set up: SetUp and Refresh read nothing.
	e.f.setConfigMap("app", map[string]string{"k": "v2"})
	for range 3 {
		if err := e.m.SetUp(ctx, pod); err != nil {
			t.Fatalf("SetUp: %v", err)
		}
		if err := e.m.Refresh(ctx, pod); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
	}
	if f.reads != 3 {
		t.Fatalf("SetUp and Refresh of a set-up pod read %d objects", f.reads-3)
	}
	if got := readFile(t, filepath.Join(e.m.volumeDir(pod.UID, configMapPlugin, "cm"), "k")); got != "v1" {
		t.Fatalf("cm/k = %q before Update, want v1", got)
	}

	// Update rewrites the named volumes, projected ones too.
	if err := e.m.Update(ctx, pod, VolumesProjectingConfigMap(pod, "app")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got := readFile(t, filepath.Join(e.m.volumeDir(pod.UID, configMapPlugin, "cm"), "k")); got != "v2" {
		t.Errorf("cm/k = %q, want v2", got)
	}
	if got := readFile(t, filepath.Join(e.m.volumeDir(pod.UID, projectedPlugin, "mixed"), "k")); got != "v2" {
		t.Errorf("mixed/k = %q, want v2", got)
	}

	// A deleted object: Update fails and the last content stays.
	delete(e.f.configMaps, "app")
	var setUpErr *SetUpError
	if err := e.m.Update(ctx, pod, []string{"cm"}); !errors.As(err, &setUpErr) {
		t.Fatalf("Update of a volume whose object is gone = %v, want a SetUpError", err)
	}
	if got := readFile(t, filepath.Join(e.m.volumeDir(pod.UID, configMapPlugin, "cm"), "k")); got != "v2" {
		t.Errorf("cm/k = %q after a failed update, want v2 kept", got)
	}

	// TearDown forgets the pod: SetUp writes everything again.
	if err := e.m.TearDown(ctx, pod.UID); err != nil {
		t.Fatalf("TearDown: %v", err)
	}
	if e.m.IsSetUp(pod.UID) {
		t.Fatal("pod still set up after TearDown")
	}
}

func TestSetUpNotDoneUntilEveryVolumeIs(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(configMapVolume("cm", "late", nil, nil, nil))
	ctx := context.Background()
	if err := e.m.SetUp(ctx, pod); err == nil {
		t.Fatal("SetUp with a missing ConfigMap succeeded")
	}
	if e.m.IsSetUp(pod.UID) {
		t.Fatal("pod counted as set up with a volume missing")
	}
	e.f.setConfigMap("late", map[string]string{"k": "here"})
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp once the ConfigMap exists: %v", err)
	}
	if got := readFile(t, filepath.Join(e.m.volumeDir(pod.UID, configMapPlugin, "cm"), "k")); got != "here" {
		t.Errorf("cm/k = %q, want here", got)
	}
}
