package localup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nodelet/nodelet/test/utils"
)

// readmeShellBlock is the first ```sh block under README.md's heading
// title (a "## " line), without its fences.
func readmeShellBlock(title string) string {
	GinkgoHelper()
	root, err := utils.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	Expect(err).NotTo(HaveOccurred())
	var block []string
	inSection, inBlock := false, false
	for _, line := range strings.Split(string(readme), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			inSection = line == title
		case inSection && !inBlock && trimmed == "```sh":
			inBlock = true
		case inBlock && trimmed == "```":
			return strings.Join(block, "\n")
		case inBlock:
			block = append(block, line)
		}
	}
	Fail("README.md has no ```sh block under " + title)
	return ""
}

// runReadmeBlock runs block with bash, as a reader would paste it into a
// shell in the work tree after make run: in a directory whose
// bin/localup/admin.kubeconfig is the run's, with a HOME whose
// ~/.cache/nodelet/k8s-<version> is the directory hack/envtest.sh built.
func (r *localupRun) runReadmeBlock(ctx context.Context, block string) string {
	GinkgoHelper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	Expect(assets).NotTo(BeEmpty(), "KUBEBUILDER_ASSETS")
	dir := GinkgoT().TempDir()
	Expect(os.MkdirAll(filepath.Join(dir, "bin", "localup"), 0o755)).To(Succeed())
	Expect(os.Symlink(r.kubeconfig(), filepath.Join(dir, "bin", "localup", "admin.kubeconfig"))).To(Succeed())
	home := GinkgoT().TempDir()
	Expect(os.MkdirAll(filepath.Join(home, ".cache", "nodelet"), 0o755)).To(Succeed())
	Expect(os.Symlink(assets, filepath.Join(home, ".cache", "nodelet", filepath.Base(filepath.Clean(assets))))).To(Succeed())

	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
	// PATH without the assets' directory: the block's export must find kubectl.
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "README.md's block:\n%s\nprinted:\n%s", block, out)
	return string(out)
}
