package e2e

import (
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/utils"
)

var _ = Describe("Image credential providers", Ordered, func() {
	const node = "e2e-credential-provider"
	const user, password = "provider-user", "provider-s3cret"
	var (
		reg        *utils.Registry
		ref        string
		binDir     string
		config     string
		countFile  string
		pluginName = "test-credential-provider"
	)
	BeforeAll(func(ctx SpecContext) {
		var dir string
		reg, ref, dir = privateRegistryWithPlugin(ctx, user, password, "credential-provider", pluginName)
		binDir = filepath.Join(dir, "bin")
		countFile = filepath.Join(dir, "runs")
		// The kubelet's CredentialProviderConfig, as a cloud's node image
		// writes it: one plugin for one registry, answering for the image.
		config = filepath.Join(dir, "credential-provider-config.yaml")
		Expect(os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: %s
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: [%q]
  defaultCacheDuration: 10m
  env:
  - {name: PLUGIN_USERNAME, value: %q}
  - {name: PLUGIN_PASSWORD, value: %q}
  - {name: PLUGIN_COUNT_FILE, value: %q}
`, pluginName, reg.Host(), user, password, countFile)), 0o600)).To(Succeed())
	}, NodeTimeout(3*containerTimeout))

	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd,
			Args: []string{"--image-credential-provider-config=" + config, "--image-credential-provider-bin-dir=" + binDir}}
	})

	It("pulls a private image for a pod without pull secrets with the plugin's credentials, and asks the plugin once", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		for _, name := range []string{"first", "second"} {
			p := utils.BusyboxPod(ns, name, node, "sleep", "3600")
			p.Spec.Containers[0].Image = ref
			p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
			Expect(env.Admin.Create(ctx, p)).To(Succeed())
			utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			})
		}
		runs, err := os.ReadFile(countFile)
		Expect(err).NotTo(HaveOccurred())
		Expect(runs).To(HaveLen(1), "the plugin's answer is cached for its defaultCacheDuration")
	}, SpecTimeout(2*podStartTimeout))

	It("does not pull the image for a pod when the plugin gives no credentials for its registry", func(ctx SpecContext) {
		// The same image under another name of the registry's host: the
		// plugin's matchImages do not match it, and the registry refuses
		// an anonymous pull.
		ns := utils.NewNamespace(ctx, env.Admin)
		p := utils.BusyboxPod(ns, "unmatched", node, "sleep", "3600")
		p.Spec.Containers[0].Image = "localhost" + ref[len("127.0.0.1"):]
		p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
		Expect(ctrd.AddInsecureRegistry("localhost" + reg.Host()[len("127.0.0.1"):])).To(Succeed())
		Expect(env.Admin.Create(ctx, p)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "unmatched", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(BeElementOf("ErrImagePull", "ImagePullBackOff"))
		})
	}, SpecTimeout(2*podStartTimeout))
})

// privateRegistryWithPlugin starts a registry that wants user and password,
// pushes the harness's busybox there as a variant of its own (an image ID
// no other spec pulls), and builds the test credential provider plugin as
// <dir>/bin/<plugin>. It returns the registry, the image's reference and
// dir, a directory of the spec's.
func privateRegistryWithPlugin(ctx SpecContext, user, password, variant, plugin string) (*utils.Registry, string, string) {
	GinkgoHelper()
	reg := utils.MustStartRegistry(ctx, utils.RegistryOptions{User: user, Password: password})
	Expect(ctrd.AddInsecureRegistry(reg.Host())).To(Succeed())
	ref, err := reg.PushVariant(ctx, utils.BusyboxImage, variant)
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	root, err := utils.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	Expect(utils.BuildGoBinary(ctx, root, "./internal/credentialprovider/testdata/plugin", filepath.Join(dir, "bin", plugin))).To(Succeed())
	return reg, ref, dir
}
