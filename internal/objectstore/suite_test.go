package objectstore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodelet/nodelet/internal/objectstore"
	"github.com/nodelet/nodelet/test/utils"
)

// Timings of the suite.
const (
	// feedTimeout is the bound under test: an update reaches the change
	// feed and the store within it.
	feedTimeout = time.Second
	// syncTimeout bounds the store's first list of a new watch; the Node
	// authorizer learns of a new pod asynchronously, so the first list can
	// be refused and retried after the reflector's back-off.
	syncTimeout = 10 * time.Second
	// stopTimeout bounds a watch ending after its last pod went.
	stopTimeout = 5 * time.Second
	// apiServerDowntime is how long the API server is kept stopped.
	apiServerDowntime = 3 * time.Second
	// recoveryTimeout bounds a watch catching up after the API server came
	// back: the reflector retries with back-off up to 30 s.
	recoveryTimeout = 45 * time.Second
)

var (
	apiServer *utils.APIServer
	admin     client.Client
)

func TestObjectStore(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Object Store Suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	apiServer = utils.MustStartAPIServer(ctx)
	var err error
	admin, err = apiServer.AdminClient()
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

// nodeClient returns a clientset authenticated as system:node:<name>.
func nodeClient(name string) kubernetes.Interface {
	GinkgoHelper()
	cfg, err := apiServer.NodeUserConfig(name)
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return cs
}

// nodeName returns a node name no other spec uses.
func nodeName() string { return "node-" + utilrand.String(8) }

// newNamespace creates a namespace for one spec.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "objectstore-"}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// startStore runs a Store as node until the spec ends.
func startStore(cs kubernetes.Interface, opts objectstore.Options) *objectstore.Store {
	GinkgoHelper()
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = syncTimeout
	}
	opts.Logger = ctrl.Log.WithName("objectstore")
	s, err := objectstore.New(cs, opts)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(s.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done).WithTimeout(stopTimeout).Should(BeClosed())
	})
	return s
}

// feed starts the store's source of kind on a real controller workqueue.
func feed(s *objectstore.Store, kind objectstore.Kind) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	GinkgoHelper()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	ctx, cancel := context.WithCancel(context.Background())
	Expect(s.Source(kind).Start(ctx, q)).To(Succeed())
	DeferCleanup(func() { cancel(); q.ShutDown() })
	return q
}

// nextRequest waits up to timeout for the queue's next request.
func nextRequest(q workqueue.TypedRateLimitingInterface[reconcile.Request], timeout time.Duration) (reconcile.Request, bool) {
	got := make(chan reconcile.Request, 1)
	go func() {
		req, shutdown := q.Get()
		if shutdown {
			return
		}
		q.Done(req)
		q.Forget(req)
		got <- req
	}()
	select {
	case req := <-got:
		return req, true
	case <-time.After(timeout):
		return reconcile.Request{}, false
	}
}

// configMap creates a ConfigMap with data {"value": value}.
func configMap(ctx context.Context, ns, name, value string, immutable bool) *v1.ConfigMap {
	GinkgoHelper()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"value": value}}
	if immutable {
		cm.Immutable = &immutable
	}
	Expect(admin.Create(ctx, cm)).To(Succeed())
	return cm
}

// secret creates a Secret with data {"password": value}.
func secret(ctx context.Context, ns, name, value string) *v1.Secret {
	GinkgoHelper()
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"password": []byte(value)}}
	Expect(admin.Create(ctx, s)).To(Succeed())
	return s
}

// setValue writes value into the ConfigMap's data, retrying conflicts.
func setValue(ctx context.Context, ns, name, value string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		cm := &v1.ConfigMap{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
		cm.Data = map[string]string{"value": value}
		g.Expect(admin.Update(ctx, cm)).To(Succeed())
	}).WithTimeout(recoveryTimeout).Should(Succeed())
}

// boundPod creates a pod bound to node that mounts the ConfigMaps cms in
// volumes and takes an env var from each Secret in secrets.
func boundPod(ctx context.Context, ns, node string, cms, secrets []string, mutate ...func(*v1.Pod)) *v1.Pod {
	GinkgoHelper()
	c := v1.Container{Name: "c", Image: "nodelet.test/pause:1.0"}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pod-"},
		Spec:       v1.PodSpec{NodeName: node},
	}
	for _, name := range cms {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "cm-" + name, VolumeSource: v1.VolumeSource{
			ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: name}},
		}})
	}
	for _, name := range secrets {
		c.Env = append(c.Env, v1.EnvVar{Name: "S_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")), ValueFrom: &v1.EnvVarSource{
			SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: "password"},
		}})
	}
	pod.Spec.Containers = []v1.Container{c}
	for _, m := range mutate {
		m(pod)
	}
	Expect(admin.Create(ctx, pod)).To(Succeed())
	return pod
}

// metricValue reads a metric of the object store from controller-runtime's
// registry, where nodelet serves it.
func metricValue(name, resource string) float64 {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && l.GetValue() == resource {
					if m.GetGauge() != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// serverWatches counts the watches on resource the API server is serving,
// from its own apiserver_longrunning_requests metric.
func serverWatches(ctx context.Context, resource string) float64 {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(apiServer.Config)
	Expect(err).NotTo(HaveOccurred())
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	var total float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") ||
			!strings.Contains(line, `resource="`+resource+`"`) || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		var v float64
		_, err := fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v)
		Expect(err).NotTo(HaveOccurred())
		total += v
	}
	return total
}

// restartAPIServer stops the API server (etcd keeps running), runs during
// while it is down, and starts it again on the same port with the same
// serving certificate so that running clients reconnect.
//
// envtest deletes a certificate directory it made on Stop and makes a new
// serving CA on Start, which clients built before do not trust; so the
// directory is copied aside first and the restart uses the copy.
func restartAPIServer(during func()) {
	GinkgoHelper()
	Expect(apiServer.Restart(during)).To(Succeed())
}

// compactEtcd compacts etcd up to its current revision through its JSON
// gateway, so that every older resource version is gone: a watch resuming
// from one gets 410 Gone.
func compactEtcd() {
	GinkgoHelper()
	base := apiServer.Env.ControlPlane.Etcd.URL.String()
	post := func(path string, body any) map[string]any {
		data, err := json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.Post(base+path, "application/json", bytes.NewReader(data))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK), "etcd %s", path)
		out := map[string]any{}
		Expect(json.NewDecoder(resp.Body).Decode(&out)).To(Succeed())
		return out
	}
	rng := post("/v3/kv/range", map[string]string{"key": base64.StdEncoding.EncodeToString([]byte("/"))})
	rev := rng["header"].(map[string]any)["revision"].(string)
	post("/v3/kv/compaction", map[string]any{"revision": rev, "physical": true})
	GinkgoWriter.Printf("etcd compacted at revision %s\n", rev)
}
