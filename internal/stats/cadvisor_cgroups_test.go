package stats

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseProcCgroup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    cgroupLocation
		wantErr bool
	}{
		{
			name: "v1 with a unified hierarchy beside it",
			in:   "12:pids:/kubepods/podu/abc\n4:memory:/kubepods/podu/abc\n3:cpu,cpuacct:/kubepods/podu/abc\n0::/\n",
			want: cgroupLocation{path: "/kubepods/podu/abc"},
		},
		{
			name: "v2 alone",
			in:   "0::/kubepods.slice/kubepods-podu.slice/cri-containerd-abc.scope\n",
			want: cgroupLocation{path: "/kubepods.slice/kubepods-podu.slice/cri-containerd-abc.scope", v2: true},
		},
		{name: "nothing to read", in: "garbage\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcCgroup([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestCgroupStatsFrom(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name  string
		v2    bool
		files map[string]string
		want  cgroupStats
	}{
		{name: "nothing readable", want: cgroupStats{}},
		{
			name: "v1",
			files: map[string]string{
				"cpu.stat":           "nr_periods 100\nnr_throttled 40\nthrottled_time 2500000000\n",
				"cpuacct.stat":       "user 150\nsystem 50\n",
				"memory.stat":        "cache 1\nrss 2\ntotal_cache 4096\ntotal_rss 8192\ntotal_swap 512\n",
				"memory.failcnt":     "3\n",
				"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
				"cgroup.procs":       "10\n11\n",
				"tasks":              "10\n11\n12\n",
			},
			want: cgroupStats{
				cpuUserSeconds: f(1.5), cpuSystemSeconds: f(0.5),
				cfsPeriods: u(100), cfsThrottledPeriods: u(40), cfsThrottledSeconds: f(2.5),
				cache: u(4096), swap: u(512), failcnt: u(3), oomKills: u(2), processes: u(2), threads: u(3),
			},
		},
		{
			name: "v1 without swap accounting, on a kernel without oom_kill",
			files: map[string]string{
				"memory.stat":        "total_cache 4096\n",
				"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\n",
			},
			want: cgroupStats{cache: u(4096)},
		},
		{
			name: "v2",
			v2:   true,
			files: map[string]string{
				"cpu.stat":            "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\nnr_periods 10\nnr_throttled 5\nthrottled_usec 250000\n",
				"memory.stat":         "anon 8192\nfile 4096\n",
				"memory.swap.current": "0\n",
				"memory.events":       "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n",
				"cgroup.procs":        "1\n",
				"cgroup.threads":      "1\n2\n",
			},
			want: cgroupStats{
				cpuUserSeconds: f(2), cpuSystemSeconds: f(1),
				cfsPeriods: u(10), cfsThrottledPeriods: u(5), cfsThrottledSeconds: f(0.25),
				cache: u(4096), swap: u(0), oomKills: u(1), processes: u(1), threads: u(2),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range tc.files {
				files[k] = []byte(v)
			}
			NewWithT(t).Expect(cgroupStatsFrom(tc.v2, files)).To(Equal(tc.want))
		})
	}
}
