package staticpod

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: c
    image: busybox:1.36
    unknownField: tolerated
`

const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"kube-system"},
"spec":{"containers":[{"name":"c","image":"busybox"}]}}`

const podListYAML = `apiVersion: v1
kind: PodList
items:
- metadata: {name: a}
  spec: {containers: [{name: c, image: busybox:1.36}]}
- metadata: {name: b}
  spec: {containers: [{name: c, image: busybox:1.36}]}
`

const listYAML = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a}
  spec: {containers: [{name: c, image: busybox:1.36}]}
`

func TestDecode(t *testing.T) {
	tests := []struct {
		name, data, source string
		wantNames          []string
		wantErr            string
		notIn              string // must not be in the error
	}{
		{name: "yaml pod", data: podYAML, source: SourceFile, wantNames: []string{"default/web-node-a"}},
		{name: "json pod keeps its namespace", data: podJSON, source: SourceHTTP, wantNames: []string{"kube-system/web-node-a"}},
		{name: "pod list", data: podListYAML, source: SourceHTTP, wantNames: []string{"default/a-node-a", "default/b-node-a"}},
		{name: "v1 list", data: listYAML, source: SourceFile, wantNames: []string{"default/a-node-a"}},
		{name: "empty", data: "  \n", wantErr: "empty manifest"},
		{name: "bad yaml", data: "kind: Pod\n  metadata: [", wantErr: "parsing manifest"},
		{name: "no kind", data: `{"metadata":{"name":"x"}}`, wantErr: "has no kind"},
		{name: "a page without a kind is not quoted", data: `{"secret-token":"s3cr3t","html":"<html>"}`, wantErr: "has no kind", notIn: "s3cr3t"},
		{name: "a null key does not quote the map", data: "apiVersion: v1\nkind: Pod\n~:\n  env: [{name: P, value: \"password: s3cr3t\"}]\n", wantErr: "not a valid document", notIn: "s3cr3t"},
		{name: "a tag on a value does not quote it", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: c\n    image: x\n    env: [{name: P, value: !!int \"password: s3cr3t\"}]\n", wantErr: "not a valid document", notIn: "s3cr3t"},
		{name: "a time field does not quote its value", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x, creationTimestamp: \"s3cr3t\"}\nspec: {containers: [{name: c, image: x}]}\n", wantErr: "not a valid document", notIn: "s3cr3t"},
		{name: "a syntax error keeps its line", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: c\n   image: [s3cr3t\n", wantErr: "yaml: line 6", notIn: "s3cr3t"},
		{name: "a UID that climbs out of the pods directory", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x, uid: ../../etc}\nspec: {containers: [{name: c, image: x}]}\n", wantErr: "metadata.uid: Invalid value"},
		{name: "a UID with a slash", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x, uid: a/b}\nspec: {containers: [{name: c, image: x}]}\n", wantErr: "metadata.uid: Invalid value"},
		{name: "a UID with an underscore, the log directory's separator", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x, uid: a_b}\nspec: {containers: [{name: c, image: x}]}\n", wantErr: "metadata.uid: Invalid value"},
		{name: "not a pod", data: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", wantErr: `not a Pod, PodList or List of pods: kind "ConfigMap"`},
		{name: "list of a non-pod", data: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: x}}\n", wantErr: "items[0]: not a Pod"},
		{name: "invalid pod names the field", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c}]}\n", wantErr: "spec.containers[0].image: Required value"},
		{name: "invalid list item names the item", data: "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: []}\n", wantErr: "items[0]: invalid pod default/a-node-a"},
		{name: "no name", data: "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c, image: x}]}\n", wantErr: "metadata.name: Required value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := Decode([]byte(tc.data), tc.source, "/etc/manifests/web.yaml", "Node-A")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "/etc/manifests/web.yaml") {
					t.Errorf("error %q does not name the file", err)
				}
				if tc.notIn != "" && strings.Contains(err.Error(), tc.notIn) {
					t.Errorf("error %q quotes the manifest's %q", err, tc.notIn)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, pod := range pods {
				names = append(names, FullName(pod))
				checkStatic(t, pod, tc.source)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") {
				t.Errorf("pods %v, want %v", names, tc.wantNames)
			}
		})
	}
}

// checkStatic checks what Decode sets on every static pod.
func checkStatic(t *testing.T, pod *corev1.Pod, source string) {
	t.Helper()
	if pod.Spec.NodeName != "Node-A" {
		t.Errorf("nodeName %q", pod.Spec.NodeName)
	}
	if len(pod.UID) != uidLength {
		t.Errorf("UID %q is not %d long", pod.UID, uidLength)
	}
	if pod.Annotations[ConfigHashAnnotationKey] != string(pod.UID) {
		t.Errorf("config.hash %q, want the UID %q", pod.Annotations[ConfigHashAnnotationKey], pod.UID)
	}
	if pod.Annotations[ConfigSourceAnnotationKey] != source {
		t.Errorf("config.source %q, want %q", pod.Annotations[ConfigSourceAnnotationKey], source)
	}
	if pod.Status.Phase != corev1.PodPending {
		t.Errorf("phase %q", pod.Status.Phase)
	}
	tolerates := false
	for _, tol := range pod.Spec.Tolerations {
		if tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoExecute {
			tolerates = true
		}
	}
	if tolerates != (source == SourceFile) {
		t.Errorf("tolerates every NoExecute taint: %v, want %v (source %s)", tolerates, !tolerates, source)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Spec.Containers[0].TerminationMessagePath == "" {
		t.Errorf("pod not defaulted: %+v", pod.Spec)
	}
}

// The UID depends on the manifest, the node and the origin, and on nothing else.
func TestDecodeUID(t *testing.T) {
	uid := func(data, origin, node string) string {
		t.Helper()
		pods, err := Decode([]byte(data), SourceFile, origin, node)
		if err != nil {
			t.Fatal(err)
		}
		return string(pods[0].UID)
	}
	base := uid(podYAML, "/m/web.yaml", "n1")
	tests := []struct {
		name, data, origin, node string
		same                     bool
	}{
		{"same manifest", podYAML, "/m/web.yaml", "n1", true},
		{"same pod as JSON with defaults spelled out", strings.Replace(podYAML, "image: busybox:1.36", "image: busybox:1.36\n    imagePullPolicy: IfNotPresent", 1), "/m/web.yaml", "n1", true},
		{"changed image", strings.Replace(podYAML, "1.36", "1.37", 1), "/m/web.yaml", "n1", false},
		{"changed label", strings.Replace(podYAML, "app: web", "app: web2", 1), "/m/web.yaml", "n1", false},
		{"other node", podYAML, "/m/web.yaml", "n2", false},
		{"other file", podYAML, "/m/web2.yaml", "n1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := uid(tc.data, tc.origin, tc.node); (got == base) != tc.same {
				t.Errorf("UID %s, base %s, want same=%v", got, base, tc.same)
			}
		})
	}
}

// A manifest copied from the API server keeps none of the server's fields
// but its UID, which the kubelet also keeps.
func TestDecodeDropsServerFields(t *testing.T) {
	data := `apiVersion: v1
kind: Pod
metadata: {name: web, uid: set-by-hand, resourceVersion: "12", creationTimestamp: "2024-01-01T00:00:00Z"}
spec: {containers: [{name: c, image: busybox:1.36}]}
status: {phase: Running, podIP: 10.0.0.1}
`
	pods, err := Decode([]byte(data), SourceFile, "/m/web.yaml", "n1")
	if err != nil {
		t.Fatal(err)
	}
	pod := pods[0]
	if pod.ResourceVersion != "" || !pod.CreationTimestamp.IsZero() || pod.Status.PodIP != "" || pod.Status.Phase != corev1.PodPending {
		t.Errorf("server fields kept: rv %q created %v status %+v", pod.ResourceVersion, pod.CreationTimestamp, pod.Status)
	}
	if pod.UID != "set-by-hand" || pod.Annotations[ConfigHashAnnotationKey] != "set-by-hand" {
		t.Errorf("UID %q, config.hash %q: the manifest's UID is not kept", pod.UID, pod.Annotations[ConfigHashAnnotationKey])
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{podYAML, podJSON, podListYAML, listYAML, "", "kind: Pod", "{}", "apiVersion: v1\nkind: Pod\nspec: {volumes: [{name: v}]}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := Decode(data, SourceFile, "/m/f.yaml", "node")
		if err == nil && len(pods) == 0 && !strings.Contains(string(data), "List") {
			t.Errorf("no pods and no error")
		}
		for _, pod := range pods {
			if errs := Validate(pod); len(errs) > 0 {
				t.Errorf("Decode returned a pod that does not validate: %v", errs)
			}
		}
	})
}
