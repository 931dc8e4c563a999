package volume

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func configMapVolume(name, object string, items []v1.KeyToPath, defaultMode *int32, optional *bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: object},
		Items:                items, DefaultMode: defaultMode, Optional: optional,
	}}}
}

func secretVolume(name, object string, items []v1.KeyToPath, defaultMode *int32, optional *bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
		SecretName: object, Items: items, DefaultMode: defaultMode, Optional: optional,
	}}}
}

func TestSetUpKeyedVolumes(t *testing.T) {
	tests := []struct {
		name      string
		vol       v1.Volume
		plugin    string
		wantFiles map[string]string
		wantModes map[string]fs.FileMode
		wantErr   string
	}{{
		name:      "configMap: every key with the default mode",
		vol:       configMapVolume("cfg", "app", nil, nil, nil),
		plugin:    configMapPlugin,
		wantFiles: map[string]string{"a.conf": "A", "b.conf": "B"},
		wantModes: map[string]fs.FileMode{"a.conf": 0o644, "b.conf": 0o644},
	}, {
		name:      "configMap: defaultMode applies to every key",
		vol:       configMapVolume("cfg", "app", nil, ptrTo[int32](0o400), nil),
		plugin:    configMapPlugin,
		wantFiles: map[string]string{"a.conf": "A", "b.conf": "B"},
		wantModes: map[string]fs.FileMode{"a.conf": 0o400, "b.conf": 0o400},
	}, {
		name: "configMap: items select keys, with paths and per-item modes",
		vol: configMapVolume("cfg", "app", []v1.KeyToPath{
			{Key: "a.conf", Path: "nested/dir/a"},
			{Key: "b.conf", Path: "b", Mode: ptrTo[int32](0o600)},
		}, ptrTo[int32](0o640), nil),
		plugin:    configMapPlugin,
		wantFiles: map[string]string{"nested/dir/a": "A", "b": "B"},
		wantModes: map[string]fs.FileMode{"nested/dir/a": 0o640, "b": 0o600, "nested": 0o755, "nested/dir": 0o755},
	}, {
		name:    "configMap: missing required object",
		vol:     configMapVolume("cfg", "absent", nil, nil, nil),
		wantErr: `MountVolume.SetUp failed for volume "cfg" : configmap "absent" not found`,
	}, {
		name:      "configMap: missing optional object gives an empty volume",
		vol:       configMapVolume("cfg", "absent", nil, nil, ptrTo(true)),
		plugin:    configMapPlugin,
		wantFiles: map[string]string{},
	}, {
		name:    "configMap: item naming a missing key",
		vol:     configMapVolume("cfg", "app", []v1.KeyToPath{{Key: "nope", Path: "x"}}, nil, nil),
		wantErr: `MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: nope`,
	}, {
		name:      "configMap: optional item naming a missing key is skipped",
		vol:       configMapVolume("cfg", "app", []v1.KeyToPath{{Key: "nope", Path: "x"}, {Key: "a.conf", Path: "a"}}, nil, ptrTo(true)),
		plugin:    configMapPlugin,
		wantFiles: map[string]string{"a": "A"},
	}, {
		name:      "secret: every key with the default mode",
		vol:       secretVolume("sec", "creds", nil, nil, nil),
		plugin:    secretPlugin,
		wantFiles: map[string]string{"password": "hunter2", "user": "admin"},
		wantModes: map[string]fs.FileMode{"password": 0o644, "user": 0o644},
	}, {
		name:      "secret: items with modes",
		vol:       secretVolume("sec", "creds", []v1.KeyToPath{{Key: "password", Path: "pw", Mode: ptrTo[int32](0o400)}}, nil, nil),
		plugin:    secretPlugin,
		wantFiles: map[string]string{"pw": "hunter2"},
		wantModes: map[string]fs.FileMode{"pw": 0o400},
	}, {
		name:    "secret: missing required object",
		vol:     secretVolume("sec", "absent", nil, nil, nil),
		wantErr: `MountVolume.SetUp failed for volume "sec" : secret "absent" not found`,
	}, {
		name:      "secret: missing optional object gives an empty volume",
		vol:       secretVolume("sec", "absent", nil, nil, ptrTo(true)),
		plugin:    secretPlugin,
		wantFiles: map[string]string{},
	}, {
		name:    "secret: item naming a missing key",
		vol:     secretVolume("sec", "creds", []v1.KeyToPath{{Key: "token", Path: "t"}}, nil, nil),
		wantErr: `MountVolume.SetUp failed for volume "sec" : secret references non-existent secret key: token`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t)
			e.f.setConfigMap("app", map[string]string{"a.conf": "A", "b.conf": "B"})
			e.f.setSecret("creds", map[string]string{"user": "admin", "password": "hunter2"})
			pod := testPod(tt.vol)
			err := e.m.SetUp(context.Background(), pod)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("SetUp error = %v, want %q", err, tt.wantErr)
				}
				_ = setUpErrorFor(t, err, tt.vol.Name)
				return
			}
			if err != nil {
				t.Fatalf("SetUp: %v", err)
			}
			dir := e.m.volumeDir(pod.UID, tt.plugin, tt.vol.Name)
			if got := volumeFiles(t, dir); !maps.Equal(got, tt.wantFiles) {
				t.Errorf("files = %v, want %v", got, tt.wantFiles)
			}
			for path, mode := range tt.wantModes {
				assertMode(t, filepath.Join(dir, path), mode)
			}
		})
	}
}

func TestSetUpDownwardAPI(t *testing.T) {
	e := newTestEnv(t, WithNodeAllocatable(func() (v1.ResourceList, error) {
		return v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")}, nil
	}))
	item := func(path, field string) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{FieldPath: field}}
	}
	res := func(path, res, divisor string) v1.DownwardAPIVolumeFile {
		f := v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: res}}
		if divisor != "" {
			f.ResourceFieldRef.Divisor = resource.MustParse(divisor)
		}
		return f
	}
	pod := testPod(v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{
			item("name", "metadata.name"),
			item("namespace", "metadata.namespace"),
			item("uid", "metadata.uid"),
			item("labels", "metadata.labels"),
			item("annotations", "metadata.annotations"),
			item("app", "metadata.labels['app']"),
			{Path: "private", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: ptrTo[int32](0o600)},
			res("cpu_limit", "limits.cpu", "1m"),
			res("cpu_request", "requests.cpu", ""),
			res("mem_limit", "limits.memory", "1Mi"),
			res("mem_request", "requests.memory", "1Mi"),
		},
	}}})
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("1500Ki")},
	}
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	dir := e.m.volumeDir(pod.UID, downwardAPIPlugin, "info")
	want := map[string]string{
		"name":        "web",
		"namespace":   "ns",
		"uid":         "uid-1",
		"labels":      "app=\"web\"\ntier=\"front\"",
		"annotations": `note="a \"quoted\" value"`,
		"app":         "web",
		"private":     "web",
		"cpu_limit":   "500",
		"cpu_request": "1",    // 250m rounded up to whole cores
		"mem_limit":   "8192", // no limit: node allocatable, in Mi
		"mem_request": "2",    // 1500Ki rounded up to Mi
	}
	if got := volumeFiles(t, dir); !maps.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	assertMode(t, filepath.Join(dir, "name"), 0o644)
	assertMode(t, filepath.Join(dir, "private"), 0o600)

	// Labels change: SetUp leaves the set-up pod alone, Refresh follows.
	pod.Labels["tier"] = "back"
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("second SetUp: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "labels")); got != "app=\"web\"\ntier=\"front\"" {
		t.Errorf("labels after a second SetUp = %q, want them unchanged", got)
	}
	if err := e.m.Refresh(context.Background(), pod); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "labels")); got != "app=\"web\"\ntier=\"back\"" {
		t.Errorf("labels after Refresh = %q", got)
	}
}

func TestSetUpProjected(t *testing.T) {
	e := newTestEnv(t)
	e.f.setConfigMap("ca", map[string]string{"ca.crt": "CA"})
	e.f.setSecret("creds", map[string]string{"user": "admin"})
	pod := testPod(v1.Volume{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: ptrTo[int32](0o640),
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault", ExpirationSeconds: ptrTo[int64](600)}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "ca"}}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: ptrTo(true)}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "creds"},
				Items: []v1.KeyToPath{{Key: "user", Path: "creds/user", Mode: ptrTo[int32](0o400)}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}})
	ctx := context.Background()
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	dir := e.m.volumeDir(pod.UID, projectedPlugin, "kube-api-access")
	want := map[string]string{
		"token": "token--1", "vault-token": "token-vault-2",
		"ca.crt": "CA", "creds/user": "admin", "namespace": "ns",
	}
	if got := volumeFiles(t, dir); !maps.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	assertMode(t, filepath.Join(dir, "token"), 0o640)
	assertMode(t, filepath.Join(dir, "creds/user"), 0o400)
	wantCalls := []tokenCall{{"", 3600}, {"vault", 600}}
	if len(e.f.tokenCalls) != 2 || e.f.tokenCalls[0] != wantCalls[0] || e.f.tokenCalls[1] != wantCalls[1] {
		t.Fatalf("token requests = %v, want %v", e.f.tokenCalls, wantCalls)
	}
	if next, ok := e.m.NextRefresh(pod.UID); !ok || !next.Equal(e.clock.Now().Add(480*time.Second)) {
		t.Errorf("NextRefresh = %v, %v; want 80%% of 600s from now", next, ok)
	}

	// Before 80% of a token's lifetime Refresh does nothing; after, it
	// asks again for the token due, and SetUp never does.
	e.clock.Step(400 * time.Second)
	if err := e.m.Refresh(ctx, pod); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if len(e.f.tokenCalls) != 2 {
		t.Fatalf("token requested again before refresh time: %v", e.f.tokenCalls)
	}
	e.clock.Step(100 * time.Second)
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	if len(e.f.tokenCalls) != 2 {
		t.Fatalf("SetUp of a set-up pod requested a token: %v", e.f.tokenCalls)
	}
	if err := e.m.Refresh(ctx, pod); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if len(e.f.tokenCalls) != 3 || e.f.tokenCalls[2].audience != "vault" {
		t.Fatalf("token requests after refresh time = %v, want the vault token renewed", e.f.tokenCalls)
	}
	if got := readFile(t, filepath.Join(dir, "vault-token")); got != "token-vault-3" {
		t.Errorf("vault-token after refresh = %q", got)
	}
}

func TestSetUpProjectedUnsupportedSources(t *testing.T) {
	tests := []struct {
		name    string
		source  v1.VolumeProjection
		wantErr string
	}{{
		name:    "clusterTrustBundle naming neither a bundle nor a signer",
		source:  v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "ca"}},
		wantErr: `MountVolume.SetUp failed for volume "p" : clusterTrustBundle source names neither a bundle nor a signer`,
	}, {
		name:    "podCertificate of an unknown key type",
		source:  v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{SignerName: "x/y", KeyType: "DSA"}},
		wantErr: `MountVolume.SetUp failed for volume "p" : unknown podCertificate key type "DSA"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t)
			pod := testPod(v1.Volume{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{tt.source}}}})
			if err := e.m.SetUp(context.Background(), pod); err == nil || err.Error() != tt.wantErr {
				t.Fatalf("SetUp error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestSetUpFSGroup(t *testing.T) {
	e := newTestEnv(t)
	e.f.setConfigMap("app", map[string]string{"a": "A", "b": "B"})
	pod := testPod(
		configMapVolume("cfg", "app", []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "b", Path: "sub/b", Mode: ptrTo[int32](0o400)}}, nil, nil),
		v1.Volume{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptrTo[int64](2000)}
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	cfg := e.m.volumeDir(pod.UID, configMapPlugin, "cfg")
	assertMode(t, filepath.Join(cfg, "a"), 0o644)
	assertMode(t, filepath.Join(cfg, "sub/b"), 0o440)
	assertMode(t, filepath.Join(cfg, "sub"), 0o755|fs.ModeSetgid)
	assertGroup(t, filepath.Join(cfg, "sub/b"), 2000)
	tok := e.m.volumeDir(pod.UID, projectedPlugin, "tok")
	assertMode(t, filepath.Join(tok, "token"), 0o640)
	assertGroup(t, filepath.Join(tok, "token"), 2000)
	scratch := e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch")
	assertMode(t, scratch, 0o777|fs.ModeSetgid)
	assertGroup(t, scratch, 2000)
}

// A restarted nodelet sets up the volumes of the running pods it adopts
// again; the fsGroup walk of an emptyDir is not repeated, so a file a
// container made private stays private.
func TestFSGroupWalkNotRepeatedAfterRestart(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptrTo[int64](2000)}
	ctx := context.Background()
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	scratch := e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch")
	private := filepath.Join(scratch, "private")
	if err := os.WriteFile(private, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(private, 0o600); err != nil {
		t.Fatal(err)
	}

	restarted, err := New(e.root, e.f, WithClock(e.clock), WithMounter(e.mounter))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := restarted.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp after restart: %v", err)
	}
	assertMode(t, private, 0o600)
	assertMode(t, scratch, 0o777|fs.ModeSetgid)

	// Removed from under nodelet, the volume is made and handed over again.
	if err := os.RemoveAll(scratch); err != nil {
		t.Fatal(err)
	}
	again, err := New(e.root, e.f, WithClock(e.clock), WithMounter(e.mounter))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := again.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp of a removed volume: %v", err)
	}
	assertMode(t, scratch, 0o777|fs.ModeSetgid)
	assertGroup(t, scratch, 2000)
}
