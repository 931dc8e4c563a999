package containerlogs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPlanRotation(t *testing.T) {
	now := time.Date(2026, 11, 24, 23, 30, 5, 0, time.UTC)
	const (
		t1 = "0.log.20261124-232001"
		t2 = "0.log.20261124-232501"
		t3 = "0.log.20261124-232901"
		t4 = "0.log.20261124-233001"
	)
	renamed := "0.log.20261124-233005"
	for _, tc := range []struct {
		name     string
		size     int64
		names    []string
		maxFiles int
		want     Plan
	}{{
		name:  "below the size: nothing, not even leftovers",
		size:  99,
		names: []string{"0.log", t1 + ".gz.tmp", t2, t3},
		want:  Plan{},
	}, {
		name:  "first rotation",
		size:  100,
		names: []string{"0.log"},
		want:  Plan{Rename: renamed},
	}, {
		name:  "the newest rotated file is compressed before the current one takes its place",
		size:  100,
		names: []string{"0.log", t1},
		want:  Plan{Compress: []string{t1}, Rename: renamed},
	}, {
		name:  "the oldest go so that maxFiles remain with the new current log",
		size:  500,
		names: []string{"0.log", t1 + ".gz", t2 + ".gz", t3 + ".gz", t4},
		want:  Plan{Remove: []string{t1 + ".gz", t2 + ".gz"}, Compress: []string{t4}, Rename: renamed},
	}, {
		name:     "maxFiles 2: every rotated file goes",
		size:     100,
		names:    []string{"0.log", t3 + ".gz", t4},
		maxFiles: 2,
		want:     Plan{Remove: []string{t3 + ".gz", t4}, Rename: renamed},
	}, {
		name:  "leftovers of an interrupted compression: the temporary file, and a compressed copy of a file still there",
		size:  100,
		names: []string{"0.log", t2 + ".gz.tmp", t3, t3 + ".gz", t4 + ".tmp"},
		want:  Plan{Remove: []string{t2 + ".gz.tmp", t3 + ".gz", t4 + ".tmp"}, Compress: []string{t3}, Rename: renamed},
	}, {
		name:  "other containers' and restarts' files, and names nodelet does not make, are left alone",
		size:  100,
		names: []string{"0.log", "1.log", "1.log." + "20261124-232001", "10.log.20261124-232001", "0.log.old", "0.log.2026.gz", t1},
		want:  Plan{Compress: []string{t1}, Rename: renamed},
	}, {
		name:  "rotated within the same second already: only leftovers",
		size:  100,
		names: []string{"0.log", renamed, t1 + ".gz.tmp"},
		want:  Plan{Remove: []string{t1 + ".gz.tmp"}},
	}, {
		name:  "sorted by time, not by listing order",
		size:  100,
		names: []string{t4, t1 + ".gz", "0.log", t3 + ".gz", t2 + ".gz"},
		want:  Plan{Remove: []string{t1 + ".gz", t2 + ".gz"}, Compress: []string{t4}, Rename: renamed},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			maxFiles := tc.maxFiles
			if maxFiles == 0 {
				maxFiles = 4
			}
			got := PlanRotation("0.log", tc.size, tc.names, 100, maxFiles, now)
			if d := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("PlanRotation (-want +got):\n%s", d)
			}
		})
	}
}

func TestIsRotatedFile(t *testing.T) {
	for name, want := range map[string]bool{
		"0.log.20261124-232001":        true,
		"0.log.20261124-232001.gz":     true,
		"0.log.20261124-232001.gz.tmp": true,
		"0.log":                        false,
		"10.log.20261124-232001":       false,
		"0.log.x":                      false,
	} {
		if got := IsRotatedFile("0.log", name); got != want {
			t.Errorf("IsRotatedFile(0.log, %q) = %v, want %v", name, got, want)
		}
	}
}

func TestLinkName(t *testing.T) {
	id := strings.Repeat("ab", 32)
	long := strings.Repeat("p", 253)
	for _, tc := range []struct {
		name, pod, ns, container, want string
	}{
		{name: "the kubelet's shape", pod: "web-0", ns: "shop", container: "nginx", want: "web-0_shop_nginx-" + id + ".log"},
		{name: "cut to 255 bytes", pod: long, ns: "ns", container: "c", want: (long + "_ns_c-" + id)[:251] + ".log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := LinkName(tc.pod, tc.ns, tc.container, id)
			if got != tc.want {
				t.Errorf("LinkName = %q, want %q", got, tc.want)
			}
			if len(got) > 255 {
				t.Errorf("LinkName is %d bytes long", len(got))
			}
		})
	}
}

func TestPlanLinkSweep(t *testing.T) {
	const node = "node-a"
	ours := func(name string) LinkState { return LinkState{Name: name, PodDir: "ns_p_uid", Owner: node} }
	for _, tc := range []struct {
		name  string
		links []LinkState
		keep  []string
		node  string
		want  []string
	}{{
		name:  "a removed container's link into a directory this node made goes",
		links: []LinkState{ours("p_ns_c-gone.log")},
		want:  []string{"p_ns_c-gone.log"},
	}, {
		name:  "a held container's link stays",
		links: []LinkState{ours("p_ns_c-live.log")},
		keep:  []string{"p_ns_c-live.log"},
	}, {
		name:  "a link into an unmarked directory (a kubelet's) stays",
		links: []LinkState{{Name: "k_ns_c-kubelet.log", PodDir: "ns_k_kuid"}},
	}, {
		name:  "a link into another node's directory stays",
		links: []LinkState{{Name: "q_ns_c-other.log", PodDir: "ns_q_quid", Owner: "node-b"}},
	}, {
		name:  "a dangling link into a directory that is gone goes, whoever made it",
		links: []LinkState{{Name: "k_ns_c-dead.log", PodDir: "ns_k_kuid", DirGone: true}},
		want:  []string{"k_ns_c-dead.log"},
	}, {
		name:  "a held container's link stays even when its directory is gone",
		links: []LinkState{{Name: "p_ns_c-live.log", PodDir: "ns_p_uid", DirGone: true}},
		keep:  []string{"p_ns_c-live.log"},
	}, {
		name:  "no link, or a link elsewhere, stays",
		links: []LinkState{{Name: "file.log"}, {Name: "elsewhere.log", DirGone: true}},
	}, {
		name:  "without a node name no marker is this node's",
		links: []LinkState{{Name: "x.log", PodDir: "ns_x_uid"}},
		node:  "-",
	}, {
		name:  "several, sorted",
		links: []LinkState{ours("b.log"), {Name: "k.log", PodDir: "ns_k_kuid"}, ours("a.log"), ours("c.log")},
		keep:  []string{"c.log"},
		want:  []string{"a.log", "b.log"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			keep := map[string]bool{}
			for _, k := range tc.keep {
				keep[k] = true
			}
			n := node
			if tc.node == "-" {
				n = ""
			}
			if diff := cmp.Diff(tc.want, PlanLinkSweep(tc.links, keep, n), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("PlanLinkSweep (-want +got):\n%s", diff)
			}
		})
	}
}
