// Package localup checks make run's local cluster the way a user meets it:
// it builds hack/localup, runs it with a state directory of its own, waits
// for the demo to be up, rolls out a Deployment of the web image through
// the API, reads logs and execs through the node, and checks that stopping
// (SIGINT) and make run-down after a SIGKILL leave no process, mount,
// network device or directory behind. It needs root and runs with a plain
// `go test ./test/localup/`.
package localup
