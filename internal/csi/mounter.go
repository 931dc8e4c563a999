package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/mount-utils"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/keylock"
	"github.com/nodelet/nodelet/internal/volume"
)

// The volume context keys the kubelet adds for a driver with
// podInfoOnMount, and for one with tokenRequests.
const (
	podNameKey            = "csi.storage.k8s.io/pod.name"
	podNamespaceKey       = "csi.storage.k8s.io/pod.namespace"
	podUIDKey             = "csi.storage.k8s.io/pod.uid"
	serviceAccountNameKey = "csi.storage.k8s.io/serviceAccount.name"
	ephemeralKey          = "csi.storage.k8s.io/ephemeral"
	tokensKey             = "csi.storage.k8s.io/serviceAccount.tokens"
)

// Defaults of Options.
const (
	DefaultAttachTimeout = 2 * time.Minute
	defaultAttachPoll    = time.Second
	// defaultTokenSeconds is a token request's lifetime when the CSIDriver
	// names none, the TokenRequest API's default.
	defaultTokenSeconds = 3600
)

// Options configure a Publisher. Every function field is required except
// where said otherwise. Getters return an error for which
// apierrors.IsNotFound is true when the object does not exist; they read
// single objects by name, as the Node authorizer allows.
type Options struct {
	// RootDir is the node agent's root directory (the kubelet's
	// --root-dir): pods/ and plugins/ are under it.
	RootDir string
	// NodeName is this node's name, part of VolumeAttachment names.
	NodeName string
	// Drivers gives registered drivers' node services.
	Drivers Drivers
	// CSIDriver reads a CSIDriver object; a missing one means the
	// kubelet's defaults (attach required, no pod info, no fsGroup by
	// the driver, Persistent volumes only).
	CSIDriver func(ctx context.Context, name string) (*storagev1.CSIDriver, error)
	// VolumeAttachment reads a VolumeAttachment.
	VolumeAttachment func(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)
	// Secret reads a Secret for the stage and publish secrets.
	Secret func(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// ServiceAccountToken requests a token for pod's service account bound
	// to pod, for CSIDriver.spec.tokenRequests.
	ServiceAccountToken func(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (authenticationv1.TokenRequestStatus, error)
	// Mounter checks mount points before directories are removed;
	// optional, the host's by default.
	Mounter mount.Interface
	// Clock times the wait for attachments; optional, the real clock by
	// default.
	Clock clock.Clock
	// AttachTimeout bounds the wait for a volume's attachment in one
	// Publish; DefaultAttachTimeout when zero.
	AttachTimeout time.Duration
	// SetOwnership hands a published volume to the pod's fsGroup;
	// optional, volume.SetVolumeOwnership by default.
	SetOwnership func(dir string, gid int64, policy *v1.PodFSGroupChangePolicy) error
	// InUse tracks the volumes in use for the Node's status; when set, a
	// volume that needs attaching is staged only once the Node's status
	// lists it, and each publish record written is noted in it. Optional.
	InUse *InUse
	// ResourceExhausted is told the driver of a volume whose attachment
	// failed with ResourceExhausted (AllocatableRefresher.ResourceExhausted).
	// Optional.
	ResourceExhausted func(driver string)
}

// Publisher publishes pods' CSI volumes through their drivers with the
// kubelet's paths and state files and tears them down from those files
// alone. It implements volume.CSI. It keeps no state in memory but locks:
// all it knows is on disk, so a new Publisher over the same root directory
// finishes what an old one began.
type Publisher struct {
	root             string
	nodeName         string
	drivers          Drivers
	csiDriver        func(ctx context.Context, name string) (*storagev1.CSIDriver, error)
	volumeAttachment func(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)
	secret           func(ctx context.Context, namespace, name string) (*v1.Secret, error)
	token            func(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (authenticationv1.TokenRequestStatus, error)
	mounter          mount.Interface
	clock            clock.Clock
	attachTimeout    time.Duration
	attachPoll       time.Duration
	setOwnership     func(dir string, gid int64, policy *v1.PodFSGroupChangePolicy) error
	volumesInUse     *InUse
	// resourceExhausted is Options.ResourceExhausted.
	resourceExhausted func(driver string)

	// locks serialise the work on one driver's volume handle, so that
	// a teardown never unstages a volume that another pod is publishing.
	locks keylock.Map

	// step, in tests, is called before each driver call and removal of
	// a publish or a teardown, and stops it when it returns an error, as a
	// crash would.
	step func(name string) error
}

var _ volume.CSI = (*Publisher)(nil)

// NewPublisher returns a Publisher configured by opts.
func NewPublisher(opts Options) (*Publisher, error) {
	switch {
	case opts.RootDir == "":
		return nil, errors.New("csi publisher: no root directory")
	case opts.NodeName == "":
		return nil, errors.New("csi publisher: no node name")
	case opts.Drivers == nil || opts.CSIDriver == nil || opts.VolumeAttachment == nil || opts.Secret == nil || opts.ServiceAccountToken == nil:
		return nil, errors.New("csi publisher: drivers, CSIDriver, VolumeAttachment, Secret and ServiceAccountToken are required")
	}
	p := &Publisher{
		root:              opts.RootDir,
		nodeName:          opts.NodeName,
		drivers:           opts.Drivers,
		csiDriver:         opts.CSIDriver,
		volumeAttachment:  opts.VolumeAttachment,
		secret:            opts.Secret,
		token:             opts.ServiceAccountToken,
		mounter:           opts.Mounter,
		clock:             opts.Clock,
		attachTimeout:     opts.AttachTimeout,
		attachPoll:        defaultAttachPoll,
		setOwnership:      opts.SetOwnership,
		volumesInUse:      opts.InUse,
		resourceExhausted: opts.ResourceExhausted,
		step:              func(string) error { return nil },
	}
	if p.mounter == nil {
		p.mounter = mount.New("")
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.attachTimeout == 0 {
		p.attachTimeout = DefaultAttachTimeout
	}
	if p.setOwnership == nil {
		p.setOwnership = volume.SetVolumeOwnership
	}
	return p, nil
}

// lock takes the lock of driver's volume handle and returns its release.
func (p *Publisher) lock(driver, handle string) func() {
	return p.locks.Lock(driver + "\x00" + handle)
}

// lifecycleMode is the CSIDriver volume lifecycle mode of v.
func lifecycleMode(v *volume.CSIVolume) storagev1.VolumeLifecycleMode {
	if v.Ephemeral {
		return storagev1.VolumeLifecycleEphemeral
	}
	return storagev1.VolumeLifecyclePersistent
}

// checkLifecycleMode refuses a volume whose mode the driver does not
// declare, with the kubelet's messages. Without a CSIDriver object only
// Persistent volumes are allowed; an object that lists no modes allows
// Persistent (the API server's default).
func checkLifecycleMode(d *storagev1.CSIDriver, driver string, mode storagev1.VolumeLifecycleMode) error {
	switch {
	case d == nil && mode == storagev1.VolumeLifecyclePersistent:
		return nil
	case d == nil:
		return fmt.Errorf("volume mode %q not supported by driver %s (no CSIDriver object)", mode, driver)
	case len(d.Spec.VolumeLifecycleModes) == 0 && mode == storagev1.VolumeLifecyclePersistent:
		return nil
	}
	for _, m := range d.Spec.VolumeLifecycleModes {
		if m == mode {
			return nil
		}
	}
	return fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", mode, driver, d.Spec.VolumeLifecycleModes)
}

// nodeCaps are the node service capabilities that change what nodelet asks.
type nodeCaps struct {
	stage, singleNodeMultiWriter, volumeMountGroup bool
}

func (p *Publisher) nodeCapabilities(ctx context.Context, c csipb.NodeClient, driver string) (nodeCaps, error) {
	resp, err := nodeGetCapabilities(ctx, p.drivers, c, driver)
	if err != nil {
		return nodeCaps{}, fmt.Errorf("getting node capabilities of CSI driver %s: %w", driver, err)
	}
	var caps nodeCaps
	for _, c := range resp.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			caps.stage = true
		case csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			caps.singleNodeMultiWriter = true
		case csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP:
			caps.volumeMountGroup = true
		}
	}
	return caps, nil
}

// accessMode maps a volume's access modes to the CSI access mode as the
// kubelet does: only the first mode counts, none means ReadWriteOnce (an
// inline volume). A driver with SINGLE_NODE_MULTI_WRITER gets the precise
// single-node modes; others get SINGLE_NODE_WRITER for both ReadWriteOnce
// and ReadWriteOncePod.
func accessMode(modes []v1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) csipb.VolumeCapability_AccessMode_Mode {
	mode := v1.ReadWriteOnce
	if len(modes) > 0 {
		mode = modes[0]
	}
	switch mode {
	case v1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	}
	return csipb.VolumeCapability_AccessMode_UNKNOWN
}

// volumeCapability is the mount capability for v; mountGroup is the
// fsGroup for a driver with VOLUME_MOUNT_GROUP, or empty.
func volumeCapability(v *volume.CSIVolume, caps nodeCaps, mountGroup string) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
			FsType:           v.FSType,
			MountFlags:       v.MountOptions,
			VolumeMountGroup: mountGroup,
		}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode(v.AccessModes, caps.singleNodeMultiWriter)},
	}
}

// volumeContext is the volume context of the publish call: the source's
// attributes, with podInfoOnMount the pod's identity and whether the
// volume is ephemeral, and with tokenRequests the tokens (encoded by the
// caller; empty when they go in the secrets). It never changes attrs.
func volumeContext(attrs map[string]string, d *storagev1.CSIDriver, pod *v1.Pod, ephemeral bool, tokens string) map[string]string {
	out := make(map[string]string, len(attrs)+6)
	for k, v := range attrs {
		out[k] = v
	}
	if d != nil && d.Spec.PodInfoOnMount != nil && *d.Spec.PodInfoOnMount {
		out[podNameKey] = pod.Name
		out[podNamespaceKey] = pod.Namespace
		out[podUIDKey] = string(pod.UID)
		out[serviceAccountNameKey] = pod.Spec.ServiceAccountName
		out[ephemeralKey] = strconv.FormatBool(ephemeral)
	}
	if tokens != "" {
		out[tokensKey] = tokens
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// serviceAccountTokens requests a token per CSIDriver tokenRequest and
// encodes them as the kubelet does: a JSON object from audience to
// {"token", "expirationTimestamp"}. Empty without tokenRequests.
func (p *Publisher) serviceAccountTokens(ctx context.Context, pod *v1.Pod, d *storagev1.CSIDriver) (string, error) {
	if d == nil || len(d.Spec.TokenRequests) == 0 {
		return "", nil
	}
	tokens := make(map[string]authenticationv1.TokenRequestStatus, len(d.Spec.TokenRequests))
	for _, tr := range d.Spec.TokenRequests {
		seconds := int64(defaultTokenSeconds)
		if tr.ExpirationSeconds != nil {
			seconds = *tr.ExpirationSeconds
		}
		st, err := p.token(ctx, pod, tr.Audience, seconds)
		if err != nil {
			return "", fmt.Errorf("requesting a service account token for audience %q: %w", tr.Audience, err)
		}
		tokens[tr.Audience] = st
	}
	b, err := json.Marshal(tokens)
	if err != nil {
		return "", fmt.Errorf("encoding service account tokens: %w", err)
	}
	return string(b), nil
}

// tokensInSecrets is the CSIDriver's serviceAccountTokenInSecrets: the
// requested tokens go to the driver in the publish call's secrets rather
// than its volume context. Unset is false.
func tokensInSecrets(d *storagev1.CSIDriver) bool {
	return d != nil && d.Spec.ServiceAccountTokenInSecrets != nil && *d.Spec.ServiceAccountTokenInSecrets
}

// placeTokens puts the encoded tokens where the CSIDriver wants them, as
// the kubelet does: under the tokens key of the publish secrets (replacing
// a secret key of that name) when serviceAccountTokenInSecrets is true, and
// otherwise in the volume context, returned as contextTokens. It never
// changes secrets. Without tokens both are returned as they are.
func placeTokens(d *storagev1.CSIDriver, secrets map[string]string, tokens string) (out map[string]string, contextTokens string) {
	if tokens == "" || !tokensInSecrets(d) {
		return secrets, tokens
	}
	out = make(map[string]string, len(secrets)+1)
	for k, v := range secrets {
		out[k] = v
	}
	out[tokensKey] = tokens
	return out, ""
}

// secretData reads the Secret ref names as the driver's secrets; what
// names the secret in errors (NodeStageSecretRef, NodePublishSecretRef).
func (p *Publisher) secretData(ctx context.Context, what, namespace string, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	if ref.Namespace != "" {
		namespace = ref.Namespace
	}
	s, err := p.secret(ctx, namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("fetching %s %s/%s failed: %w", what, namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// applyFSGroup tells whether nodelet itself gives the published volume to
// the pod's fsGroup, as the kubelet decides: never read-only volumes or
// policy None; always with policy File; with ReadWriteOnceWithFSType (the
// default) only volumes with an fsType that are ReadWriteOnce(Pod), or
// inline.
func applyFSGroup(d *storagev1.CSIDriver, v *volume.CSIVolume) bool {
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if d != nil && d.Spec.FSGroupPolicy != nil {
		policy = *d.Spec.FSGroupPolicy
	}
	switch {
	case v.ReadOnly || policy == storagev1.NoneFSGroupPolicy:
		return false
	case policy == storagev1.FileFSGroupPolicy:
		return true
	case v.FSType == "":
		return false
	case v.Ephemeral:
		return true
	}
	for _, m := range v.AccessModes {
		if m == v1.ReadWriteOnce || m == v1.ReadWriteOncePod {
			return true
		}
	}
	return false
}

// Publish publishes v for pod and returns its target path. It first reads
// what it needs from the API server (the CSIDriver, the attachment, which
// it waits for when the driver needs one, secrets, tokens); then, holding
// the volume's lock, it records the volume in the pod's vol_data.json,
// stages a Persistent volume when the driver stages (recording the
// staging's vol_data.json first), publishes it, and hands it to the pod's
// fsGroup. Each driver call is made every time: drivers are idempotent,
// and a directory that exists says nothing of the mount.
func (p *Publisher) Publish(ctx context.Context, pod *v1.Pod, v *volume.CSIVolume) (string, error) {
	for kind, name := range map[string]string{"CSI driver name": v.Driver, "volume name": v.SpecName, "pod UID": string(pod.UID)} {
		if err := checkPathElement(kind, name); err != nil {
			return "", err
		}
	}
	if v.VolumeHandle == "" {
		return "", fmt.Errorf("volume %s has no volume handle", v.SpecName)
	}
	drv, err := p.csiDriver(ctx, v.Driver)
	if apierrors.IsNotFound(err) {
		drv, err = nil, nil
	}
	if err != nil {
		return "", fmt.Errorf("getting CSIDriver %s: %w", v.Driver, err)
	}
	mode := lifecycleMode(v)
	if err := checkLifecycleMode(drv, v.Driver, mode); err != nil {
		return "", err
	}
	if v.Block && mode != storagev1.VolumeLifecyclePersistent {
		return "", fmt.Errorf("volume %s: only a PersistentVolume can be a CSI block volume", v.VolumeName)
	}
	client, err := p.drivers.NodeClient(ctx, v.Driver)
	if err != nil {
		return "", err
	}
	caps, err := p.nodeCapabilities(ctx, client, v.Driver)
	if err != nil {
		return "", err
	}
	stage := mode == storagev1.VolumeLifecyclePersistent && caps.stage

	var publishContext map[string]string
	attach := mode == storagev1.VolumeLifecyclePersistent && attachRequired(drv)
	if p.volumesInUse != nil && mode == storagev1.VolumeLifecyclePersistent {
		p.volumesInUse.noAttachDriver(v.Driver, !attach)
	}
	if attach {
		if p.volumesInUse != nil {
			// In use from now on: the Node's status says so before the
			// volume is staged, so the attach/detach controller does not
			// detach it under the mount.
			defer p.volumesInUse.acquire(v.Driver, v.VolumeHandle)()
		}
		if publishContext, err = p.waitForAttachment(ctx, v.VolumeHandle, v.Driver); err != nil {
			return "", err
		}
		if p.volumesInUse != nil {
			reportCtx, cancel := context.WithTimeout(ctx, p.attachTimeout)
			err := p.volumesInUse.waitReported(reportCtx, v.Driver, v.VolumeHandle)
			cancel()
			if err != nil {
				return "", err
			}
		}
	}
	var stageSecrets map[string]string
	if stage {
		if stageSecrets, err = p.secretData(ctx, "NodeStageSecretRef", "", v.NodeStageSecretRef); err != nil {
			return "", err
		}
	}
	publishSecrets, err := p.secretData(ctx, "NodePublishSecretRef", pod.Namespace, v.NodePublishSecretRef)
	if err != nil {
		return "", err
	}
	if v.Block {
		// The kubelet's block path passes no tokens, mount options or
		// fsGroup.
		unlock := p.lock(v.Driver, v.VolumeHandle)
		defer unlock()
		return p.publishBlock(ctx, v, blockRequest{
			client: client, pod: pod, driver: drv, caps: caps,
			publishContext: publishContext, stageSecrets: stageSecrets, publishSecrets: publishSecrets,
		})
	}
	tokens, err := p.serviceAccountTokens(ctx, pod, drv)
	if err != nil {
		return "", err
	}
	publishSecrets, contextTokens := placeTokens(drv, publishSecrets, tokens)
	var mountGroup string
	gid := podFSGroup(pod)
	if caps.volumeMountGroup && gid != nil {
		mountGroup = strconv.FormatInt(*gid, 10)
	}
	capability := volumeCapability(v, caps, mountGroup)

	unlock := p.lock(v.Driver, v.VolumeHandle)
	defer unlock()

	// The pod's record comes before any driver call: from here on a
	// teardown knows of the volume, whatever the driver has done yet.
	dataDir := publishDataDir(p.root, pod.UID, v.SpecName)
	if err := os.MkdirAll(dataDir, dirMode); err != nil {
		return "", fmt.Errorf("creating %s: %w", dataDir, err)
	}
	if err := writeVolData(dataDir, volData{
		SpecVolID:           v.SpecName,
		VolumeHandle:        v.VolumeHandle,
		DriverName:          v.Driver,
		NodeName:            p.nodeName,
		AttachmentID:        attachmentName(v.VolumeHandle, v.Driver, p.nodeName),
		VolumeLifecycleMode: string(mode),
	}); err != nil {
		return "", err
	}
	if p.volumesInUse != nil {
		p.volumesInUse.notePod(pod.UID)
	}

	var staging string
	if stage {
		if staging, err = p.stage(ctx, client, v, publishContext, capability, stageSecrets); err != nil {
			if finalError(err) {
				// The driver staged nothing: nothing is there to
				// unpublish or unstage, as a retry's records will say.
				return "", errors.Join(err, p.forgetFailedStage(pod.UID, v))
			}
			return "", err
		}
	}
	target := publishPath(p.root, pod.UID, v.SpecName)
	if err := p.step(stepPublish); err != nil {
		return "", err
	}
	if _, err := client.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId:          v.VolumeHandle,
		PublishContext:    publishContext,
		StagingTargetPath: staging,
		TargetPath:        target,
		VolumeCapability:  capability,
		Readonly:          v.ReadOnly,
		Secrets:           publishSecrets,
		VolumeContext:     volumeContext(v.Attributes, drv, pod, v.Ephemeral, contextTokens),
	}); err != nil {
		return "", fmt.Errorf("NodePublishVolume of volume %s by CSI driver %s: %w", v.VolumeHandle, v.Driver, err)
	}
	log.FromContext(ctx).V(1).Info("Published CSI volume", "pod", klog.KObj(pod), "volume", v.VolumeName, "driver", v.Driver, "volumeHandle", v.VolumeHandle)

	if gid != nil && mountGroup == "" && applyFSGroup(drv, v) {
		var policy *v1.PodFSGroupChangePolicy
		if sc := pod.Spec.SecurityContext; sc != nil {
			policy = sc.FSGroupChangePolicy
		}
		if err := p.setOwnership(target, *gid, policy); err != nil {
			return "", fmt.Errorf("applying fsGroup %d to volume %s: %w", *gid, v.VolumeName, err)
		}
	}
	return target, nil
}

// stage records the staging's vol_data.json and asks the driver to stage
// the volume at its staging path, which it returns.
func (p *Publisher) stage(ctx context.Context, client csipb.NodeClient, v *volume.CSIVolume, publishContext map[string]string, capability *csipb.VolumeCapability, secrets map[string]string) (string, error) {
	staging := stagingPath(p.root, v.Driver, v.VolumeHandle)
	if err := os.MkdirAll(staging, dirMode); err != nil {
		return "", fmt.Errorf("creating %s: %w", staging, err)
	}
	if err := writeVolData(stagingDataDir(p.root, v.Driver, v.VolumeHandle), volData{
		VolumeHandle: v.VolumeHandle,
		DriverName:   v.Driver,
	}); err != nil {
		return "", err
	}
	if err := p.step(stepStage); err != nil {
		return "", err
	}
	if _, err := client.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId:          v.VolumeHandle,
		PublishContext:    publishContext,
		StagingTargetPath: staging,
		VolumeCapability:  capability,
		Secrets:           secrets,
		VolumeContext:     v.Attributes,
	}); err != nil {
		return "", fmt.Errorf("NodeStageVolume of volume %s by CSI driver %s: %w", v.VolumeHandle, v.Driver, err)
	}
	return staging, nil
}

// finalError tells whether a driver's gRPC error means the operation did
// not happen and is not going on: every code but those that leave it
// uncertain (the call was cancelled or timed out, the driver was
// unreachable or out of resources, or an operation on the volume is
// pending). An error without a gRPC status, from before the call, counts
// as uncertain.
func finalError(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return false
	}
	return true
}

// forgetFailedStage removes the records Publish wrote before a staging the
// driver refused for good: the pod's, and the staging's unless another
// pod's record names the volume. The caller holds the volume's lock.
func (p *Publisher) forgetFailedStage(uid types.UID, v *volume.CSIVolume) error {
	dataDir := publishDataDir(p.root, uid, v.SpecName)
	if err := p.removeUnmounted(publishPath(p.root, uid, v.SpecName)); err != nil {
		return err
	}
	if err := removeFile(filepath.Join(dataDir, volDataFileName)); err != nil {
		return err
	}
	if err := removeDataDir(dataDir); err != nil {
		return err
	}
	used, err := p.inUse(v.Driver, v.VolumeHandle)
	if err != nil || used {
		return err
	}
	stagingDir := stagingDataDir(p.root, v.Driver, v.VolumeHandle)
	if err := p.removeUnmounted(stagingPath(p.root, v.Driver, v.VolumeHandle)); err != nil {
		return err
	}
	if err := removeFile(filepath.Join(stagingDir, volDataFileName)); err != nil {
		return err
	}
	return removeDataDir(stagingDir)
}

// podFSGroup is the pod's fsGroup, or nil.
func podFSGroup(pod *v1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}
