package localup

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

const (
	// readyTimeout covers a cold start: the packages, the Kubernetes
	// binaries (minutes on two cores), the images, the demo.
	readyTimeout = 20 * time.Minute
	// rolloutTimeout bounds a Deployment's rollout on the loaded machine.
	rolloutTimeout = 2 * time.Minute
	// stopTimeout bounds a stop and a clean-up.
	stopTimeout = 2 * time.Minute
	// pollInterval is how often Eventually looks again.
	pollInterval = 200 * time.Millisecond
)

func TestLocalup(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "make run's local cluster")
}
