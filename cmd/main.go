// Command nodelet is a Kubernetes node agent: it runs the pods bound to one
// node through the CRI and reports them, as a controller-runtime manager.
// It is the public extension API's Run with no reconciler added.
package main

import (
	"os"

	"github.com/nodelet/nodelet/pkg/nodelet"
)

func main() {
	os.Exit(nodelet.Run(os.Args[1:]))
}
