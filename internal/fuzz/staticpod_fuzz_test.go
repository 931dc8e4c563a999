package fuzz

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/staticpod"
)

const (
	// manifestPath and manifestNode are where FuzzStaticManifest's
	// manifests come from and the node they are for.
	manifestPath = "/etc/kubernetes/manifests/m.yaml"
	manifestNode = "node"
	// manifestSecret is a password in an env value of a seed; no error may
	// quote it.
	manifestSecret = "hunter2-SECRET"
)

// secretEnvValue is manifestSecret where a seed has it: a double-quoted
// value, with or without an explicit tag.
var secretEnvValue = regexp.MustCompile(`value: (![^\s"]*\s+)?"password: ` + manifestSecret + `"`)

// uidChars are the characters of a static pod's UID (see staticpod.Validate).
var uidChars = regexp.MustCompile(`^[A-Za-z0-9-]+$`)

const apiServerManifest = `apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  labels: {component: kube-apiserver, tier: control-plane}
  annotations:
    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: 10.0.0.1:6443
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.33.0
    imagePullPolicy: IfNotPresent
    command:
    - kube-apiserver
    - --advertise-address=10.0.0.1
    - --client-ca-file=/etc/kubernetes/pki/ca.crt
    - --etcd-servers=https://127.0.0.1:2379
    - --secure-port=6443
    livenessProbe:
      httpGet: {host: 10.0.0.1, path: /livez, port: 6443, scheme: HTTPS}
      initialDelaySeconds: 10
      timeoutSeconds: 15
      failureThreshold: 8
    readinessProbe:
      httpGet: {host: 10.0.0.1, path: /readyz, port: 6443, scheme: HTTPS}
    startupProbe:
      httpGet: {host: 10.0.0.1, path: /livez, port: 6443, scheme: HTTPS}
      failureThreshold: 24
    resources:
      requests: {cpu: 250m}
    volumeMounts:
    - {name: ca-certs, mountPath: /etc/ssl/certs, readOnly: true}
    - {name: k8s-certs, mountPath: /etc/kubernetes/pki, readOnly: true}
    - {name: admin-conf, mountPath: /etc/kubernetes/admin.conf, readOnly: true}
  volumes:
  - name: ca-certs
    hostPath: {path: /etc/ssl/certs, type: DirectoryOrCreate}
  - name: k8s-certs
    hostPath: {path: /etc/kubernetes/pki, type: DirectoryOrCreate}
  - name: admin-conf
    hostPath: {path: /etc/kubernetes/admin.conf, type: FileOrCreate}
`

const initContainersManifest = `apiVersion: v1
kind: Pod
metadata: {name: etcd, namespace: kube-system}
spec:
  initContainers:
  - name: fix-perms
    image: busybox:1.36
    command: [sh, -c, "mkdir -p /data/member && chmod 700 /data"]
    volumeMounts:
    - {name: data, mountPath: /data}
  - name: sidecar
    image: busybox:1.36
    restartPolicy: Always
    command: [sleep, infinity]
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.21-0
    command: [etcd, --data-dir=/var/lib/etcd]
    ports:
    - {name: client, containerPort: 2379, hostPort: 2379}
    volumeMounts:
    - {name: data, mountPath: /var/lib/etcd}
    - {name: host-etcd, mountPath: /var/lib/etcd-host}
  volumes:
  - name: data
    emptyDir: {}
  - name: host-etcd
    hostPath: {path: /var/lib/etcd, type: DirectoryOrCreate}
`

const subPathManifest = `apiVersion: v1
kind: Pod
metadata: {name: cache}
spec:
  restartPolicy: OnFailure
  containers:
  - name: writer
    image: busybox:1.36
    command: [sh, -c, "echo hi > /out/msg"]
    env:
    - {name: DIR, value: logs}
    volumeMounts:
    - {name: scratch, mountPath: /out, subPath: out}
    - {name: scratch, mountPath: /logs, subPathExpr: $(DIR)}
  - name: reader
    image: busybox:1.36
    command: [sleep, "3600"]
    volumeMounts:
    - {name: scratch, mountPath: /in, subPath: out, readOnly: true}
    - {name: mem, mountPath: /mem}
  volumes:
  - name: scratch
    emptyDir: {sizeLimit: 10Mi}
  - name: mem
    emptyDir: {medium: Memory}
`

const jsonManifest = `{"apiVersion":"v1","kind":"Pod",
"metadata":{"name":"kube-scheduler","namespace":"kube-system"},
"spec":{"hostNetwork":true,"containers":[{"name":"kube-scheduler","image":"registry.k8s.io/kube-scheduler:v1.33.0",
"command":["kube-scheduler","--kubeconfig=/etc/kubernetes/scheduler.conf"],
"livenessProbe":{"httpGet":{"path":"/healthz","port":10259,"scheme":"HTTPS"}},
"volumeMounts":[{"name":"kubeconfig","mountPath":"/etc/kubernetes/scheduler.conf","readOnly":true}]}],
"volumes":[{"name":"kubeconfig","hostPath":{"path":"/etc/kubernetes/scheduler.conf","type":"FileOrCreate"}}]}}
`

const podListManifest = `apiVersion: v1
kind: PodList
items:
- metadata: {name: a, labels: {app: a}}
  spec:
    containers: [{name: c, image: busybox:1.36, command: [sleep, "3600"]}]
- metadata: {name: b, namespace: kube-system}
  spec:
    containers: [{name: c, image: busybox:1.36, ports: [{containerPort: 8080, hostPort: 18080}]}]
`

const listManifest = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a}
  spec: {containers: [{name: c, image: busybox:1.36}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: b}
  spec:
    volumes: [{name: logs, hostPath: {path: /var/log/b, type: DirectoryOrCreate}}]
    containers: [{name: c, image: busybox:1.36, volumeMounts: [{name: logs, mountPath: /logs, subPath: app}]}]
`

const uidManifest = `apiVersion: v1
kind: Pod
metadata: {name: pinned, uid: 0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9}
spec: {containers: [{name: c, image: busybox:1.36}]}
`

// climbingUIDManifest must be refused: its UID would name a directory
// outside the pods directory.
const climbingUIDManifest = `apiVersion: v1
kind: Pod
metadata: {name: climber, uid: ../../etc}
spec: {containers: [{name: c, image: busybox:1.36}]}
`

// secretManifest has a password in an env value and a syntax error after
// it.
const secretManifest = `apiVersion: v1
kind: Pod
metadata: {name: db}
spec:
  containers:
  - name: db
    image: postgres:17
    env:
    - name: POSTGRES_PASSWORD
      value: "password: ` + manifestSecret + `"
    - name: POSTGRES_USER
     value: [admin
`

// staticManifestSeeds are FuzzStaticManifest's seed corpus.
func staticManifestSeeds() [][]byte {
	var seeds [][]byte
	for _, s := range []string{apiServerManifest, initContainersManifest, subPathManifest, jsonManifest,
		podListManifest, listManifest, uidManifest, climbingUIDManifest, secretManifest} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// TestStaticManifestSeeds checks that the seeds are what they stand for:
// manifests that decode, and the two that must not.
func TestStaticManifestSeeds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest string
		pods     int
		wantErr  string
	}{
		{"kube-apiserver", apiServerManifest, 1, ""},
		{"init containers", initContainersManifest, 1, ""},
		{"subPath", subPathManifest, 1, ""},
		{"JSON", jsonManifest, 1, ""},
		{"PodList", podListManifest, 2, ""},
		{"List", listManifest, 2, ""},
		{"its own UID", uidManifest, 1, ""},
		{"a UID that climbs", climbingUIDManifest, 0, "metadata.uid"},
		{"a password and a syntax error", secretManifest, 0, "parsing manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := staticpod.Decode([]byte(tc.manifest), staticpod.SourceFile, manifestPath, manifestNode)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one about %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(pods) != tc.pods {
				t.Fatalf("%d pods, error %v; want %d pods", len(pods), err, tc.pods)
			}
		})
	}
}

func TestQuotesEnvSecret(t *testing.T) {
	quoted := "m.yaml: a message that quotes " + manifestSecret
	for _, tc := range []struct {
		name, data, msg string
		want            bool
	}{
		{"the seed's env value, quoted", secretManifest, quoted, true},
		{"the seed's env value, not quoted", secretManifest, "m.yaml: parsing manifest: yaml: line 11", false},
		{"an env value with a tag", "env: [{name: P, value: !!int \"password: " + manifestSecret + "\"}]", quoted, true},
		{"moved into a name", "containers: [{name: " + manifestSecret + "}]", quoted, false},
		{"in a name and an env value", "name: " + manifestSecret + "\nvalue: \"password: " + manifestSecret + "\"", quoted, false},
	} {
		if got := quotesEnvSecret([]byte(tc.data), tc.msg); got != tc.want {
			t.Errorf("%s: quotesEnvSecret = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// FuzzStaticManifest decodes static pod manifests as the file source does
// and checks what staticpod.Decode promises of every pod it returns (valid,
// named for the node, a UID that is safe as a directory name, static), then
// runs each through the pod pipeline's checks (see runPipeline). An error
// names the manifest and never quotes a password given as an env value.
func FuzzStaticManifest(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("subPath mounts need root")
	}
	for _, seed := range staticManifestSeeds() {
		f.Add(seed)
	}
	f.Fuzz(checkStaticManifest)
}

func checkStaticManifest(t *testing.T, data []byte) {
	pods, err := staticpod.Decode(data, staticpod.SourceFile, manifestPath, manifestNode)
	if err != nil {
		checkDecodeError(t, data, err)
		return
	}
	for _, pod := range pods {
		checkStaticPod(t, pod)
	}
	hostDir := t.TempDir()
	for _, pod := range pods {
		relocateHostPaths(pod, hostDir)
		runPipeline(t, &gen{data: data}, pod, nil)
	}
}

// checkDecodeError fails the test when err does not name the manifest or
// quotes the password of an env value.
func checkDecodeError(t *testing.T, data []byte, err error) {
	t.Helper()
	msg := err.Error()
	if !strings.Contains(msg, manifestPath) {
		t.Fatalf("error %q does not name the manifest", msg)
	}
	if quotesEnvSecret(data, msg) {
		t.Fatalf("error %q quotes the password of an env value", msg)
	}
}

// quotesEnvSecret reports whether msg quotes manifestSecret while data has
// it only as the seed does, in a double-quoted `value: "password: ..."`.
// Where a mutation moved it elsewhere (into a name, an image) validation
// rightly quotes the value it refuses.
func quotesEnvSecret(data []byte, msg string) bool {
	asValue := bytes.Count(data, []byte(manifestSecret)) == len(secretEnvValue.FindAllIndex(data, -1))
	return asValue && strings.Contains(msg, manifestSecret)
}

// checkStaticPod fails the test when a decoded pod is not what Decode
// promises.
func checkStaticPod(t *testing.T, pod *v1.Pod) {
	t.Helper()
	if errs := staticpod.Validate(pod); len(errs) > 0 {
		t.Fatalf("Decode returned pod %s, which does not validate: %v", staticpod.FullName(pod), errs.ToAggregate())
	}
	if !strings.HasSuffix(pod.Name, "-"+manifestNode) || pod.Spec.NodeName != manifestNode {
		t.Fatalf("pod %s (node %q) is not named for node %s", staticpod.FullName(pod), pod.Spec.NodeName, manifestNode)
	}
	if uid := string(pod.UID); len(uid) > 128 || !uidChars.MatchString(uid) {
		t.Fatalf("pod %s has UID %q: want 1 to 128 letters, digits and '-'", staticpod.FullName(pod), uid)
	}
	if pod.Annotations[staticpod.ConfigHashAnnotationKey] != string(pod.UID) {
		t.Fatalf("pod %s: config.hash %q, want its UID %q", staticpod.FullName(pod), pod.Annotations[staticpod.ConfigHashAnnotationKey], pod.UID)
	}
	if !staticpod.IsStatic(pod) {
		t.Fatalf("pod %s is not static: annotations %v", staticpod.FullName(pod), pod.Annotations)
	}
}

// relocateHostPaths moves the pod's hostPath volumes below hostDir: a
// manifest names the host's own paths, and the volume manager creates the
// DirectoryOrCreate and FileOrCreate ones, which the fuzzer must not do on
// the machine it runs on. FuzzPodPipeline's pods have theirs there too.
func relocateHostPaths(pod *v1.Pod, hostDir string) {
	for i := range pod.Spec.Volumes {
		if hp := pod.Spec.Volumes[i].HostPath; hp != nil {
			hp.Path = filepath.Join(hostDir, hp.Path)
		}
	}
}
