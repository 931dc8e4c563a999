package stats

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestNanoCores(t *testing.T) {
	g := NewWithT(t)
	p := &Provider{}
	t0 := time.Unix(100, 0)
	g.Expect(p.nanoCores("c", t0, 1_000)).To(BeNil(), "first sample")
	g.Expect(p.nanoCores("c", t0.Add(2*time.Second), 1_000_001_000)).To(Equal(ptr.To[uint64](500_000_000)))
	g.Expect(p.nanoCores("c", t0.Add(2*time.Second), 2_000_000_000)).To(BeNil(), "no time passed")
	g.Expect(p.nanoCores("c", t0.Add(3*time.Second), 10)).To(BeNil(), "the counter went back: a new container")
	g.Expect(p.nanoCores("c", t0.Add(4*time.Second), 100_000_010)).To(Equal(ptr.To[uint64](100_000_000)), "from the reset")
	g.Expect(p.nanoCores("c", t0, 200_000_000)).To(BeNil(), "a sample older than the last")
	g.Expect(p.nanoCores("other", t0, 5)).To(BeNil(), "samples are by key")
	g.Expect(p.nanoCores("", t0, 5)).To(BeNil())

	p.forget(map[string]bool{"other": true})
	g.Expect(p.cpu).To(HaveKey("other"))
	g.Expect(p.cpu).To(HaveKey(""), "the node's sample is kept")
	g.Expect(p.cpu).NotTo(HaveKey("c"))
}

func TestNetworkStats(t *testing.T) {
	g := NewWithT(t)
	ts := metav1.NewTime(time.Unix(100, 0))
	dev := []byte("h|h\nh|h\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n" +
		"  eth0: 10 1 2 0 0 0 0 0 20 2 3 0 0 0 0 0\n" +
		"  eth1: 30 1 0 0 0 0 0 0 40 2 0 0 0 0 0 0\n")
	ns := networkStats(ts, dev, "eth1")
	g.Expect(ns.Name).To(Equal("eth1"), "the default route's interface")
	g.Expect(ns.RxBytes).To(Equal(ptr.To[uint64](30)))
	g.Expect(ns.Interfaces).To(HaveLen(2), "loopback left out")
	g.Expect(ns.Interfaces[0].RxErrors).To(Equal(ptr.To[uint64](2)))
	g.Expect(ns.Interfaces[0].TxErrors).To(Equal(ptr.To[uint64](3)))

	ns = networkStats(ts, dev, "")
	g.Expect(ns.Name).To(Equal("eth0"), "without a default route, the first one")
	g.Expect(networkStats(ts, []byte("h|h\nh|h\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n"), "lo")).To(BeNil())
}
