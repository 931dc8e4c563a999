// Package version holds nodelet's own version, reported as the Node's
// kubeletVersion and in the user agent. It is set at build time with
//
//	go build -ldflags "-X github.com/nodelet/nodelet/internal/version.Version=v1.2.3"
package version
