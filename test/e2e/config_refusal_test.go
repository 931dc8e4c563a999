package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nodelet/nodelet/test/utils"
)

// Configurations that would open the node up, or silently do something
// other than what they say, are refused at start with the field named.
var _ = Describe("Unsafe configurations", func() {
	DescribeTable("are refused at start, naming the field",
		func(ctx SpecContext, config, field string) {
			bin, err := utils.NodeletBinary(ctx)
			Expect(err).NotTo(HaveOccurred())
			dir := GinkgoT().TempDir()
			file := filepath.Join(dir, "nodelet.yaml")
			Expect(os.WriteFile(file, []byte("apiVersion: config.nodelet.io/v1alpha1\nkind: NodeletConfiguration\n"+config), 0o600)).To(Succeed())
			runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var stderr bytes.Buffer
			cmd := exec.CommandContext(runCtx, bin, "--config", file, "--node-name", "e2e-refused",
				"--kubeconfig", filepath.Join(dir, "absent.kubeconfig"))
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			err = cmd.Run()
			var exitErr *exec.ExitError
			Expect(errors.As(err, &exitErr)).To(BeTrue(), "nodelet did not fail: %v\n%s", err, stderr.String())
			Expect(exitErr.ExitCode()).To(Equal(2), "output:\n%s", stderr.String())
			Expect(stderr.String()).To(ContainSubstring(field))
		},
		Entry("anonymous requests with AlwaysAllow (anyone could exec into every pod)",
			"server:\n  anonymous:\n    enabled: true\n  authorization:\n    mode: AlwaysAllow\n", "server.anonymous.enabled"),
		Entry("a QPS of 0, which the client would take for 5",
			"kubeAPIQPS: 0\n", "kubeAPIQPS"),
	)
})
