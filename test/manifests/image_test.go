package manifests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"github.com/nodelet/nodelet/internal/version"
	"github.com/nodelet/nodelet/test/utils"
)

// TestImageRunsInContainerd builds nodelet's image as `make image` does
// (hack/image, no Docker), imports the archive into a private containerd
// with ctr, finds it there under the name config/default's DaemonSet runs
// (so imagePullPolicy IfNotPresent never pulls), and runs it through the
// CRI as the DaemonSet would, with --version as its only argument: the
// entrypoint must be the static nodelet, which needs nothing else.
func TestImageRunsInContainerd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	d := loadDeployment(t, render(t, "../../config/default"), "worker-1")
	image := d.container.Image

	const testVersion = "v0.0.0-image-test"
	archive := filepath.Join(t.TempDir(), "nodelet-image.tar")
	root, err := utils.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "run", "./hack/image", "--version", testVersion, "--trimpath=false", "--output", archive)
	build.Dir = root
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/image: %v\n%s", err, out)
	}
	t.Logf("hack/image: %s", out)

	c, err := utils.StartContainerd(ctx, utils.ContainerdOptions{Images: []string{utils.PauseImage}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	imp := c.Ctr(ctx, "images", "import", "--snapshotter", "overlayfs", archive)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}

	images, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(c.Endpoint()).
		WithConnectionTimeout(30 * time.Second).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer images.Close(ctx)
	// The CRI learns of an image ctr imported from containerd's events,
	// which a loaded machine delivers late: ask until it knows it.
	var st *runtimeapi.ImageStatusResponse
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err = images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
		if (err == nil && st.GetImage() != nil) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || st.GetImage() == nil {
		t.Fatalf("the CRI does not know %s 30s after the import (%v): the DaemonSet would try to pull it", image, err)
	}
	t.Logf("imported %s: %s, %d bytes", image, st.GetImage().GetId(), st.GetImage().GetSize())

	logs := runOnce(ctx, t, c, image, "--version")
	want := "nodelet " + testVersion + " (Kubernetes " + version.KubernetesVersion +
		", kubeletVersion " + version.KubernetesVersion + "+" + version.BuildMetadata(testVersion) + ")"
	if !strings.Contains(logs, want) {
		t.Errorf("the container printed %q, want %q", logs, want)
	}
}

// runOnce runs image with args (its entrypoint kept) in a host-network
// sandbox of c, waits for it to exit 0, and returns its log.
func runOnce(ctx context.Context, t *testing.T, c *utils.Containerd, image string, args ...string) string {
	t.Helper()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(c.Endpoint()).
		WithConnectionTimeout(30 * time.Second).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	logDir := t.TempDir()
	sandboxConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "nodelet", Namespace: "image-test", Uid: string(uuid.NewUUID())},
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	sandbox, err := rs.RunPodSandbox(ctx, sandboxConfig, "")
	if err != nil {
		t.Fatalf("running a sandbox: %v\n%s", err, c.LogTail(20))
	}
	defer func() {
		_ = rs.StopPodSandbox(ctx, sandbox)
		_ = rs.RemovePodSandbox(ctx, sandbox)
	}()
	id, err := rs.CreateContainer(ctx, sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "nodelet"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Args:     args,
		LogPath:  "nodelet.log",
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}, sandboxConfig)
	if err != nil {
		t.Fatalf("creating the container: %v", err)
	}
	if err := rs.StartContainer(ctx, id); err != nil {
		t.Fatalf("starting the container: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := rs.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if s := st.GetStatus(); s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			log, _ := os.ReadFile(filepath.Join(logDir, "nodelet.log"))
			if s.GetExitCode() != 0 {
				t.Fatalf("the container exited %d (%s %s):\n%s", s.GetExitCode(), s.GetReason(), s.GetMessage(), log)
			}
			return string(log)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container has not exited after a minute: %v", st.GetStatus().GetState())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
