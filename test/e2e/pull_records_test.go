package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

// A private image on the node is open only to pods whose credentials could
// pull it, under the kubelet's default policy NeverVerifyPreloadedImages:
// here the credentials come from a credential provider plugin that is
// given the pod's service account token, and from pull secrets.
var _ = Describe("Pulled image records", Ordered, func() {
	const node = "e2e-pull-records"
	const user, password = "records-user", "records-s3cret"
	const audience, annotation = "registry.e2e.example", "registry.e2e.example/pull"
	var (
		reg        *utils.Registry
		ref        string
		binDir     string
		config     string
		pluginName = "test-credential-provider"
		role       = "e2e-pull-records-audience"
	)
	BeforeAll(func(ctx SpecContext) {
		var dir string
		reg, ref, dir = privateRegistryWithPlugin(ctx, user, password, "pull-records", pluginName)
		binDir = filepath.Join(dir, "bin")
		// The plugin answers only for pods whose service account opts in
		// with the annotation, and is given their token.
		config = filepath.Join(dir, "credential-provider-config.yaml")
		Expect(os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: %s
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: [%q]
  defaultCacheDuration: 10m
  tokenAttributes:
    serviceAccountTokenAudience: %s
    requireServiceAccount: true
    requiredServiceAccountAnnotationKeys: [%q]
    cacheType: ServiceAccount
  env:
  - {name: PLUGIN_USERNAME, value: %q}
  - {name: PLUGIN_PASSWORD, value: %q}
`, pluginName, reg.Host(), audience, annotation, user, password)), 0o600)).To(Succeed())

		// A node may ask for tokens for the plugin's audience.
		admin, err := apiServer.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		Expect(admin.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{audience}, Verbs: []string{"request-serviceaccounts-token-audience"}}},
		})).To(Succeed())
		Expect(admin.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "system:node:" + node}},
		})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(admin.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role}}))).To(Succeed())
			Expect(client.IgnoreNotFound(admin.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}}))).To(Succeed())
		})
	}, NodeTimeout(3*containerTimeout))

	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd,
			Args: []string{"--image-credential-provider-config=" + config, "--image-credential-provider-bin-dir=" + binDir}}
	})

	pod := func(ns, name, sa string, policy corev1.PullPolicy) *corev1.Pod {
		p := utils.BusyboxPod(ns, name, node, "sleep", "3600")
		p.Spec.ServiceAccountName = sa
		p.Spec.Containers[0].Image = ref
		p.Spec.Containers[0].ImagePullPolicy = policy
		return p
	}
	serviceAccount := func(ns, name string, annotations map[string]string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
	}
	waitingWith := func(ctx SpecContext, ns, name string, reasons ...string) {
		GinkgoHelper()
		utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(BeElementOf(reasons))
		})
	}
	running := func(ctx SpecContext, ns, name string) {
		GinkgoHelper()
		utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
	}
	pullSecret := func(ns, name string) *corev1.Secret {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		cfg, err := json.Marshal(map[string]any{"auths": map[string]any{reg.Host(): map[string]string{"auth": auth}}})
		Expect(err).NotTo(HaveOccurred())
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
		}
	}

	It("opens an image the plugin pulled for a service account to that account's pods only", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, serviceAccount(ns, "builder", map[string]string{annotation: "yes"}))).To(Succeed())
		Expect(env.Admin.Create(ctx, serviceAccount(ns, "plain", nil))).To(Succeed())

		Expect(env.Admin.Create(ctx, pod(ns, "first", "builder", corev1.PullIfNotPresent))).To(Succeed())
		running(ctx, ns, "first")

		// Another account's pod may not use it: with pull policy Never it
		// is told the image is absent; with IfNotPresent it pulls, and
		// the registry refuses it.
		Expect(env.Admin.Create(ctx, pod(ns, "stranger-never", "plain", corev1.PullNever))).To(Succeed())
		Expect(env.Admin.Create(ctx, pod(ns, "stranger", "plain", corev1.PullIfNotPresent))).To(Succeed())
		waitingWith(ctx, ns, "stranger-never", "ErrImageNeverPull")
		waitingWith(ctx, ns, "stranger", "ErrImagePull", "ImagePullBackOff")

		// The account's next pod uses it without a pull.
		Expect(env.Admin.Create(ctx, pod(ns, "second", "builder", corev1.PullNever))).To(Succeed())
		running(ctx, ns, "second")
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			var messages []string
			for _, e := range events.Items {
				messages = append(messages, e.InvolvedObject.Name+" "+e.Reason+": "+e.Message)
			}
			g.Expect(messages).To(ContainElement(fmt.Sprintf("second Pulled: Container image %q already present on machine and can be accessed by the pod", ref)))
			g.Expect(messages).To(ContainElement(fmt.Sprintf("stranger-never ErrImageNeverPull: Container image %q is not present with pull policy of Never", ref)))
		}).WithTimeout(apiTimeout).Should(Succeed())
	}, SpecTimeout(4*podStartTimeout))

	It("opens it to a pod with a pull secret once that secret pulled it, and to the same credential in another secret", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, serviceAccount(ns, "plain", nil))).To(Succeed())
		Expect(env.Admin.Create(ctx, pullSecret(ns, "first"))).To(Succeed())
		Expect(env.Admin.Create(ctx, pullSecret(ns, "copy"))).To(Succeed())

		never := pod(ns, "secret-never", "plain", corev1.PullNever)
		never.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "first"}}
		Expect(env.Admin.Create(ctx, never)).To(Succeed())
		waitingWith(ctx, ns, "secret-never", "ErrImageNeverPull")

		pulls := pod(ns, "secret-pulls", "plain", corev1.PullIfNotPresent)
		pulls.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "first"}}
		Expect(env.Admin.Create(ctx, pulls)).To(Succeed())
		running(ctx, ns, "secret-pulls")

		copied := pod(ns, "copy-never", "plain", corev1.PullNever)
		copied.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "copy"}}
		Expect(env.Admin.Create(ctx, copied)).To(Succeed())
		running(ctx, ns, "copy-never")
	}, SpecTimeout(4*podStartTimeout))
})
