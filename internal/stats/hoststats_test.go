package stats

import (
	"testing"

	. "github.com/onsi/gomega"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestHostParsers(t *testing.T) {
	g := NewWithT(t)
	busy, err := parseProcStatCPU([]byte("cpu  100 10 50 1000 20 5 5 1 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\nbtime 1700000000\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(busy).To(BeEquivalentTo((100 + 10 + 50 + 5 + 5 + 1) * 10_000_000))
	boot, err := parseBootTime([]byte("cpu 1 2 3 4\nbtime 1700000000\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(boot).To(BeEquivalentTo(1700000000))
	_, err = parseProcStatCPU([]byte("intr 1\n"))
	g.Expect(err).To(HaveOccurred())

	mem, err := parseHostMemory([]byte("MemTotal: 1000 kB\nMemFree: 200 kB\nMemAvailable: 600 kB\nInactive(file): 300 kB\nAnonPages: 100 kB\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mem).To(Equal(hostMemory{Capacity: 1024000, Usage: 819200, WorkingSet: 512000, Available: 512000, RSS: 102400}))
	_, err = parseHostMemory([]byte("MemFree: 1 kB\n"))
	g.Expect(err).To(HaveOccurred())

	dev, err := parseNetDev([]byte(`Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0
  eth0: 2000 20 3 1 0 0 0 0 4000 40 5 2 0 0 0 0
`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dev).To(Equal([]netDev{{Name: "eth0", RxBytes: 2000, RxErrors: 3, TxBytes: 4000, TxErrs: 5,
		RxPackets: 20, RxDropped: 1, TxPackets: 40, TxDropped: 2}}))
}

func TestParsePressure(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *statsapi.PSIStats
		wantErr  bool
	}{
		{name: "some and full", in: "some avg10=0.36 avg60=0.06 avg300=0.01 total=52747\nfull avg10=0.10 avg60=0.02 avg300=0.00 total=1000\n",
			want: &statsapi.PSIStats{Some: statsapi.PSIData{Avg10: 0.36, Avg60: 0.06, Avg300: 0.01, Total: 52_747_000},
				Full: statsapi.PSIData{Avg10: 0.1, Avg60: 0.02, Total: 1_000_000}}},
		{name: "cpu before 5.13: some alone", in: "some avg10=1.00 avg60=2.00 avg300=3.00 total=5\n",
			want: &statsapi.PSIStats{Some: statsapi.PSIData{Avg10: 1, Avg60: 2, Avg300: 3, Total: 5000}}},
		{name: "unknown fields skipped", in: "some avg10=0.00 avg60=0.00 avg300=0.00 total=1 extra=9\n",
			want: &statsapi.PSIStats{Some: statsapi.PSIData{Total: 1000}}},
		{name: "empty", in: "", wantErr: true},
		{name: "full alone", in: "full avg10=0.00 avg60=0.00 avg300=0.00 total=1\n", wantErr: true},
		{name: "missing total", in: "some avg10=0.00 avg60=0.00 avg300=0.00\n", wantErr: true},
		{name: "bad number", in: "some avg10=x avg60=0.00 avg300=0.00 total=1\n", wantErr: true},
		{name: "negative total", in: "some avg10=0 avg60=0 avg300=0 total=-1\n", wantErr: true},
		{name: "unknown line", in: "most avg10=0 avg60=0 avg300=0 total=1\n", wantErr: true},
		{name: "no equals", in: "some avg10\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parsePressure([]byte(tc.in))
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
