package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// objectsNode is the node the referenced-object specs' nodelet runs.
	objectsNode = "e2e-objects"
	// liveUpdateTimeout bounds a ConfigMap update reaching a running
	// container's volume.
	liveUpdateTimeout = 2 * time.Second
	// afterOutageDeleteTimeout bounds the deletion of a pod after an API
	// server outage.
	afterOutageDeleteTimeout = 4 * time.Minute
	// apiOutage is how long the API server is stopped.
	apiOutage = 45 * time.Second
	// objectAppearsTimeout bounds a pod that waited for an object
	// starting once it is created: the change feed enqueues it, no retry
	// back-off is waited out.
	objectAppearsTimeout = 5 * time.Second
	// cacheUpdateTimeout bounds a change reaching a running container's
	// volume with the Cache strategy of the cached-objects Describe: its
	// TTL, a sync period, and a write.
	cacheUpdateTimeout = 10 * time.Second
	// failedMountTimeout bounds the FailedMount Event of a volume whose
	// required object was deleted.
	failedMountTimeout = 10 * time.Second
)

// consistentReader is a shell loop that reads keys a and b of dir, which
// are always updated together, as fast as it can: it reads a, b, then a
// again, and when both reads of a agree (no update in between: values only
// grow) b must equal them, else it appends the pair to /out/<name>.torn.
// It keeps the last value seen in /out/<name> and counts the checks in
// /out/<name>.checks, so a test can tell that it ran.
func consistentReader(dir, name string) string {
	return fmt.Sprintf(`n=0; while true; do a=$(cat %[1]s/a); b=$(cat %[1]s/b); a2=$(cat %[1]s/a); `+
		`if [ "$a" = "$a2" ]; then n=$((n+1)); [ "$a" = "$b" ] || echo "$a $b" >> /out/%[2]s.torn; fi; `+
		`echo "$a" > /out/%[2]s.tmp; mv /out/%[2]s.tmp /out/%[2]s; echo $n > /out/%[2]s.ctmp; mv /out/%[2]s.ctmp /out/%[2]s.checks; done`, dir, name)
}

// seenBy returns what the reader name last saw.
func seenBy(out, name string) func() string {
	return func() string {
		data, _ := os.ReadFile(filepath.Join(out, name))
		return strings.TrimSpace(string(data))
	}
}

// readerChecksTimeout bounds the wait for a reader's 50th check.
const readerChecksTimeout = 30 * time.Second

// expectNeverTorn checks that the reader name made many consistent checks
// and none of them saw a mixed state. The reader keeps checking after the
// updates and is given until readerChecksTimeout to reach 50 checks in
// all: the updates alone may be over in fewer (on containerd 2 the spec
// ran 12 s, not 14, at the same rate of checks).
func expectNeverTorn(out, name string) {
	GinkgoHelper()
	var checks int
	Eventually(func(g Gomega) {
		var err error
		checks, err = strconv.Atoi(seenBy(out, name+".checks")())
		g.Expect(err).NotTo(HaveOccurred(), "the %s reader counted no checks", name)
		g.Expect(checks).To(BeNumerically(">=", 50), "the %s reader barely ran", name)
	}).WithTimeout(readerChecksTimeout).WithPolling(pollInterval).Should(Succeed())
	GinkgoWriter.Printf("%s reader: %d consistent checks\n", name, checks)
	Expect(filepath.Join(out, name+".torn")).NotTo(BeAnExistingFile(), "the %s reader saw a mixed state: %s", name, seenBy(out, name+".torn")())
}

// startsOf returns the lines the container appended to /out/starts.
func startsOf(out string) func() []string {
	return func() []string {
		data, _ := os.ReadFile(filepath.Join(out, "starts"))
		return strings.Fields(string(data))
	}
}

// createPod creates pod and, when the spec ends, deletes it and waits until
// it is gone, so that nodelet unmounts its tmpfs volumes before it stops.
func createPod(ctx context.Context, c client.Client, pod *corev1.Pod) {
	GinkgoHelper()
	Expect(c.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(c.Delete(ctx, pod))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(BeTrue(), "pod %s not gone", pod.Name)
	})
}

func configMapVolume(name, configMap string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}},
	}}
}

// secretData is a Secret's data whose keys a and b hold the same value
// made of round, recognisable in a log.
func secretData(round string) map[string][]byte {
	v := []byte(secretValue(round))
	return map[string][]byte{"a": v, "b": v}
}

func secretValue(round string) string { return "secret-value-" + round + "-" }

// expectNoEventMentions checks that no Event of namespace ns has s in its
// message.
func expectNoEventMentions(ctx context.Context, c client.Client, ns, s string) {
	GinkgoHelper()
	var events corev1.EventList
	Expect(c.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	Expect(events.Items).NotTo(BeEmpty())
	for _, e := range events.Items {
		Expect(e.Message).NotTo(ContainSubstring(s), "Event %s", e.Name)
	}
}

// volumeLister is a shell loop that writes, every 50 ms, what each volume
// mounted at /<dir> holds to /out/<dir>: "name=content;" for each file in
// ls order, nothing for an empty volume.
func volumeLister(dirs ...string) string {
	return fmt.Sprintf(`while true; do for d in %s; do s=""; for f in $(ls /$d); do s="$s$f=$(cat /$d/$f);"; done; `+
		`echo "$s" > /out/$d.tmp; mv /out/$d.tmp /out/$d; done; sleep 0.05; done`, strings.Join(dirs, " "))
}

// listerPod returns a pod on node whose container runs volumeLister over
// volumes, each mounted at /<name>, with out mounted at /out.
func listerPod(ns, name, node, out string, volumes ...corev1.Volume) *corev1.Pod {
	var dirs []string
	for _, v := range volumes {
		dirs = append(dirs, v.Name)
	}
	pod := utils.BusyboxPod(ns, name, node, "sh", "-c", volumeLister(dirs...))
	pod.Spec.Volumes = append(slices.Clone(volumes), corev1.Volume{Name: "out", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: out},
	}})
	for _, d := range dirs {
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: d, MountPath: "/" + d})
	}
	pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "out", MountPath: "/out"})
	return pod
}

// expectVolumes waits up to timeout until each volume of listerPod holds
// what want says (see volumeLister).
func expectVolumes(out string, timeout time.Duration, want map[string]string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		for dir, content := range want {
			g.Expect(seenBy(out, dir)()).To(Equal(content), "volume %s", dir)
		}
	}).WithTimeout(timeout).WithPolling(20 * time.Millisecond).Should(Succeed())
}

// keepVolumes checks that each volume of listerPod keeps holding what
// want says for d.
func keepVolumes(out string, d time.Duration, want map[string]string) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		for dir, content := range want {
			g.Expect(seenBy(out, dir)()).To(Equal(content), "volume %s", dir)
		}
	}).WithTimeout(d).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// failedMounts returns the messages of the FailedMount Events of ns.
func failedMounts(ctx context.Context, c client.Client, ns string) func(Gomega) []string {
	return func(g Gomega) []string {
		var events corev1.EventList
		g.Expect(c.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		var messages []string
		for _, e := range events.Items {
			if e.Reason == "FailedMount" {
				messages = append(messages, e.Message)
			}
		}
		return messages
	}
}

// runningContainerID waits until the pod's status shows its one container
// running and returns the container's ID.
func runningContainerID(ctx context.Context, c client.Client, ns, name string) string {
	GinkgoHelper()
	p := utils.WaitForPod(ctx, c, ns, name, apiTimeout, func(g Gomega, p *corev1.Pod) {
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		g.Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
	})
	return p.Status.ContainerStatuses[0].ContainerID
}

// expectSameContainer checks that the pod's container still runs as
// before, never restarted.
func expectSameContainer(g Gomega, p *corev1.Pod, containerID string) {
	g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
	g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(Equal(containerID))
	g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	g.Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
}

// optionalObjectsScenario runs the kubelet's "optional updates should be
// reflected in volume" on nodelet: optional configMap and secret volumes
// and projected sources whose objects are deleted lose their files within
// timeout, one created late gains them, and all follow a re-creation; the
// container is never restarted and no FailedMount is reported. With
// restart, nodelet is killed and restarted while the objects are gone.
func optionalObjectsScenario(ctx context.Context, env *utils.NodeletSpecs, node string, timeout time.Duration, restart bool) {
	ns := utils.NewNamespace(ctx, env.Admin)
	optional := ptr.To(true)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "opt-cm", Namespace: ns}, Data: map[string]string{"a": "1"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "opt-secret", Namespace: ns}, Data: map[string][]byte{"s": []byte("1")}}
	steady := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "steady", Namespace: ns}, Data: map[string]string{"k": "x"}}
	for _, obj := range []client.Object{cm, secret, steady} {
		Expect(env.Admin.Create(ctx, obj)).To(Succeed())
	}
	out, err := os.MkdirTemp("", "nodelet-e2e-objects-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, out)
	ref := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	pod := listerPod(ns, "optional", node, out,
		corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: ref("opt-cm"), Optional: optional}}},
		corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "opt-secret", Optional: optional}}},
		corev1.Volume{Name: "late", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "opt-late", Optional: optional}}},
		corev1.Volume{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("opt-cm"), Optional: optional,
				Items: []corev1.KeyToPath{{Key: "a", Path: "cm-a"}}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: ref("opt-secret"), Optional: optional,
				Items: []corev1.KeyToPath{{Key: "s", Path: "sec-s"}}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("steady"),
				Items: []corev1.KeyToPath{{Key: "k", Path: "steady"}}}},
		}}}},
	)
	createPod(ctx, env.Admin, pod)
	expectVolumes(out, podStartTimeout, map[string]string{"cm": "a=1;", "sec": "s=1;", "late": "", "proj": "cm-a=1;sec-s=1;steady=x;"})
	containerID := runningContainerID(ctx, env.Admin, ns, "optional")

	By("deleting the optional ConfigMap and Secret, and creating the one that was missing")
	Expect(env.Admin.Delete(ctx, cm)).To(Succeed())
	Expect(env.Admin.Delete(ctx, secret)).To(Succeed())
	Expect(env.Admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "opt-late", Namespace: ns},
		Data: map[string][]byte{"l": []byte("1")}})).To(Succeed())
	start := time.Now()
	gone := map[string]string{"cm": "", "sec": "", "late": "l=1;", "proj": "steady=x;"}
	expectVolumes(out, timeout, gone)
	GinkgoWriter.Printf("deletions and creation seen in the container after %v\n", time.Since(start))

	if restart {
		By("restarting nodelet while the objects are gone")
		Expect(env.Nodelet.Kill()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		keepVolumes(out, 5*time.Second, gone)
		utils.WaitForPod(ctx, env.Admin, ns, "optional", apiTimeout, func(g Gomega, p *corev1.Pod) {
			expectSameContainer(g, p, containerID)
		})
	}

	By("creating the deleted ones again")
	cm.ResourceVersion, secret.ResourceVersion = "", ""
	cm.Data = map[string]string{"a": "2"}
	secret.Data = map[string][]byte{"s": []byte("2")}
	Expect(env.Admin.Create(ctx, cm)).To(Succeed())
	Expect(env.Admin.Create(ctx, secret)).To(Succeed())
	expectVolumes(out, timeout, map[string]string{"cm": "a=2;", "sec": "s=2;", "late": "l=1;", "proj": "cm-a=2;sec-s=2;steady=x;"})
	expectSameContainer(Default, utils.GetPod(ctx, env.Admin, ns, "optional")(Default), containerID)
	Expect(failedMounts(ctx, env.Admin, ns)(Default)).To(BeEmpty())
}

// requiredObjectsScenario deletes the ConfigMap and Secret that volumes
// require: the volumes keep their files, a FailedMount Event names each,
// and, once the objects are created again, the volumes show them; the
// container is never restarted. With restart, nodelet is killed and
// restarted while the objects are gone.
func requiredObjectsScenario(ctx context.Context, env *utils.NodeletSpecs, node string, timeout time.Duration, restart bool) {
	ns := utils.NewNamespace(ctx, env.Admin)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"a": "1"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, Data: map[string][]byte{"s": []byte("1")}}
	Expect(env.Admin.Create(ctx, cm)).To(Succeed())
	Expect(env.Admin.Create(ctx, secret)).To(Succeed())
	out, err := os.MkdirTemp("", "nodelet-e2e-objects-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, out)
	pod := listerPod(ns, "required", node, out,
		configMapVolume("cfg", "settings"),
		corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
	)
	createPod(ctx, env.Admin, pod)
	kept := map[string]string{"cfg": "a=1;", "sec": "s=1;"}
	expectVolumes(out, podStartTimeout, kept)
	containerID := runningContainerID(ctx, env.Admin, ns, "required")

	By("deleting them")
	Expect(env.Admin.Delete(ctx, cm)).To(Succeed())
	Expect(env.Admin.Delete(ctx, secret)).To(Succeed())
	Eventually(failedMounts(ctx, env.Admin, ns)).WithTimeout(timeout + failedMountTimeout).WithPolling(pollInterval).Should(ContainElements(
		`MountVolume.SetUp failed for volume "cfg" : configmap "settings" not found`,
		`MountVolume.SetUp failed for volume "sec" : secret "creds" not found`,
	))
	keepVolumes(out, 3*time.Second, kept)

	if restart {
		By("restarting nodelet while they are gone")
		Expect(env.Nodelet.Kill()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		keepVolumes(out, 5*time.Second, kept)
	}
	utils.WaitForPod(ctx, env.Admin, ns, "required", apiTimeout, func(g Gomega, p *corev1.Pod) {
		expectSameContainer(g, p, containerID)
		g.Expect(utils.PodReady(p)).To(BeTrue())
	})

	By("creating them again")
	cm.ResourceVersion, secret.ResourceVersion = "", ""
	cm.Data = map[string]string{"a": "2"}
	secret.Data = map[string][]byte{"s": []byte("2")}
	Expect(env.Admin.Create(ctx, cm)).To(Succeed())
	Expect(env.Admin.Create(ctx, secret)).To(Succeed())
	expectVolumes(out, timeout+objectAppearsTimeout, map[string]string{"cfg": "a=2;", "sec": "s=2;"})
	expectSameContainer(Default, utils.GetPod(ctx, env.Admin, ns, "required")(Default), containerID)
}

var _ = Describe("Referenced objects and the service environment", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		// Debug logging, so that the check that no Secret value is logged
		// covers every log line.
		return utils.NodeletOptions{NodeName: objectsNode, API: apiServer, Containerd: ctrd, Args: []string{"-v=1"}}
	})

	// hostDir is a directory of the test mounted into a container, to read
	// what the container sees.
	hostDir := func() string {
		GinkgoHelper()
		dir, err := os.MkdirTemp("", "nodelet-e2e-objects-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		return dir
	}
	withOut := func(pod *corev1.Pod, dir string) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "out", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: dir},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "out", MountPath: "/out"})
	}
	readEnv := func(dir string) func(Gomega) map[string]string {
		return func(g Gomega) map[string]string {
			data, err := os.ReadFile(filepath.Join(dir, "env"))
			g.Expect(err).NotTo(HaveOccurred())
			vars := map[string]string{}
			for _, line := range strings.Split(string(data), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					vars[k] = v
				}
			}
			return vars
		}
	}

	It("gives every container the kubernetes Service's address and the Services of its namespace", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		master := &corev1.Service{}
		Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, master)).To(Succeed())
		web := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web-front", Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		}
		Expect(env.Admin.Create(ctx, web)).To(Succeed())

		linked, unlinked := hostDir(), hostDir()
		for name, dir := range map[string]string{"linked": linked, "unlinked": unlinked} {
			pod := utils.BusyboxPod(ns, name, objectsNode, "sh", "-c", "env > /out/env; exec sleep 3600")
			withOut(pod, dir)
			if name == "unlinked" {
				pod.Spec.EnableServiceLinks = ptr.To(false)
			}
			createPod(ctx, env.Admin, pod)
		}
		vars := readEnv(linked)
		Eventually(vars).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(HaveKey("KUBERNETES_SERVICE_HOST"))
		got := vars(Default)
		Expect(got).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", master.Spec.ClusterIP))
		Expect(got).To(HaveKeyWithValue("KUBERNETES_SERVICE_PORT", fmt.Sprint(master.Spec.Ports[0].Port)))
		Expect(got).To(HaveKeyWithValue("WEB_FRONT_SERVICE_HOST", web.Spec.ClusterIP))
		Expect(got).To(HaveKeyWithValue("WEB_FRONT_SERVICE_PORT", "8080"))

		vars = readEnv(unlinked)
		Eventually(vars).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(HaveKey("KUBERNETES_SERVICE_HOST"))
		Expect(vars(Default)).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", master.Spec.ClusterIP))
		Expect(vars(Default)).To(HaveKeyWithValue("KUBERNETES_SERVICE_PORT", fmt.Sprint(master.Spec.Ports[0].Port)))
		for k := range vars(Default) {
			Expect(k).NotTo(HavePrefix("WEB_FRONT_"), "enableServiceLinks: false sets only the KUBERNETES_ pair")
		}
	})

	It("brings 100 ConfigMap updates into a running container's volume, each within 2 s, never torn, without restarting it", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
			Data:       map[string]string{"a": "0", "b": "0"},
		}
		Expect(env.Admin.Create(ctx, cm)).To(Succeed())
		out := hostDir()
		pod := utils.BusyboxPod(ns, "reader", objectsNode, "sh", "-c", consistentReader("/cfg", "cfg"))
		pod.Spec.Volumes = []corev1.Volume{configMapVolume("cfg", "settings")}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
		withOut(pod, out)
		createPod(ctx, env.Admin, pod)
		Eventually(seenBy(out, "cfg")).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Equal("0"))

		var worst time.Duration
		for i := 1; i <= 100; i++ {
			v := fmt.Sprint(i)
			cm.Data = map[string]string{"a": v, "b": v}
			Expect(env.Admin.Update(ctx, cm)).To(Succeed())
			start := time.Now()
			Eventually(seenBy(out, "cfg")).WithTimeout(liveUpdateTimeout).WithPolling(10*time.Millisecond).Should(Equal(v), "update %d", i)
			worst = max(worst, time.Since(start))
		}
		GinkgoWriter.Printf("slowest of 100 ConfigMap updates seen in the container: %v\n", worst)
		expectNeverTorn(out, "cfg")
		p := utils.GetPod(ctx, env.Admin, ns, "reader")(Default)
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	})

	It("brings Secret and projected (configMap + secret + downwardAPI labels) updates into a running container the same way", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"a": "0", "b": "0"}}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, Data: secretData("0")}
		Expect(env.Admin.Create(ctx, cm)).To(Succeed())
		Expect(env.Admin.Create(ctx, secret)).To(Succeed())
		out := hostDir()
		pod := utils.BusyboxPod(ns, "reader", objectsNode, "sh", "-c",
			consistentReader("/sec", "sec")+" & "+consistentReader("/proj", "proj")+" & "+
				`while true; do cat /proj/s > /out/s.tmp; mv /out/s.tmp /out/s; cat /proj/labels > /out/labels.tmp; mv /out/labels.tmp /out/labels; sleep 0.02; done`)
		pod.Labels = map[string]string{"round": "0"}
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"},
					Items: []corev1.KeyToPath{{Key: "a", Path: "s"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
			}}}},
		}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "sec", MountPath: "/sec"}, {Name: "proj", MountPath: "/proj"}}
		withOut(pod, out)
		createPod(ctx, env.Admin, pod)
		Eventually(seenBy(out, "proj")).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Equal("0"))
		Eventually(seenBy(out, "sec")).WithTimeout(liveUpdateTimeout).WithPolling(pollInterval).Should(Equal(secretValue("0")))

		for i := 1; i <= 20; i++ {
			v := fmt.Sprint(i)
			secret.Data = secretData(v)
			Expect(env.Admin.Update(ctx, secret)).To(Succeed())
			Eventually(seenBy(out, "sec")).WithTimeout(liveUpdateTimeout).WithPolling(10*time.Millisecond).Should(Equal(secretValue(v)), "Secret update %d", i)
			Eventually(seenBy(out, "s")).WithTimeout(liveUpdateTimeout).WithPolling(10*time.Millisecond).Should(Equal(secretValue(v)), "Secret update %d in the projected volume", i)
			cm.Data = map[string]string{"a": v, "b": v}
			Expect(env.Admin.Update(ctx, cm)).To(Succeed())
			Eventually(seenBy(out, "proj")).WithTimeout(liveUpdateTimeout).WithPolling(10*time.Millisecond).Should(Equal(v), "ConfigMap update %d in the projected volume", i)
		}
		expectNeverTorn(out, "sec")
		expectNeverTorn(out, "proj")

		By("following a label change in the projected downward API file")
		p := utils.GetPod(ctx, env.Admin, ns, "reader")(Default)
		relabelled := client.MergeFrom(p.DeepCopy()) // nodelet may write its status meanwhile
		p.Labels["round"] = "last"
		Expect(env.Admin.Patch(ctx, p, relabelled)).To(Succeed())
		Eventually(seenBy(out, "labels")).WithTimeout(liveUpdateTimeout).WithPolling(10 * time.Millisecond).Should(Equal(`round="last"`))
		Expect(utils.GetPod(ctx, env.Admin, ns, "reader")(Default).Status.ContainerStatuses[0].RestartCount).To(BeZero())

		By("never logging a Secret value")
		for _, v := range []string{secretValue("1"), secretValue("20")} {
			Expect(env.Nodelet.LogTail(1_000_000)).NotTo(ContainSubstring(v))
			expectNoEventMentions(ctx, env.Admin, ns, v)
		}
	})

	It("keeps restarting a crash-looping pod with configMap, secret and token volumes while the API server is away, and after its ConfigMap is deleted", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"a": "cm-content"}}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, Data: secretData("x")}
		Expect(env.Admin.Create(ctx, cm)).To(Succeed())
		Expect(env.Admin.Create(ctx, secret)).To(Succeed())
		out := hostDir()
		// Each start appends what it sees: the volumes are there and
		// readable at every restart.
		pod := utils.BusyboxPod(ns, "crasher", objectsNode, "sh", "-c",
			`if [ -s /sec/a ] && [ -s /tok/token ]; then v=ok; else v=missing; fi; echo "$(cat /cfg/a)_$v" >> /out/starts; exit 1`)
		pod.Spec.ServiceAccountName = "default"
		pod.Spec.Volumes = []corev1.Volume{
			configMapVolume("cfg", "settings"),
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
			}}}},
		}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "cfg", MountPath: "/cfg"}, {Name: "sec", MountPath: "/sec"}, {Name: "tok", MountPath: "/tok"},
		}
		withOut(pod, out)
		createPod(ctx, env.Admin, pod)
		Eventually(startsOf(out)).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(HaveLen(1))

		By("stopping the API server for 45 s")
		var during []string
		Expect(apiServer.Restart(func() { time.Sleep(apiOutage); during = startsOf(out)() })).To(Succeed())
		// Back-off 10 s then 20 s: two restarts fit in the outage.
		GinkgoWriter.Printf("container starts when the API server came back: %d\n", len(during))
		Expect(len(during)).To(BeNumerically(">=", 3), "the container was not restarted while the API server was away")
		for _, line := range during {
			Expect(line).To(Equal("cm-content_ok"), "a start saw incomplete volumes")
		}

		By("deleting its ConfigMap")
		Expect(env.Admin.Delete(ctx, cm)).To(Succeed())
		after := len(startsOf(out)())
		// The next back-off is 40 s.
		Eventually(startsOf(out)).WithTimeout(90*time.Second).WithPolling(pollInterval).Should(HaveLen(after+1),
			"the container was not restarted after its ConfigMap was deleted")
		Expect(startsOf(out)()[after]).To(Equal("cm-content_ok"), "the deleted ConfigMap's last content is kept")
		utils.WaitForPod(ctx, env.Admin, ns, "crasher", apiTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", after))
		})

		By("deleting it")
		deleted := time.Now()
		Expect(env.Admin.Delete(ctx, pod)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}).WithTimeout(afterOutageDeleteTimeout).WithPolling(pollInterval).Should(BeTrue(), "pod not gone")
		GinkgoWriter.Printf("deletion after the outage took %v\n", time.Since(deleted))
	}, SpecTimeout(8*time.Minute))

	It("reports a missing ConfigMap volume in a FailedMount Event and starts the pod once it is created", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "needs-cm", objectsNode, "sleep", "3600")
		pod.Spec.Volumes = []corev1.Volume{configMapVolume("cfg", "late")}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
		createPod(ctx, env.Admin, pod)
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			var messages []string
			for _, e := range events.Items {
				if e.Reason == "FailedMount" {
					messages = append(messages, e.Message)
				}
			}
			g.Expect(messages).To(ContainElement(ContainSubstring(`configmap "late" not found`)))
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		// Let the pod worker's retry back-off grow past the bound below.
		time.Sleep(8 * time.Second)
		Expect(env.Admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns}, Data: map[string]string{"a": "1"}})).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "needs-cm", objectAppearsTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
	})

	It("projects ClusterTrustBundles by name and by signer into a volume", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		suffix := fmt.Sprintf("%d-%d", GinkgoParallelProcess(), time.Now().UnixNano())
		signer := "e2e.nodelet.io/signer-" + suffix
		plain := "e2e-plain-" + suffix
		selected := "e2e.nodelet.io:signer-" + suffix + ":live"
		other := "e2e.nodelet.io:signer-" + suffix + ":old"
		caPEM := func(name string) string {
			ca, err := utils.NewCA(GinkgoT().TempDir(), name)
			Expect(err).NotTo(HaveOccurred())
			data, err := os.ReadFile(ca.CertFile)
			Expect(err).NotTo(HaveOccurred())
			return string(data)
		}
		caA, caB := caPEM("a"), caPEM("b")
		for _, b := range []*certificatesv1.ClusterTrustBundle{
			{ObjectMeta: metav1.ObjectMeta{Name: plain}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: caA}},
			{ObjectMeta: metav1.ObjectMeta{Name: selected, Labels: map[string]string{"live": "yes"}}, Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: caA + caB}},
			{ObjectMeta: metav1.ObjectMeta{Name: other, Labels: map[string]string{"live": "no"}}, Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: caPEM("c")}},
		} {
			Expect(env.Admin.Create(ctx, b)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.Admin.Delete(ctx, b))).To(Succeed()) })
		}
		pod := utils.BusyboxPod(ns, "bundles", objectsNode, "sleep", "3600")
		pod.Spec.Volumes = []corev1.Volume{{Name: "tb", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To(plain), Path: "plain.crt"}},
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), Path: "signer.crt",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"live": "yes"}}}},
		}}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tb", MountPath: "/tb"}}
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c",
			`test "$(grep -c 'BEGIN CERTIFICATE' /tb/plain.crt)" = 1 && test "$(grep -c 'BEGIN CERTIFICATE' /tb/signer.crt)" = 2`}}}}
		createPod(ctx, env.Admin, pod)
		utils.WaitForPod(ctx, env.Admin, ns, "bundles", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
	})

	It("shows CreateContainerConfigError for a missing Secret and runs once it is created", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "needs-secret", objectsNode, "sleep", "3600")
		pod.Spec.Containers[0].Env = []corev1.EnvVar{
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token",
			}}},
			{Name: "EXTRA", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "absent", Optional: ptr.To(true),
			}}},
		}
		createPod(ctx, env.Admin, pod)
		utils.WaitForPod(ctx, env.Admin, ns, "needs-secret", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal("CreateContainerConfigError"))
			g.Expect(w.Message).To(ContainSubstring("creds"))
		})
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
			StringData: map[string]string{"token": "s3cr3t-value-never-logged"},
		}
		Expect(env.Admin.Create(ctx, secret)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "needs-secret", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		Expect(env.Nodelet.LogTail(100000)).NotTo(ContainSubstring("s3cr3t-value-never-logged"))
		var events corev1.EventList
		Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			Expect(e.Message).NotTo(ContainSubstring("s3cr3t-value-never-logged"))
		}
	})
})

var _ = Describe("Deleted ConfigMaps and Secrets with the Watch strategy", Ordered, func() {
	const node = "e2e-objects-deleted"
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd}
	})

	It("removes an optional object's files from a running container when it is deleted and brings them back when it is created, across a restart", func(ctx SpecContext) {
		optionalObjectsScenario(ctx, env, node, liveUpdateTimeout, true)
	})

	It("keeps a required object's files when it is deleted, with a FailedMount Event, across a restart, and shows it again once created", func(ctx SpecContext) {
		requiredObjectsScenario(ctx, env, node, liveUpdateTimeout, true)
	})

	It("restarts a container with the environment of the objects that exist: a deleted optional one left out, a deleted required one a CreateContainerConfigError", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "req", Namespace: ns}, Data: map[string]string{"v": "required-value"}}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "opt", Namespace: ns}, StringData: map[string]string{"v": "optional-value"}}
		Expect(env.Admin.Create(ctx, cm)).To(Succeed())
		Expect(env.Admin.Create(ctx, secret)).To(Succeed())
		// Each start reports its environment as its termination message.
		pod := utils.BusyboxPod(ns, "env-restarts", node, "sh", "-c", `echo "req=$REQ opt=$OPT" > /dev/termination-log; exit 1`)
		pod.Spec.Containers[0].Env = []corev1.EnvVar{
			{Name: "REQ", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "req"}, Key: "v",
			}}},
			{Name: "OPT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "opt"}, Key: "v", Optional: ptr.To(true),
			}}},
		}
		createPod(ctx, env.Admin, pod)
		// lastEnded is the number (0 the first) and message of the last
		// start that ended: the current state while it is terminated or
		// backing off, the last state once the next start runs.
		lastEnded := func(st corev1.ContainerStatus) (int32, *corev1.ContainerStateTerminated) {
			switch {
			case st.State.Terminated != nil:
				return st.RestartCount, st.State.Terminated
			case st.State.Running != nil:
				return st.RestartCount - 1, st.LastTerminationState.Terminated
			default:
				return st.RestartCount, st.LastTerminationState.Terminated
			}
		}
		// finished waits for a start numbered at least n to have ended and
		// returns its message.
		finished := func(n int32) string {
			var msg string
			utils.WaitForPod(ctx, env.Admin, ns, "env-restarts", restartTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				i, t := lastEnded(p.Status.ContainerStatuses[0])
				g.Expect(t).NotTo(BeNil())
				g.Expect(i).To(BeNumerically(">=", n))
				msg = t.Message
			})
			return msg
		}
		// nextStart is the number of the first start that begins after now.
		nextStart := func() int32 {
			p := &corev1.Pod{}
			Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "env-restarts"}, p)).To(Succeed())
			return p.Status.ContainerStatuses[0].RestartCount + 1
		}
		Expect(finished(0)).To(Equal("req=required-value opt=optional-value\n"))

		By("deleting the optional Secret")
		next := nextStart()
		Expect(env.Admin.Delete(ctx, secret)).To(Succeed())
		Expect(finished(next)).To(Equal("req=required-value opt=\n"))

		By("deleting the required ConfigMap")
		Expect(env.Admin.Delete(ctx, cm)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "env-restarts", restartTimeout, func(g Gomega, p *corev1.Pod) {
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal("CreateContainerConfigError"))
			g.Expect(w.Message).To(ContainSubstring(`configmap "req" not found`))
		})
	}, SpecTimeout(4*restartTimeout))
})

var _ = Describe("Deleted ConfigMaps and Secrets with the Cache strategy", Ordered, func() {
	const node = "e2e-objects-cached"
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd, Config: map[string]any{
			"configMapAndSecretChangeDetectionStrategy": "Cache",
			"configMapAndSecretCacheTTL":                "1s",
			"syncFrequency":                             "2s",
		}}
	})

	It("removes an optional object's files from a running container at a sync after the TTL, and brings them back", func(ctx SpecContext) {
		optionalObjectsScenario(ctx, env, node, cacheUpdateTimeout, false)
	})

	It("keeps a required object's files when it is deleted, with a FailedMount Event, and shows it again once created", func(ctx SpecContext) {
		requiredObjectsScenario(ctx, env, node, cacheUpdateTimeout, false)
	})
})

var _ = Describe("Live ConfigMap updates turned off", Ordered, func() {
	const node = "e2e-objects-nocm"
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd, Args: []string{"--controllers=*,-configmap"}}
	})

	It("says so in the log and leaves ConfigMap volumes as they were set up, while Secret volumes still follow", func(ctx SpecContext) {
		Expect(env.Nodelet.LogTail(1000)).To(MatchRegexp(`Controller is disabled.*controller="configmap".*live ConfigMap updates are off`))

		ns := utils.NewNamespace(ctx, env.Admin)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"a": "0", "b": "0"}}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, Data: secretData("0")}
		Expect(env.Admin.Create(ctx, cm)).To(Succeed())
		Expect(env.Admin.Create(ctx, secret)).To(Succeed())
		out, err := os.MkdirTemp("", "nodelet-e2e-objects-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, out)
		pod := utils.BusyboxPod(ns, "reader", node, "sh", "-c", consistentReader("/cfg", "cfg")+" & "+consistentReader("/sec", "sec"))
		pod.Spec.Volumes = []corev1.Volume{
			configMapVolume("cfg", "settings"),
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}},
		}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "cfg", MountPath: "/cfg"}, {Name: "sec", MountPath: "/sec"}, {Name: "out", MountPath: "/out"},
		}
		createPod(ctx, env.Admin, pod)
		Eventually(seenBy(out, "cfg")).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Equal("0"))

		cm.Data = map[string]string{"a": "1", "b": "1"}
		Expect(env.Admin.Update(ctx, cm)).To(Succeed())
		secret.Data = secretData("1")
		Expect(env.Admin.Update(ctx, secret)).To(Succeed())
		Eventually(seenBy(out, "sec")).WithTimeout(liveUpdateTimeout).WithPolling(10 * time.Millisecond).Should(Equal(secretValue("1")))
		Consistently(seenBy(out, "cfg")).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal("0"))
	})
})
