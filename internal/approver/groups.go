package approver

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

const (
	// BootstrappersGroup is the extra group of every bootstrap token made
	// for a nodelet: config/rbac lets it create CSRs, and the approver
	// decides on the node client CSRs its members make.
	BootstrappersGroup = "system:bootstrappers:nodelet"
	// nodeGroupPrefix starts the node-binding group of a node name that
	// can be written in a group name as it is.
	nodeGroupPrefix = BootstrappersGroup + ":node:"
	// nodeHashGroupPrefix starts the node-binding group of any other node
	// name: the hex SHA-256 of the name follows.
	nodeHashGroupPrefix = BootstrappersGroup + ":node-sha256:"
	// bootstrapUserPrefix starts the user name of a bootstrap token.
	bootstrapUserPrefix = "system:bootstrap:"
	// nodeUserPrefix starts the user name of a node.
	nodeUserPrefix = "system:node:"
	// nodesGroup is the group of node identities.
	nodesGroup = "system:nodes"
)

// bootstrapGroupPrefix starts every extra group of a bootstrap token.
const bootstrapGroupPrefix = "system:bootstrappers:"

// maxBootstrapGroupSuffix is the longest a bootstrap token group may be
// after bootstrapGroupPrefix.
const maxBootstrapGroupSuffix = 256

// validBootstrapGroup tells whether the API server accepts g as an extra
// group of a bootstrap token (auth-extra-groups): the API server's pattern
// \Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z, checked by hand, since
// that pattern compiled is a program of 256 repeated states that every
// process importing this package would keep from its start.
func validBootstrapGroup(g string) bool {
	rest, ok := strings.CutPrefix(g, bootstrapGroupPrefix)
	if !ok || rest == "" || len(rest) > maxBootstrapGroupSuffix {
		return false
	}
	for i := range len(rest) {
		c := rest[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !alnum && (i == len(rest)-1 || c != ':' && c != '-') {
			return false
		}
	}
	return true
}

// NodeGroup is the group that binds a nodelet bootstrap token to node
// name: system:bootstrappers:nodelet:node:<name> when that is a valid
// bootstrap token group (names without dots, short enough), else
// system:bootstrappers:nodelet:node-sha256:<hex SHA-256 of the name>.
// hack/bootstrap-token.sh computes the same.
func NodeGroup(name string) string {
	if g := nodeGroupPrefix + name; validBootstrapGroup(g) {
		return g
	}
	sum := sha256.Sum256([]byte(name))
	return nodeHashGroupPrefix + hex.EncodeToString(sum[:])
}

// TokenGroups are the auth-extra-groups of the bootstrap token of node
// name.
func TokenGroups(name string) []string {
	return []string{BootstrappersGroup, NodeGroup(name)}
}

// isNodeGroup reports whether g is a node-binding group.
func isNodeGroup(g string) bool {
	return strings.HasPrefix(g, nodeGroupPrefix) || strings.HasPrefix(g, nodeHashGroupPrefix)
}
