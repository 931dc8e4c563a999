// Package volume prepares a pod's volumes on the host and turns a
// container's volumeMounts into CRI mounts, the part of the kubelet's volume
// manager that needs no storage plugins. A Manager keeps one directory per pod
// under <root>/pods/<uid> with the kubelet's layout
// (volumes/kubernetes.io~<plugin>/<name>, containers/<name>/<restart>,
// etc-hosts). SetUp creates emptyDir volumes (memory-backed ones on tmpfs,
// mounted with a system call behind k8s.io/mount-utils' interface), checks
// hostPath volumes against their type (image volumes need nothing on the
// host: Mounts hands the runtime the image the executor pulled), and
// writes the content of configMap, secret, downwardAPI and projected volumes
// (including bound service account tokens, refreshed at 80% of their lifetime,
// and pod certificates: a key made in memory and the chain a signer issues
// through a PodCertificateRequest, requested again at its beginRefreshAt)
// with an atomic writer: each version lives in its own timestamped data
// directory, a "..data" symlink is swapped to it with one rename, and the
// user-visible names are symlinks through "..data", so a running container
// sees either the old or the new content, never a mix. Secret and projected
// volumes live on tmpfs so that secrets never reach the disk, and their
// content is never logged. SetUp prepares a pod's volumes once and then
// returns at once without reading anything, so a container restart needs
// nothing from the API server; Update rewrites the volumes that project a
// changed object, and Refresh what is due without one (a token or a
// certificate at NextRefresh, downward API files after a label or annotation change). As
// in the kubelet, an optional ConfigMap or Secret that does not exist
// projects no files, so a rewrite removes those it had, while a required
// one fails with a *MissingObjectError and the volume keeps its files. A
// failure is a *SetUpError whose text is the kubelet's FailedMount event
// message. Mounts, WriteEtcHosts and the
// termination-message file give the CRI what a container start needs (a
// subPath or expanded subPathExpr is opened below its volume without
// following links and bind-mounted under the pod directory), volumes are
// handed to the pod's fsGroup, and TearDown unmounts what SetUp and Mounts
// mounted and removes the pod directory.
//
// A persistentVolumeClaim or generic ephemeral volume is resolved at SetUp to
// its bound PersistentVolume (direct GETs through the Fetcher, checked as the
// kubelet checks them, with its messages): a hostPath PV is used in place, a
// local PV is bind-mounted under the pod directory after its nodeAffinity is
// checked against the node's labels, and a CSI PV or inline csi volume is
// published through the CSI interface, which TearDown asks first to
// unpublish. What each volume resolved to is kept for Mounts and returned by
// PodVolumePaths.
//
// nodelet may see the host's filesystem at a hostRoot other than "/" (a
// DaemonSet that mounts the host's / at /host; WithHostRoot): hostPath
// volumes and local PVs are then checked, created and opened with
// openat2(RESOLVE_IN_ROOT) below it, so links resolve as on the host, a
// subPath of them is bind-mounted from there, and the runtime, which runs
// on the host, is still handed the host's own paths.
package volume
