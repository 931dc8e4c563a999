// Command reap removes what test and benchmark runs that were killed left
// on the machine (make test-down): their containerds, shims and
// containers, agents, API servers and etcds, the mounts and directories
// under the temporary directory, the pod cgroups under /nodelet-e2e, the
// harness's bridges and the sockets of killed shims. It refuses while a test binary, ginkgo or make run's
// local cluster runs. It runs as root:
//
//	go run ./hack/reap
package main

import (
	"fmt"
	"os"

	"github.com/nodelet/nodelet/test/utils"
)

func main() {
	logf := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	got, err := utils.ReapLeftovers(logf)
	fmt.Printf("removed %d containerd instances, %d directories, %d cgroup trees, %d bridges, %d shim sockets\n",
		got.Instances, got.Dirs, got.Cgroups, got.Bridges, got.Sockets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reap:", err)
		os.Exit(1)
	}
}
