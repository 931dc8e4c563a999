package controller_test

import (
	"os"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// idleMinutesEnv names the environment variable that turns on the idle
// measurement and says how many minutes it watches.
const idleMinutesEnv = "NODELET_IDLE_MINUTES"

// This is a measurement, not a test: it runs only when NODELET_IDLE_MINUTES
// is set, with the default frequencies, and prints how many times the Node
// was written while nothing changed on it.
//
//	NODELET_IDLE_MINUTES=10 go test ./internal/controller/ -ginkgo.focus=idle -ginkgo.v -timeout 30m
var _ = Describe("Node status writes of an idle node", Label("measurement"), func() {
	It("counts the Node writes over the idle period", func(ctx SpecContext) {
		minutes, _ := strconv.Atoi(os.Getenv(idleMinutesEnv))
		if minutes <= 0 {
			Skip(idleMinutesEnv + " is not set")
		}
		name := nodeName()
		defaults := &v1alpha1.NodeletConfiguration{}
		v1alpha1.SetDefaults(defaults)
		report := defaults.NodeStatusReportFrequency.Duration
		startAgent(name, func(c *v1alpha1.NodeletConfiguration) {
			c.NodeStatusUpdateFrequency = defaults.NodeStatusUpdateFrequency
			c.NodeStatusReportFrequency = defaults.NodeStatusReportFrequency
			c.NodeLeaseDurationSeconds = defaults.NodeLeaseDurationSeconds
		})
		node := waitReady(name, startTimeout)
		registered := time.Now()

		watcher, err := client.NewWithWatch(apiServer.Config, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		w, err := watcher.Watch(ctx, &corev1.NodeList{}, &client.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw:           &metav1.ListOptions{ResourceVersion: node.ResourceVersion},
		})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()

		var writes, statusWrites []time.Duration
		last := node
		deadline := time.After(time.Duration(minutes) * time.Minute)
	loop:
		for {
			select {
			case <-deadline:
				break loop
			case ev, ok := <-w.ResultChan():
				Expect(ok).To(BeTrue(), "the watch ended early")
				if ev.Type != watch.Modified {
					continue
				}
				n := ev.Object.(*corev1.Node)
				at := time.Since(registered).Round(time.Second)
				writes = append(writes, at)
				if !equality.Semantic.DeepEqual(n.Status, last.Status) {
					statusWrites = append(statusWrites, at)
				}
				last = n
			}
		}
		expected := minutes * int(time.Minute) / int(report)
		msg := "idle node over " + strconv.Itoa(minutes) + "m: " + strconv.Itoa(len(writes)) + " Node writes (" +
			strconv.Itoa(len(statusWrites)) + " status writes) at " + fmtDurations(statusWrites) +
			"; expected about " + strconv.Itoa(expected) + " (one per nodeStatusReportFrequency=" + report.String() + ")"
		AddReportEntry("idle status writes", msg)
		GinkgoWriter.Println(msg)
	})
})

func fmtDurations(ds []time.Duration) string {
	out := "["
	for i, d := range ds {
		if i > 0 {
			out += " "
		}
		out += d.String()
	}
	return out + "]"
}
