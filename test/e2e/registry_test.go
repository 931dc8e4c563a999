package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/utils"
)

var _ = Describe("The private registry", func() {
	It("serves a pushed image to the CRI only with the right credentials", func(ctx SpecContext) {
		const user, password = "nodelet", "pull-secret"
		reg := utils.MustStartRegistry(ctx, utils.RegistryOptions{User: user, Password: password})
		Expect(ctrd.AddInsecureRegistry(reg.Host())).To(Succeed())
		ref, err := reg.Push(ctx, utils.BusyboxImage)
		Expect(err).NotTo(HaveOccurred())

		_, is := newCRIClients(ctx)
		image := &runtimeapi.ImageSpec{Image: ref}

		By("failing to pull without credentials")
		_, err = is.PullImage(ctx, image, nil, nil)
		Expect(err).To(HaveOccurred())

		By("failing to pull with a wrong password")
		_, err = is.PullImage(ctx, image, &runtimeapi.AuthConfig{Username: user, Password: "wrong"}, nil)
		Expect(err).To(HaveOccurred())

		By("pulling with the right credentials")
		imageRef, err := is.PullImage(ctx, image, &runtimeapi.AuthConfig{Username: user, Password: password}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(imageRef).NotTo(BeEmpty())
		// No RemoveImage: the CRI removes an image with every one of its
		// tags, and this one has the digest of the imported BusyboxImage
		// that other specs run. The suite's containerd goes at its end.
		st, err := is.ImageStatus(ctx, image, false)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.GetImage().GetRepoTags()).To(ContainElement(ref))
	}, SpecTimeout(2*containerTimeout))
})
