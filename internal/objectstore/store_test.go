package objectstore_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/objectstore"
)

// cmValue reads the store's ConfigMap value.
func cmValue(ctx context.Context, s *objectstore.Store, ns, name string) func(g Gomega) string {
	return func(g Gomega) string {
		cm, err := s.GetConfigMap(ctx, ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		return cm.Data["value"]
	}
}

// notFound is what existingValue returns for a NotFound read.
const notFound = "<NotFound>"

// existingValue reads the ConfigMap's value through the store's
// ExistingReader: notFound when the read is NotFound.
func existingValue(ctx context.Context, s *objectstore.Store, ns, name string) func(g Gomega) string {
	return func(g Gomega) string {
		cm, err := s.ExistingReader().ConfigMap(ctx, ns, name)
		if apierrors.IsNotFound(err) {
			return notFound
		}
		g.Expect(err).NotTo(HaveOccurred())
		return cm.Data["value"]
	}
}

var _ = Describe("Store with the Watch strategy, as the node", func() {
	var (
		ns    string
		node  string
		nodeC kubernetes.Interface
		store *objectstore.Store
	)
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		node = nodeName()
		nodeC = nodeClient(node)
		store = startStore(nodeC, objectstore.Options{})
	})

	It("reads referenced objects and feeds an update within a second", func(ctx SpecContext) {
		configMap(ctx, ns, "app", "v1", false)
		secret(ctx, ns, "creds", "hunter2")
		pod := boundPod(ctx, ns, node, []string{"app"}, []string{"creds"})
		cmFeed := feed(store, objectstore.KindConfigMap)
		store.RegisterPod(pod)

		Eventually(cmValue(ctx, store, ns, "app")).WithTimeout(syncTimeout).Should(Equal("v1"))
		s, err := store.GetSecret(ctx, ns, "creds")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(s.Data["password"])).To(Equal("hunter2"))
		Expect(store.PodsReferencing(objectstore.KindConfigMap, ns, "app")).To(ConsistOf(client.ObjectKeyFromObject(pod)))
		Expect(store.PodsReferencing(objectstore.KindSecret, ns, "creds")).To(ConsistOf(client.ObjectKeyFromObject(pod)))

		updated := time.Now()
		setValue(ctx, ns, "app", "v2")
		req, ok := nextRequest(cmFeed, feedTimeout)
		Expect(ok).To(BeTrue(), "no change on the feed within %v", feedTimeout)
		GinkgoWriter.Printf("update → change feed: %v\n", time.Since(updated))
		Expect(req.NamespacedName).To(Equal(types.NamespacedName{Namespace: ns, Name: "app"}))
		Expect(cmValue(ctx, store, ns, "app")(Default)).To(Equal("v2"))
	})

	It("lets the last of 100 rapid updates win", func(ctx SpecContext) {
		configMap(ctx, ns, "busy", "0", false)
		store.RegisterPod(boundPod(ctx, ns, node, []string{"busy"}, nil))
		cmFeed := feed(store, objectstore.KindConfigMap)
		Eventually(cmValue(ctx, store, ns, "busy")).WithTimeout(syncTimeout).Should(Equal("0"))

		for i := 1; i <= 100; i++ {
			setValue(ctx, ns, "busy", fmt.Sprint(i))
		}
		done := time.Now()
		Eventually(cmValue(ctx, store, ns, "busy")).WithTimeout(feedTimeout).Should(Equal("100"))
		GinkgoWriter.Printf("last of 100 updates in the store %v after it was written\n", time.Since(done))
		// The feed coalesced the burst into the one key, still queued or
		// handed out; it is there.
		req, ok := nextRequest(cmFeed, feedTimeout)
		Expect(ok).To(BeTrue())
		Expect(req.Name).To(Equal("busy"))
	})

	It("holds one watch per object and stops it with the last pod", func(ctx SpecContext) {
		before := metricValue("nodelet_object_store_watches", "configmaps")
		serverBefore := serverWatches(ctx, "configmaps")
		configMap(ctx, ns, "shared", "x", false)
		a := boundPod(ctx, ns, node, []string{"shared"}, nil)
		b := boundPod(ctx, ns, node, []string{"shared"}, nil)
		store.RegisterPod(a)
		store.RegisterPod(b)
		store.RegisterPod(a) // again: idempotent
		Eventually(cmValue(ctx, store, ns, "shared")).WithTimeout(syncTimeout).Should(Equal("x"))
		Expect(metricValue("nodelet_object_store_watches", "configmaps")).To(Equal(before + 1))
		Eventually(func() float64 { return serverWatches(ctx, "configmaps") }).WithTimeout(stopTimeout).Should(Equal(serverBefore + 1))

		store.UnregisterPod(a)
		Consistently(func() float64 { return metricValue("nodelet_object_store_watches", "configmaps") }).
			WithTimeout(time.Second).Should(Equal(before + 1))
		Expect(store.PodsReferencing(objectstore.KindConfigMap, ns, "shared")).To(ConsistOf(client.ObjectKeyFromObject(b)))

		store.UnregisterPod(b)
		Eventually(func() float64 { return metricValue("nodelet_object_store_watches", "configmaps") }).
			WithTimeout(stopTimeout).Should(Equal(before))
		Eventually(func() float64 { return serverWatches(ctx, "configmaps") }).WithTimeout(stopTimeout).Should(Equal(serverBefore))
		Expect(store.PodsReferencing(objectstore.KindConfigMap, ns, "shared")).To(BeEmpty())
		_, err := store.GetConfigMap(ctx, ns, "shared")
		Expect(err).To(MatchError(objectstore.ErrNotRegistered))
	})

	It("reads an immutable object once and does not watch it", func(ctx SpecContext) {
		before := metricValue("nodelet_object_store_watches", "configmaps")
		configMap(ctx, ns, "frozen", "forever", true)
		store.RegisterPod(boundPod(ctx, ns, node, []string{"frozen"}, nil))
		Eventually(cmValue(ctx, store, ns, "frozen")).WithTimeout(syncTimeout).Should(Equal("forever"))
		Eventually(func() float64 { return metricValue("nodelet_object_store_watches", "configmaps") }).
			WithTimeout(stopTimeout).Should(Equal(before))
		Expect(cmValue(ctx, store, ns, "frozen")(Default)).To(Equal("forever"))
	})

	It("keeps the last content of a deleted object, which ExistingReader reports as NotFound, as it does one never seen", func(ctx SpecContext) {
		cm := configMap(ctx, ns, "doomed", "last words", false)
		store.RegisterPod(boundPod(ctx, ns, node, []string{"doomed", "later"}, nil))
		cmFeed := feed(store, objectstore.KindConfigMap)
		Eventually(cmValue(ctx, store, ns, "doomed")).WithTimeout(syncTimeout).Should(Equal("last words"))
		Expect(existingValue(ctx, store, ns, "doomed")(Default)).To(Equal("last words"))
		_, err := store.GetConfigMap(ctx, ns, "later")
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "want NotFound, got %v", err)
		Expect(existingValue(ctx, store, ns, "later")(Default)).To(Equal(notFound))

		Expect(admin.Delete(ctx, cm)).To(Succeed())
		req, ok := nextRequest(cmFeed, feedTimeout)
		Expect(ok).To(BeTrue())
		Expect(req.Name).To(Equal("doomed"))
		Expect(cmValue(ctx, store, ns, "doomed")(Default)).To(Equal("last words"))
		Expect(existingValue(ctx, store, ns, "doomed")(Default)).To(Equal(notFound))

		configMap(ctx, ns, "later", "arrived", false)
		req, ok = nextRequest(cmFeed, feedTimeout)
		Expect(ok).To(BeTrue())
		Expect(req.Name).To(Equal("later"))
		Expect(cmValue(ctx, store, ns, "later")(Default)).To(Equal("arrived"))
		Expect(existingValue(ctx, store, ns, "later")(Default)).To(Equal("arrived"))

		By("creating the deleted object again")
		configMap(ctx, ns, "doomed", "back", false)
		req, ok = nextRequest(cmFeed, feedTimeout)
		Expect(ok).To(BeTrue())
		Expect(req.Name).To(Equal("doomed"))
		Expect(existingValue(ctx, store, ns, "doomed")(Default)).To(Equal("back"))
		Expect(cmValue(ctx, store, ns, "doomed")(Default)).To(Equal("back"))
	})

	It("is refused a list of Secrets but never needs one", func(ctx SpecContext) {
		secret(ctx, ns, "mine", "s3cret")
		store.RegisterPod(boundPod(ctx, ns, node, nil, []string{"mine"}))
		Eventually(func(g Gomega) {
			s, err := store.GetSecret(ctx, ns, "mine")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(s.Data["password"])).To(Equal("s3cret"))
		}).WithTimeout(syncTimeout).Should(Succeed())

		_, err := nodeC.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a namespace-wide list must be refused, got %v", err)
		_, err = nodeC.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a namespace-wide watch must be refused, got %v", err)
		// What the store does instead is allowed: the one object by name.
		byName := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "mine").String()}
		list, err := nodeC.CoreV1().Secrets(ns).List(ctx, byName)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(1))
		// And only for objects its pods reference.
		secret(ctx, ns, "not-mine", "x")
		_, err = nodeC.CoreV1().Secrets(ns).Get(ctx, "not-mine", metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	})
})

var _ = Describe("Store across API server outages", Ordered, func() {
	It("loses no update when the API server restarts and resource versions expire", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		node := nodeName()
		store := startStore(nodeClient(node), objectstore.Options{})
		configMap(ctx, ns, "survivor", "before", false)
		configMap(ctx, ns, "noise", "0", false)
		store.RegisterPod(boundPod(ctx, ns, node, []string{"survivor"}, nil))
		cmFeed := feed(store, objectstore.KindConfigMap)
		Eventually(cmValue(ctx, store, ns, "survivor")).WithTimeout(syncTimeout).Should(Equal("before"))
		listsBefore := metricValue("nodelet_object_store_lists_total", "configmaps")

		// Move etcd past the watch's resource version with writes the
		// field selector hides from it, then compact while the API server
		// is down: the watch cannot resume from where it was.
		for i := 1; i <= 5; i++ {
			setValue(ctx, ns, "noise", fmt.Sprint(i))
		}
		restartAPIServer(func() {
			time.Sleep(apiServerDowntime)
			compactEtcd()
			// The last content stays readable while the API server is away.
			Expect(cmValue(ctx, store, ns, "survivor")(Default)).To(Equal("before"))
		})
		setValue(ctx, ns, "survivor", "after")

		Eventually(cmValue(ctx, store, ns, "survivor")).WithTimeout(recoveryTimeout).Should(Equal("after"))
		req, ok := nextRequest(cmFeed, feedTimeout)
		Expect(ok).To(BeTrue())
		Expect(req.Name).To(Equal("survivor"))
		// Usually the watch had to relist, its resource version gone; but
		// a bookmark that reached it before the outage carries the newest
		// revision, from which it may resume without one. Either way, no
		// update may be lost, which is what this spec holds it to.
		GinkgoWriter.Printf("lists of configmaps during the outage: %v\n",
			metricValue("nodelet_object_store_lists_total", "configmaps")-listsBefore)

		// And it is a live watch again.
		start := time.Now()
		setValue(ctx, ns, "survivor", "again")
		Eventually(cmValue(ctx, store, ns, "survivor")).WithTimeout(feedTimeout).Should(Equal("again"))
		GinkgoWriter.Printf("update after the restart reached the store in %v\n", time.Since(start))
	})
})

var _ = Describe("Store with the Cache and Get strategies", func() {
	var (
		ns   string
		node string
	)
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		node = nodeName()
	})

	It("Cache reads again only after the TTL and opens no watch", func(ctx SpecContext) {
		clk := clocktesting.NewFakePassiveClock(time.Now())
		watchesBefore := metricValue("nodelet_object_store_watches", "configmaps")
		store := startStore(nodeClient(node), objectstore.Options{
			Strategy: v1alpha1.CacheChangeDetectionStrategy, CacheTTL: time.Minute, Clock: clk,
		})
		configMap(ctx, ns, "ttl", "v1", false)
		store.RegisterPod(boundPod(ctx, ns, node, []string{"ttl"}, nil))
		Expect(metricValue("nodelet_object_store_watches", "configmaps")).To(Equal(watchesBefore))

		Eventually(cmValue(ctx, store, ns, "ttl")).WithTimeout(syncTimeout).Should(Equal("v1"))
		gets := metricValue("nodelet_object_store_get_requests_total", "configmaps")
		setValue(ctx, ns, "ttl", "v2")
		Expect(cmValue(ctx, store, ns, "ttl")(Default)).To(Equal("v1"), "within the TTL the cached copy is used")
		Expect(metricValue("nodelet_object_store_get_requests_total", "configmaps")).To(Equal(gets))

		clk.SetTime(clk.Now().Add(time.Minute + time.Second))
		Expect(cmValue(ctx, store, ns, "ttl")(Default)).To(Equal("v2"))
		Expect(metricValue("nodelet_object_store_get_requests_total", "configmaps")).To(Equal(gets + 1))
	})

	It("Cache sees a deletion and a re-creation after the TTL, and feeds both", func(ctx SpecContext) {
		clk := clocktesting.NewFakePassiveClock(time.Now())
		store := startStore(nodeClient(node), objectstore.Options{
			Strategy: v1alpha1.CacheChangeDetectionStrategy, CacheTTL: time.Minute, Clock: clk,
		})
		cm := configMap(ctx, ns, "ttl", "v1", false)
		store.RegisterPod(boundPod(ctx, ns, node, []string{"ttl"}, nil))
		cmFeed := feed(store, objectstore.KindConfigMap)
		Eventually(existingValue(ctx, store, ns, "ttl")).WithTimeout(syncTimeout).Should(Equal("v1"))

		Expect(admin.Delete(ctx, cm)).To(Succeed())
		Expect(existingValue(ctx, store, ns, "ttl")(Default)).To(Equal("v1"), "within the TTL the cached copy is used")
		clk.SetTime(clk.Now().Add(time.Minute + time.Second))
		Expect(existingValue(ctx, store, ns, "ttl")(Default)).To(Equal(notFound))
		Expect(cmValue(ctx, store, ns, "ttl")(Default)).To(Equal("v1"), "Reader keeps the last content seen")
		req, ok := nextRequest(cmFeed, feedTimeout)
		Expect(ok).To(BeTrue(), "the deletion was not fed")
		Expect(req.Name).To(Equal("ttl"))

		configMap(ctx, ns, "ttl", "v2", false)
		clk.SetTime(clk.Now().Add(time.Minute + time.Second))
		Expect(existingValue(ctx, store, ns, "ttl")(Default)).To(Equal("v2"))
		req, ok = nextRequest(cmFeed, feedTimeout)
		Expect(ok).To(BeTrue(), "the re-creation was not fed")
		Expect(req.Name).To(Equal("ttl"))
	})

	It("Get reads on every call and keeps the last content of a deleted object for Reader only", func(ctx SpecContext) {
		store := startStore(nodeClient(node), objectstore.Options{Strategy: v1alpha1.GetChangeDetectionStrategy})
		cm := configMap(ctx, ns, "direct", "v1", false)
		store.RegisterPod(boundPod(ctx, ns, node, []string{"direct"}, nil))
		Eventually(cmValue(ctx, store, ns, "direct")).WithTimeout(syncTimeout).Should(Equal("v1"))
		setValue(ctx, ns, "direct", "v2")
		Expect(cmValue(ctx, store, ns, "direct")(Default)).To(Equal("v2"))
		Expect(admin.Delete(ctx, cm)).To(Succeed())
		Expect(cmValue(ctx, store, ns, "direct")(Default)).To(Equal("v2"))
		Expect(existingValue(ctx, store, ns, "direct")(Default)).To(Equal(notFound))
		configMap(ctx, ns, "direct", "v3", false)
		Expect(existingValue(ctx, store, ns, "direct")(Default)).To(Equal("v3"))
	})
})

var _ = Describe("ServiceWatcher, as the node", func() {
	It("watches a namespace's Services only while a pod with service links is registered", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		node := nodeName()
		before := metricValue("nodelet_object_store_watches", "services")
		w := objectstore.NewServiceWatcher(nodeClient(node), syncTimeout, GinkgoLogr)
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(w.Start(wctx)).To(Succeed())
		}()
		DeferCleanup(func() { cancel(); Eventually(done).WithTimeout(stopTimeout).Should(BeClosed()) })

		// The API server creates default/kubernetes shortly after it starts
		// serving; a spec that runs first may get there before it.
		master := &v1.Service{}
		Eventually(func() error {
			return admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, master)
		}).WithTimeout(syncTimeout).Should(Succeed())
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-db"},
			Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "pg", Port: 5432}}},
		}
		Expect(admin.Create(ctx, svc)).To(Succeed())

		noLinks := boundPod(ctx, ns, node, nil, nil, func(p *v1.Pod) { f := false; p.Spec.EnableServiceLinks = &f })
		w.RegisterPod(noLinks)
		Expect(metricValue("nodelet_object_store_watches", "services")).To(Equal(before+1), "default/kubernetes only")
		env, err := w.ServiceEnv(ctx, noLinks)
		Expect(err).NotTo(HaveOccurred())
		Expect(env).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", master.Spec.ClusterIP))
		Expect(env).To(HaveKeyWithValue("KUBERNETES_SERVICE_PORT", fmt.Sprint(master.Spec.Ports[0].Port)))
		Expect(env).NotTo(HaveKey("MY_DB_SERVICE_HOST"))

		a := boundPod(ctx, ns, node, nil, nil)
		b := boundPod(ctx, ns, node, nil, nil)
		w.RegisterPod(a)
		w.RegisterPod(b)
		Expect(metricValue("nodelet_object_store_watches", "services")).To(Equal(before + 2))
		env, err = w.ServiceEnv(ctx, a)
		Expect(err).NotTo(HaveOccurred())
		Expect(env).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", master.Spec.ClusterIP))
		Expect(env).To(HaveKeyWithValue("MY_DB_SERVICE_HOST", svc.Spec.ClusterIP))
		Expect(env).To(HaveKeyWithValue("MY_DB_SERVICE_PORT_PG", "5432"))

		late := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
			Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}}},
		}
		Expect(admin.Create(ctx, late)).To(Succeed())
		Eventually(func(g Gomega) {
			env, err := w.ServiceEnv(ctx, b)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env).To(HaveKeyWithValue("LATE_SERVICE_HOST", late.Spec.ClusterIP))
		}).WithTimeout(feedTimeout).Should(Succeed())

		w.UnregisterPod(a)
		Expect(metricValue("nodelet_object_store_watches", "services")).To(Equal(before + 2))
		w.UnregisterPod(b)
		Eventually(func() float64 { return metricValue("nodelet_object_store_watches", "services") }).
			WithTimeout(stopTimeout).Should(Equal(before + 1))
		_, _, err = w.ServicesFor(ctx, ns)
		Expect(err).To(MatchError(objectstore.ErrNotRegistered))
	})
})
