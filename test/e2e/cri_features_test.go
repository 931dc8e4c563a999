package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/test/utils"
)

// What nodelet reads of the runtime (its handlers and features, its
// cgroup driver, its sandbox image) is asked of each runtime as it
// answers: containerd 2 answers more than containerd 1.6, and nodelet
// must read both right.
var _ = Describe("What the runtime reports", Label(runtimeSmokeLabel), func() {
	It("is what the selected runtime answers, and nodelet reads it right", func(ctx SpecContext) {
		rs, is := newCRIClients(ctx)
		client, err := cri.Dial(ctx, ctrd.Endpoint(), "", cri.Options{NodeName: "e2e-cri-features"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(client.Close)

		version, err := rs.Version(ctx, "v1")
		Expect(err).NotTo(HaveOccurred())
		Expect(version.GetRuntimeName()).To(Equal("containerd"))
		Expect(version.GetRuntimeApiVersion()).To(Equal("v1"))

		st, err := rs.Status(ctx, true)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.GetStatus().GetConditions()).To(ContainElements(
			And(HaveField("Type", runtimeapi.RuntimeReady), HaveField("Status", true)),
			And(HaveField("Type", runtimeapi.NetworkReady), HaveField("Status", true))))
		var config struct {
			RestrictOOMScoreAdj      bool `json:"restrictOOMScoreAdj"`
			NetNSMountsUnderStateDir bool `json:"netnsMountsUnderStateDir"`
			SandboxImage             string
			Containerd               struct {
				DefaultRuntimeName string `json:"defaultRuntimeName"`
				Runtimes           map[string]struct {
					Type    string         `json:"runtimeType"`
					Options map[string]any `json:"options"`
				} `json:"runtimes"`
			} `json:"containerd"`
			CNI struct {
				ConfDir string `json:"confDir"`
			} `json:"cni"`
		}
		Expect(json.Unmarshal([]byte(st.GetInfo()["config"]), &config)).To(Succeed(), "verbose status config: %s", st.GetInfo()["config"])
		By("the verbose status shows the harness's settings in effect")
		Expect(config.RestrictOOMScoreAdj).To(BeTrue())
		Expect(config.NetNSMountsUnderStateDir).To(BeTrue())
		Expect(config.CNI.ConfDir).To(Equal(filepath.Join(ctrd.Dir, "cni", "net.d")))
		Expect(config.Containerd.DefaultRuntimeName).To(Equal("runc"))
		Expect(config.Containerd.Runtimes).To(HaveKey(utils.SecondRuntimeHandler))
		for name, r := range config.Containerd.Runtimes {
			Expect(r.Type).To(Equal("io.containerd.runc.v2"), "handler %s", name)
			Expect(r.Options).To(HaveKeyWithValue("BinaryName", filepath.Join(ctrd.BinDir, "runc")), "handler %s", name)
		}

		features, err := client.Features(ctx)
		Expect(err).NotTo(HaveOccurred())
		driver, err := client.CgroupDriver(ctx)
		Expect(err).NotTo(HaveOccurred())
		sandboxImage, err := client.SandboxImage(ctx)
		Expect(err).NotTo(HaveOccurred())
		_, rcErr := rs.RuntimeConfig(ctx)
		pause, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: utils.PauseImage}, false)
		Expect(err).NotTo(HaveOccurred())

		if utils.IsContainerd2() {
			By("containerd 2 reports its handlers and features, its cgroup driver, and no deprecated setting")
			Expect(st.GetStatus().GetConditions()).To(ContainElement(HaveField("Type", "ContainerdHasNoDeprecationWarnings")))
			Expect(version.GetRuntimeVersion()).To(HavePrefix("v2."))
			// A deprecation is the configuration's unless it is the
			// host's: containerd 2.2 and later deprecate cgroup v1.
			var deprecations map[string]string
			for _, c := range st.GetStatus().GetConditions() {
				if c.GetType() == "ContainerdHasNoDeprecationWarnings" && !c.GetStatus() {
					Expect(json.Unmarshal([]byte(c.GetMessage()), &deprecations)).To(Succeed(), "deprecations: %s", c.GetMessage())
				}
			}
			delete(deprecations, "io.containerd.deprecation/cgroup-v1")
			Expect(deprecations).To(BeEmpty(), "containerd warns about its configuration")
			names := []string{}
			for _, h := range st.GetRuntimeHandlers() {
				names = append(names, h.GetName())
			}
			// "" is the default handler.
			Expect(names).To(ConsistOf("", "runc", utils.SecondRuntimeHandler))
			Expect(st.GetFeatures()).NotTo(BeNil())
			Expect(st.GetFeatures().GetSupplementalGroupsPolicy()).To(BeTrue())

			Expect(features.HandlersReported).To(BeTrue())
			Expect(features.HasHandler(utils.SecondRuntimeHandler)).To(BeTrue())
			Expect(features.HasHandler("no-such-handler")).To(BeFalse())
			for _, h := range st.GetRuntimeHandlers() {
				Expect(features.Handlers).To(HaveKeyWithValue(h.GetName(), cri.HandlerFeatures{
					UserNamespaces:          h.GetFeatures().GetUserNamespaces(),
					RecursiveReadOnlyMounts: h.GetFeatures().GetRecursiveReadOnlyMounts(),
				}))
			}
			Expect(features.FeaturesReported).To(BeTrue())
			Expect(features.SupplementalGroupsPolicy).To(BeTrue())

			Expect(rcErr).NotTo(HaveOccurred())
			Expect(driver).To(Equal("cgroupfs"), "SystemdCgroup = false")

			// The sandbox image is the image service's (pinned_images),
			// not in the status; the image is listed as pinned.
			Expect(config.SandboxImage).To(BeEmpty())
			Expect(sandboxImage).To(BeEmpty())
			Expect(pause.GetImage().GetPinned()).To(BeTrue(), "the sandbox image is pinned")
			return
		}

		By("containerd 1.6 reports no handlers, no features and no runtime config")
		Expect(version.GetRuntimeVersion()).To(HavePrefix("1.6."))
		Expect(st.GetRuntimeHandlers()).To(BeEmpty())
		Expect(st.GetFeatures()).To(BeNil())
		Expect(features.HandlersReported).To(BeFalse())
		Expect(features.HasHandler(utils.SecondRuntimeHandler)).To(BeTrue(), "assumed: the runtime lists none")
		Expect(features.FeaturesReported).To(BeFalse())
		Expect(features.UserNamespaces("")).To(BeFalse())
		Expect(status.Code(rcErr)).To(Equal(codes.Unimplemented))
		Expect(driver).To(BeEmpty(), "the configured driver stands")
		Expect(sandboxImage).To(Equal(utils.PauseImage))
		Expect(strings.Contains(st.GetInfo()["config"], utils.PauseImage)).To(BeTrue())
	})
})
