package localup

import (
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

var _ = Describe("make run", Ordered, func() {
	var (
		bin   string
		run   *localupRun
		admin client.Client
	)

	BeforeAll(func(ctx SpecContext) {
		bin = buildLocalup(ctx, GinkgoT().TempDir())
		run = startLocalup(ctx, bin, GinkgoT().TempDir())
		admin = run.adminClient()
	}, NodeTimeout(readyTimeout))

	It("has rolled out the demo Deployment and completed the demo Job", func(ctx SpecContext) {
		dep := &appsv1.Deployment{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "demo"}, dep)).To(Succeed())
		Expect(dep.Status.AvailableReplicas).To(Equal(*dep.Spec.Replicas))
		job := &batchv1.Job{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "demo-count"}, job)).To(Succeed())
		Expect(job.Status.Succeeded).To(BeEquivalentTo(1))
		Expect(run.out.String()).To(ContainSubstring("export KUBECONFIG=" + run.kubeconfig()))
	})

	It("runs README.md's quick start, which rolls out the web image, with no command, to Ready pods", func(ctx SpecContext) {
		out := run.runReadmeBlock(ctx, readmeShellBlock("## Quick start"))
		Expect(out).To(ContainSubstring(`deployment "web" successfully rolled out`))
		Expect(out).To(ContainSubstring("listening addr=:8080"))
		Expect(out).To(ContainSubstring("hello from a ConfigMap volume"))
		dep := &appsv1.Deployment{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "web"}, dep)).To(Succeed())
		Expect(dep.Spec.Template.Spec.Containers).To(HaveLen(1))
		Expect(dep.Spec.Template.Spec.Containers[0].Command).To(BeEmpty())
		Expect(dep.Status.ReadyReplicas).To(Equal(*dep.Spec.Replicas))
	}, SpecTimeout(rolloutTimeout+stopTimeout))

	It("serves kubectl logs and exec through the node", func(ctx SpecContext) {
		out, err := run.kubectl(ctx, "logs", "deployment/web")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("listening addr=:8080"))
		out, err = run.kubectl(ctx, "-n", "demo", "exec", "deployment/demo", "--", "sh", "-c", "cat /www/greeting; echo; echo $DEMO_TOKEN")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("hello from a ConfigMap volume"))
		Expect(out).To(ContainSubstring("s3cr3t-from-a-secret"))
	}, SpecTimeout(stopTimeout))

	It("stops on SIGINT, leaving no process, mount, network device or directory", func(ctx SpecContext) {
		st := run.state()
		Expect(run.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
		Eventually(run.done).WithContext(ctx).WithTimeout(stopTimeout).Should(BeClosed())
		Expect(run.err).NotTo(HaveOccurred(), run.out.String())
		expectNothingLeft(st, run.stateDir)
	}, SpecTimeout(stopTimeout))

	It("cleans up with run-down after a run that was SIGKILLed", func(ctx SpecContext) {
		killed := startLocalup(ctx, bin, GinkgoT().TempDir())
		st := killed.state()
		Expect(killed.cmd.Process.Kill()).To(Succeed())
		Eventually(killed.done).WithContext(ctx).WithTimeout(stopTimeout).Should(BeClosed())
		pids, err := utils.ProcessesUnder(st.Dirs...)
		Expect(err).NotTo(HaveOccurred())
		Expect(pids).NotTo(BeEmpty(), "etcd and kube-apiserver outlive a killed run")

		out := killed.down(ctx)
		Expect(lines(out, "==>")).To(ContainElement(ContainSubstring("cleaning up after the run of pid")))
		expectNothingLeft(st, killed.stateDir)
	}, SpecTimeout(readyTimeout))
})
