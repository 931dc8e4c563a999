#!/usr/bin/env bash
# Makes the bootstrap token of one nodelet host and writes its bootstrap
# kubeconfig, with the cluster admin's kubectl and $KUBECONFIG.
#
#   hack/bootstrap-token.sh <node-name> [ttl]
#
# node-name  the Node the host's nodelet registers (with config/default:
#            <host node>-nodelet)
# ttl        how long the token authenticates: <n>s, <n>m or <n>h; default
#            1h. The controller-manager's tokencleaner deletes it then.
#
# The token Secret (kube-system/bootstrap-token-<id>) has
# usage-bootstrap-authentication, an expiration, and the extra groups
# system:bootstrappers:nodelet (config/rbac lets it create CSRs) and the
# group binding it to node-name: system:bootstrappers:nodelet:node:<name>
# when that is a valid bootstrap token group (no dots, 243 characters at
# most), else system:bootstrappers:nodelet:node-sha256:<hex SHA-256 of the
# name>. nodelet csr-approver (config/approver) approves that token's
# request for that node only, once.
#
# Idempotent: the node's earlier tokens (label nodelet.io/bootstrap-node)
# are deleted, so each node has at most one, the one just made.
#
# Environment:
#   KUBECTL               kubectl to run (default: kubectl)
#   BOOTSTRAP_KUBECONFIG  where to write the kubeconfig (default:
#                         ./<node-name>.bootstrap.kubeconfig); - prints it
#   BOOTSTRAP_SERVER      the API server address hosts use (default: the
#                         admin kubeconfig's)
#
# Put the file on the host as /etc/nodelet/bootstrap/bootstrap.kubeconfig
# (mode 0600); nodelet removes it once it has joined.
set -euo pipefail

usage() {
	echo "usage: $0 <node-name> [ttl]  (ttl: <n>s, <n>m or <n>h, default 1h)" >&2
	exit 2
}
fail() {
	echo "bootstrap-token: $*" >&2
	exit 1
}

[[ $# -ge 1 && $# -le 2 ]] || usage
node="$1"
ttl="${2:-1h}"
kubectl="${KUBECTL:-kubectl}"

# A Node name is a DNS-1123 subdomain.
label='[a-z0-9]([-a-z0-9]*[a-z0-9])?'
if ! [[ "$node" =~ ^$label(\.$label)*$ ]] || ((${#node} > 253)); then
	fail "node name $node is not a valid Node name (lowercase DNS subdomain, 253 characters at most)"
fi
if ! [[ "$ttl" =~ ^([0-9]+)([smh])$ ]]; then
	usage
fi
case "${BASH_REMATCH[2]}" in
s) seconds=$((10#${BASH_REMATCH[1]})) ;;
m) seconds=$((10#${BASH_REMATCH[1]} * 60)) ;;
h) seconds=$((10#${BASH_REMATCH[1]} * 3600)) ;;
esac
((seconds > 0)) || fail "ttl must be positive"
if ((seconds > 3600)); then
	# The controller-manager deletes an approved CSR an hour after its
	# approval; the approver's one-certificate-per-token rule sees only the
	# CSRs that exist.
	echo "bootstrap-token: warning: a token valid for more than 1h may outlive the CSR the approver counts it by" >&2
fi

# The node-binding group: the same as internal/approver's NodeGroup.
sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
hash="$(printf '%s' "$node" | sha256 | cut -d' ' -f1)"
prefix="system:bootstrappers:"
group="${prefix}nodelet:node:$node"
if [[ "$node" == *.* ]] || ((${#group} - ${#prefix} > 256)); then
	group="system:bootstrappers:nodelet:node-sha256:$hash"
fi

# random n: n characters of [a-z0-9], the bootstrap token alphabet, from
# /dev/urandom without modulo bias.
random() {
	local n="$1" out="" byte
	local alphabet=abcdefghijklmnopqrstuvwxyz0123456789
	while ((${#out} < n)); do
		for byte in $(od -An -tu1 -N64 /dev/urandom); do
			((byte < 252)) || continue
			out+="${alphabet:byte%36:1}"
			((${#out} < n)) || break
		done
	done
	printf '%s' "$out"
}
id="$(random 6)"
secret="$(random 16)"

now="$(date -u +%s)"
expiration="$(date -u -d "@$((now + seconds))" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null ||
	date -u -r "$((now + seconds))" +%Y-%m-%dT%H:%M:%SZ)"

# The cluster as the admin's kubeconfig has it (--flatten inlines a CA
# file).
server="${BOOTSTRAP_SERVER:-$("$kubectl" config view --minify --flatten -o 'jsonpath={.clusters[0].cluster.server}')}"
ca="$("$kubectl" config view --minify --flatten -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}')"
[[ -n "$server" ]] || fail "the current kubeconfig names no API server"
[[ -n "$ca" ]] || fail "the current kubeconfig names no cluster CA; the bootstrap kubeconfig needs one"

# One token per node: the earlier ones go.
"$kubectl" -n kube-system delete secret -l "nodelet.io/bootstrap-node=${hash:0:63}" --ignore-not-found >&2
"$kubectl" create -f - >&2 <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-$id
  namespace: kube-system
  labels:
    nodelet.io/bootstrap-node: "${hash:0:63}"
  annotations:
    nodelet.io/node-name: "$node"
type: bootstrap.kubernetes.io/token
stringData:
  description: "nodelet TLS bootstrap of node $node"
  token-id: "$id"
  token-secret: "$secret"
  expiration: "$expiration"
  usage-bootstrap-authentication: "true"
  auth-extra-groups: "system:bootstrappers:nodelet,$group"
EOF

kubeconfig="$(
	cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: nodelet-bootstrap
  user:
    token: $id.$secret
contexts:
- name: nodelet-bootstrap
  context:
    cluster: cluster
    user: nodelet-bootstrap
current-context: nodelet-bootstrap
EOF
)"

out="${BOOTSTRAP_KUBECONFIG:-./$node.bootstrap.kubeconfig}"
echo "bootstrap-token: token $id for node $node (group $group), valid until $expiration" >&2
if [[ "$out" == "-" ]]; then
	printf '%s\n' "$kubeconfig"
	exit 0
fi
(
	umask 077
	printf '%s\n' "$kubeconfig" >"$out.tmp"
)
mv -f "$out.tmp" "$out"
echo "bootstrap-token: wrote $out; install it on the host as /etc/nodelet/bootstrap/bootstrap.kubeconfig (mode 0600)" >&2
echo "$out"
