package cri

import "maps"

// LabelNode is the ownership label nodelet puts on every sandbox and
// container it creates; its value is the name of the node the nodelet runs.
// Objects without it, or with another node's name, belong to someone else.
const LabelNode = "nodelet.io/node"

// OwnerLabels returns the labels that mark a CRI object as created by the
// nodelet of node. The caller may modify the returned map.
func OwnerLabels(node string) map[string]string {
	return map[string]string{LabelNode: node}
}

// IsOwned reports whether labels mark an object as created by the nodelet of
// node. An empty node owns nothing.
func IsOwned(labels map[string]string, node string) bool {
	return node != "" && labels[LabelNode] == node
}

// withOwner returns a copy of labels with the ownership label for node set.
// It fails when labels already claim the object for another node.
func withOwner(labels map[string]string, node string) (map[string]string, error) {
	if v, ok := labels[LabelNode]; ok && v != node {
		return nil, &ownerConflictError{node: node, claimed: v}
	}
	out := make(map[string]string, len(labels)+1)
	maps.Copy(out, labels)
	out[LabelNode] = node
	return out, nil
}

type ownerConflictError struct{ node, claimed string }

func (e *ownerConflictError) Error() string {
	return "label " + LabelNode + "=" + e.claimed + " claims the object for another node than " + e.node
}
