// Command prepuller-nodelet is nodelet with one reconciler added: the image
// pre-puller of package prepuller, which keeps the images a Node's
// prepull.nodelet.io/images annotation names pulled on that node. It takes
// nodelet's flags and configuration; its own options come from the
// environment (PREPULL_INTERVAL, PREPULL_PULL_TIMEOUT).
package main

import (
	"fmt"
	"os"

	"github.com/nodelet/nodelet/pkg/nodelet"

	"example.com/nodelet-prepuller/prepuller"
)

func main() {
	opts, err := prepuller.OptionsFromEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prepuller-nodelet: %v\n", err)
		os.Exit(2)
	}
	os.Exit(nodelet.Run(os.Args[1:], prepuller.Reconciler(opts)))
}
