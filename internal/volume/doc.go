// Package volume prepares a pod's volumes on the host and turns a
// container's volumeMounts into CRI mounts, the part of the kubelet's volume
// manager that needs no storage plugins. A Manager keeps one directory per pod
// under <root>/pods/<uid> with the kubelet's layout
// (volumes/kubernetes.io~<plugin>/<name>, containers/<name>/<restart>,
// etc-hosts). SetUp creates emptyDir volumes (memory-backed ones on tmpfs
// through k8s.io/mount-utils), checks hostPath volumes against their type, and
// writes the content of configMap, secret, downwardAPI and projected volumes
// (including bound service account tokens, refreshed at 80% of their lifetime)
// with an atomic writer: each version lives in its own timestamped data
// directory, a "..data" symlink is swapped to it with one rename, and the
// user-visible names are symlinks through "..data", so a running container
// sees either the old or the new content, never a mix. Secret and projected
// volumes live on tmpfs by default so that secrets never reach the disk, and
// their content is never logged. SetUp is idempotent; the pod reconciler
// runs it at every sync of a running pod, so changed content is rewritten
// then, and at NextRefresh for tokens. A failure is a *SetUpError whose text is the
// kubelet's FailedMount event message. Mounts, WriteEtcHosts and the
// termination-message file give the CRI what a container start needs, and
// TearDown unmounts what SetUp mounted and removes the pod directory.
package volume
