package volume

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func TestUpdateAfterObjectDeleted(t *testing.T) {
	optional := ptrTo(true)
	cmSource := func(optional *bool) v1.VolumeProjection {
		return v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "app"}, Optional: optional}}
	}
	labels := v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
	}}}
	const podLabels = "app=\"web\"\ntier=\"front\""
	for _, tc := range []struct {
		name   string
		vol    v1.Volume
		plugin string
		// deleteObject deletes the object the volume shows; recreate
		// creates it again with k=v2.
		deleteObject, recreate func(*fakeFetcher)
		// whileDeleted is what the volume holds while the object is gone;
		// missing is the error text when the update fails.
		whileDeleted map[string]string
		missing      string
		after        map[string]string
	}{
		{
			name: "optional configMap: files go", vol: configMapVolume("v", "app", nil, nil, optional), plugin: configMapPlugin,
			whileDeleted: map[string]string{}, after: map[string]string{"k": "v2"},
		},
		{
			name: "optional configMap with items: files go",
			vol:  configMapVolume("v", "app", []v1.KeyToPath{{Key: "k", Path: "dir/k"}}, nil, optional), plugin: configMapPlugin,
			whileDeleted: map[string]string{}, after: map[string]string{"dir/k": "v2"},
		},
		{
			name: "optional secret: files go", vol: secretVolume("v", "app", nil, nil, optional), plugin: secretPlugin,
			whileDeleted: map[string]string{}, after: map[string]string{"k": "v2"},
		},
		{
			name: "optional projected source: its files go, the others stay", vol: projectedVolume("v", cmSource(optional), labels), plugin: projectedPlugin,
			whileDeleted: map[string]string{"labels": podLabels}, after: map[string]string{"k": "v2", "labels": podLabels},
		},
		{
			name: "required configMap: update fails, files stay", vol: configMapVolume("v", "app", nil, nil, nil), plugin: configMapPlugin,
			whileDeleted: map[string]string{"k": "v1"}, missing: `MountVolume.SetUp failed for volume "v" : configmap "app" not found`,
			after: map[string]string{"k": "v2"},
		},
		{
			name: "required secret: update fails, files stay", vol: secretVolume("v", "app", nil, nil, ptrTo(false)), plugin: secretPlugin,
			whileDeleted: map[string]string{"k": "v1"}, missing: `MountVolume.SetUp failed for volume "v" : secret "app" not found`,
			after: map[string]string{"k": "v2"},
		},
		{
			name: "required projected source: update fails, every file stays", vol: projectedVolume("v", cmSource(nil), labels), plugin: projectedPlugin,
			whileDeleted: map[string]string{"k": "v1", "labels": podLabels}, missing: `MountVolume.SetUp failed for volume "v" : configmap "app" not found`,
			after: map[string]string{"k": "v2", "labels": podLabels},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			ctx := context.Background()
			set := func(v string) {
				e.f.setConfigMap("app", map[string]string{"k": v})
				e.f.setSecret("app", map[string]string{"k": v})
			}
			set("v1")
			pod := testPod(tc.vol)
			if err := e.m.SetUp(ctx, pod); err != nil {
				t.Fatalf("SetUp: %v", err)
			}
			dir := e.m.volumeDir(pod.UID, tc.plugin, "v")

			delete(e.f.configMaps, "app")
			delete(e.f.secrets, "app")
			err := e.m.Update(ctx, pod, []string{"v"})
			if tc.missing == "" && err != nil {
				t.Fatalf("Update while the optional object is gone: %v", err)
			}
			if tc.missing != "" {
				if err == nil || err.Error() != tc.missing {
					t.Fatalf("Update while the required object is gone = %v, want %q", err, tc.missing)
				}
				if se := setUpErrorFor(t, err, "v"); !se.MissingObject() {
					t.Errorf("MissingObject() = false for %v", se)
				}
			}
			if got := volumeFiles(t, dir); !maps.Equal(got, tc.whileDeleted) {
				t.Errorf("while the object is gone the volume holds %v, want %v", got, tc.whileDeleted)
			}
			if !e.m.IsSetUp(pod.UID) {
				t.Error("a failed update made the pod not set up: a container restart would set its volumes up again")
			}

			set("v2")
			if err := e.m.Update(ctx, pod, []string{"v"}); err != nil {
				t.Fatalf("Update once the object is back: %v", err)
			}
			if got := volumeFiles(t, dir); !maps.Equal(got, tc.after) {
				t.Errorf("once the object is back the volume holds %v, want %v", got, tc.after)
			}
		})
	}
}

func TestSetUpErrors(t *testing.T) {
	missing := &SetUpError{Volume: "a", Err: &MissingObjectError{Kind: "configmap", Name: "app"}}
	other := &SetUpError{Volume: "b", Err: errors.New("writing volume content: disk full")}
	wrappedMissing := &SetUpError{Volume: "c", Err: fmt.Errorf("projected: %w", &MissingObjectError{Kind: "secret", Name: "creds"})}
	for _, tc := range []struct {
		name    string
		err     error
		want    []*SetUpError
		missing []bool
	}{
		{name: "nil"},
		{name: "not a volume's error", err: errors.New("creating pod directory: denied")},
		{name: "one", err: missing, want: []*SetUpError{missing}, missing: []bool{true}},
		{name: "joined", err: errors.Join(missing, other), want: []*SetUpError{missing, other}, missing: []bool{true, false}},
		{
			name: "joined and wrapped, as Update returns several",
			err:  fmt.Errorf("updating volumes of pod ns/web: %w", errors.Join(other, wrappedMissing)),
			want: []*SetUpError{other, wrappedMissing}, missing: []bool{false, true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SetUpErrors(tc.err)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("SetUpErrors = %v, want %v", got, tc.want)
			}
			for i, e := range got {
				if e.MissingObject() != tc.missing[i] {
					t.Errorf("%v: MissingObject() = %v, want %v", e, e.MissingObject(), tc.missing[i])
				}
			}
		})
	}
}

func TestMissingObjectErrorIsTheKubeletsNotFound(t *testing.T) {
	err := error(&MissingObjectError{Kind: "secret", Name: "creds"})
	if got, want := err.Error(), `secret "creds" not found`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !apierrors.IsNotFound(err) {
		t.Error("IsNotFound is false")
	}
}
