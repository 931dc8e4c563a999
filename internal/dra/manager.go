package dra

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/metrics"
)

// DriverClients gives the DRA service of a registered driver (Drivers
// implements it), with the timeout of each call. It returns an error
// naming the driver when none of that name is registered.
type DriverClients interface {
	Client(name string) (drapb.DRAPluginClient, time.Duration, error)
}

// Options configure a Manager.
type Options struct {
	// Reader reads ResourceClaims by name from the API server (uncached:
	// a claim's allocation and reservation change just before the pod
	// starts).
	Reader client.Reader
	// Drivers are the registered DRA drivers; nil knows none.
	Drivers DriverClients
	// ExtendedResources is the DRAExtendedResource gate: the claim the
	// scheduler made for a pod's DRA-backed extended resources is prepared
	// too.
	ExtendedResources bool
	// StatePath is the checkpoint file (<rootDir>/dra_manager_state); ""
	// keeps none.
	StatePath string
	// Health, when set (the ResourceHealthStatus gate), is the devices'
	// health that ResourceStatus reports; HealthMessages (the
	// ResourceHealthStatusMessage gate) adds the drivers' messages.
	Health         *Health
	HealthMessages bool
	Logger         logr.Logger
}

// Manager prepares the ResourceClaims of pods before their sandboxes are
// made, gives their containers the CDI devices of the claims they use,
// and unprepares the claims when the last pod using them is done. What it
// prepared is checkpointed, so that a restarted nodelet neither prepares
// twice nor leaks a prepared claim. It is safe for concurrent use.
type Manager struct {
	opts Options

	mu     sync.Mutex
	claims map[types.UID]*ClaimState
	// unpreparing are the claims whose NodeUnprepareResources is under
	// way or failed: no pod may start using them.
	unpreparing map[types.UID]bool
	// countedDrivers are the drivers dra_resource_claims_in_use has a
	// series of.
	countedDrivers map[string]bool
}

// NewManager returns a manager with the state checkpointed at
// opts.StatePath. A corrupt checkpoint is set aside and logged; the
// manager starts without it.
func NewManager(opts Options) *Manager {
	m := &Manager{opts: opts, claims: map[types.UID]*ClaimState{}, unpreparing: map[types.UID]bool{}}
	if opts.StatePath == "" {
		return m
	}
	st, err := LoadState(opts.StatePath, time.Now())
	if err != nil {
		opts.Logger.Error(err, "Unable to read the prepared ResourceClaims, starting without them")
	}
	for i := range st.Claims {
		c := st.Claims[i]
		m.claims[c.UID] = &c
	}
	m.countInUseLocked()
	return m
}

// Prepare makes sure every claim pod uses may be used by it and is
// prepared by its drivers, calling NodePrepareResources once per driver
// for the claims not prepared yet, as the kubelet does. A claim whose
// driver is not registered, or that a driver failed to prepare, is an
// error: the pod is not started without its devices. A pod without
// claims costs nothing.
func (m *Manager) Prepare(ctx context.Context, pod *v1.Pod) error {
	if len(pod.Spec.ResourceClaims) == 0 && (!m.opts.ExtendedResources || pod.Status.ExtendedResourceClaimStatus == nil) {
		return nil
	}
	start := time.Now()
	err := m.prepare(ctx, pod)
	observeOperation("PrepareResources", start, err)
	if err != nil {
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	return nil
}

// observeOperation records one pod's preparation or unpreparation of all
// its claims, as the kubelet's dra_operations_duration_seconds.
func observeOperation(name string, start time.Time, err error) {
	metrics.DRAOperationsDuration.WithLabelValues(name, strconv.FormatBool(err != nil)).Observe(time.Since(start).Seconds())
}

// toPrepare is one claim a pod uses, as read and checked.
type toPrepare struct {
	claim   *resourceapi.ResourceClaim
	drivers []DriverState
}

func (m *Manager) prepare(ctx context.Context, pod *v1.Pod) error {
	refs, err := PodClaims(pod, m.opts.ExtendedResources)
	if err != nil {
		return err
	}
	// Read and check everything before anything is recorded: a pod
	// refused here leaves nothing to unprepare.
	var claims []toPrepare
	clients := map[string]drapb.DRAPluginClient{}
	var timeout time.Duration
	for _, ref := range refs {
		claim := &resourceapi.ResourceClaim{}
		if err := m.opts.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, claim); err != nil {
			return fmt.Errorf("fetch ResourceClaim %s: %w", ref.Name, err)
		}
		drivers, err := CheckClaim(pod, ref, claim)
		if err != nil {
			return err
		}
		for _, d := range drivers {
			if d.SkipPrepare || clients[d.Name] != nil {
				continue
			}
			c, t, err := m.client(d.Name)
			if err != nil {
				return err
			}
			clients[d.Name], timeout = c, t
		}
		claims = append(claims, toPrepare{claim: claim, drivers: drivers})
	}
	if len(claims) == 0 {
		return nil
	}
	batches, err := m.reserve(pod.UID, claims)
	if err != nil {
		return err
	}
	for _, driver := range slices.Sorted(maps.Keys(batches)) {
		c := clients[driver]
		if c == nil {
			// Recorded before with other drivers (an allocation changed
			// under the same UID cannot be; read the registry anyway).
			if c, timeout, err = m.client(driver); err != nil {
				return err
			}
		}
		if err := m.callPrepare(ctx, c, timeout, driver, batches[driver]); err != nil {
			return err
		}
	}
	return m.markPrepared(claims)
}

func (m *Manager) client(driver string) (drapb.DRAPluginClient, time.Duration, error) {
	if m.opts.Drivers == nil {
		return nil, 0, fmt.Errorf("DRA driver %s is not registered", driver)
	}
	return m.opts.Drivers.Client(driver)
}

// reserve records the pod as a user of each claim (adding the claims not
// known yet) and checkpoints that, before any driver is called; it
// returns the claims each driver must prepare.
func (m *Manager) reserve(pod types.UID, claims []toPrepare) (map[string][]*drapb.Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range claims {
		uid := c.claim.UID
		if other := m.claimByNameLocked(c.claim.Namespace, c.claim.Name); other != nil && other.UID != uid {
			return nil, fmt.Errorf("old ResourceClaim with same name %s and different UID %s still exists (previous pod force-deleted?!)", c.claim.Name, other.UID)
		}
		if m.unpreparing[uid] {
			return nil, fmt.Errorf("ResourceClaim %s is being unprepared", c.claim.Name)
		}
	}
	batches := map[string][]*drapb.Claim{}
	for _, c := range claims {
		uid := c.claim.UID
		st, ok := m.claims[uid]
		if !ok {
			st = &ClaimState{UID: uid, Name: c.claim.Name, Namespace: c.claim.Namespace, Drivers: c.drivers}
			m.claims[uid] = st
		}
		if !slices.Contains(st.PodUIDs, pod) {
			st.PodUIDs = append(st.PodUIDs, pod)
			slices.Sort(st.PodUIDs)
		}
		if st.Prepared {
			continue
		}
		for _, d := range st.Drivers {
			if !d.SkipPrepare {
				batches[d.Name] = append(batches[d.Name], &drapb.Claim{Namespace: st.Namespace, Uid: string(st.UID), Name: st.Name})
			}
		}
	}
	if err := m.saveLocked(); err != nil {
		return nil, err
	}
	return batches, nil
}

// callPrepare calls one driver's NodePrepareResources for its claims and
// records the devices it answered.
func (m *Manager) callPrepare(ctx context.Context, c drapb.DRAPluginClient, timeout time.Duration, driver string, claims []*drapb.Claim) error {
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.NodePrepareResources(callCtx, &drapb.NodePrepareResourcesRequest{Claims: claims})
	if err != nil {
		return fmt.Errorf("NodePrepareResources: %w", err)
	}
	answers, err := checkAnswers("NodePrepareResources", claims, resp.GetClaims(), func(r *drapb.NodePrepareResourceResponse) string { return r.GetError() })
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, r := range answers {
		st := m.claims[types.UID(uid)]
		if st == nil {
			continue // unprepared meanwhile: its pod went away
		}
		i := slices.IndexFunc(st.Drivers, func(d DriverState) bool { return d.Name == driver })
		if i < 0 {
			continue
		}
		st.Drivers[i].Devices = devicesOf(r.GetDevices())
	}
	log.FromContext(ctx).V(1).Info("Prepared ResourceClaims", "driver", driver, "claims", len(claims))
	return nil
}

// checkAnswers matches a driver's answers to the claims asked, with the
// kubelet's errors for a claim failed, unknown or left out.
func checkAnswers[R any](call string, asked []*drapb.Claim, answers map[string]R, errOf func(R) string) (map[string]R, error) {
	for uid, r := range answers {
		i := slices.IndexFunc(asked, func(c *drapb.Claim) bool { return c.GetUid() == uid })
		if i < 0 {
			return nil, fmt.Errorf("%s returned result for unknown claim UID %s", call, uid)
		}
		if msg := errOf(r); msg != "" {
			return nil, fmt.Errorf("%s failed for ResourceClaim %s: %s", call, asked[i].GetName(), msg)
		}
	}
	if left := len(asked) - len(answers); left > 0 {
		return nil, fmt.Errorf("%s skipped %d ResourceClaims", call, left)
	}
	return answers, nil
}

func devicesOf(in []*drapb.Device) []Device {
	out := make([]Device, 0, len(in))
	for _, d := range in {
		out = append(out, Device{
			RequestNames: slices.Clone(d.GetRequestNames()),
			Pool:         d.GetPoolName(),
			Device:       d.GetDeviceName(),
			ShareID:      d.GetShareId(),
			CDIDeviceIDs: slices.Clone(d.GetCdiDeviceIds()),
		})
	}
	return out
}

// markPrepared marks the pod's claims prepared and checkpoints them.
func (m *Manager) markPrepared(claims []toPrepare) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range claims {
		if st := m.claims[c.claim.UID]; st != nil {
			st.Prepared = true
		}
	}
	return m.saveLocked()
}

// Unprepare takes the pod off the claims it uses; a claim no other pod
// uses is unprepared by its drivers (NodeUnprepareResources, once per
// driver) and forgotten. Call it once none of the pod's containers runs,
// before its status says it is done (the claim's reservation is dropped
// then). Idempotent: a pod that uses no prepared claim costs nothing.
func (m *Manager) Unprepare(ctx context.Context, pod types.UID) error {
	start := time.Now()
	batches, done, changed := m.release(pod)
	if !changed {
		return nil
	}
	err := m.unprepare(ctx, batches, done)
	observeOperation("UnprepareResources", start, err)
	if err != nil {
		return fmt.Errorf("unprepare dynamic resources: %w", err)
	}
	return nil
}

// unprepare calls the drivers of the claims release took the pod off, then
// forgets the claims done.
func (m *Manager) unprepare(ctx context.Context, batches map[string][]*drapb.Claim, done []types.UID) error {
	for _, driver := range slices.Sorted(maps.Keys(batches)) {
		c, timeout, err := m.client(driver)
		if err != nil {
			return err
		}
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := c.NodeUnprepareResources(callCtx, &drapb.NodeUnprepareResourcesRequest{Claims: batches[driver]})
		cancel()
		if err != nil {
			return fmt.Errorf("NodeUnprepareResources: %w", err)
		}
		if _, err := checkAnswers("NodeUnprepareResources", batches[driver], resp.GetClaims(), func(r *drapb.NodeUnprepareResourceResponse) string { return r.GetError() }); err != nil {
			return err
		}
		log.FromContext(ctx).V(1).Info("Unprepared ResourceClaims", "driver", driver, "claims", len(batches[driver]))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, uid := range done {
		delete(m.claims, uid)
		delete(m.unpreparing, uid)
	}
	return m.saveLocked()
}

// release takes the pod off its shared claims and marks those it alone
// uses as being unprepared; it returns the claims each driver must
// unprepare, the claims to forget once they are, and whether the pod used
// any claim.
func (m *Manager) release(pod types.UID) (batches map[string][]*drapb.Claim, done []types.UID, changed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	batches = map[string][]*drapb.Claim{}
	for _, st := range m.podClaimsLocked(pod) {
		changed = true
		if len(st.PodUIDs) > 1 {
			// Checkpointed with the rest once the drivers answered: a
			// crash before that calls this again.
			st.PodUIDs = slices.DeleteFunc(st.PodUIDs, func(u types.UID) bool { return u == pod })
			continue
		}
		m.unpreparing[st.UID] = true
		done = append(done, st.UID)
		for _, d := range st.Drivers {
			if !d.SkipUnprepare {
				batches[d.Name] = append(batches[d.Name], &drapb.Claim{Namespace: st.Namespace, Uid: string(st.UID), Name: st.Name})
			}
		}
	}
	return batches, done, changed
}

// podClaimsLocked returns the claims the pod uses, by UID.
func (m *Manager) podClaimsLocked(pod types.UID) []*ClaimState {
	var out []*ClaimState
	for _, uid := range slices.Sorted(maps.Keys(m.claims)) {
		if st := m.claims[uid]; slices.Contains(st.PodUIDs, pod) {
			out = append(out, st)
		}
	}
	return out
}

// PodUIDs returns the pods that use a claim the node holds, sorted.
func (m *Manager) PodUIDs() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.UID
	for _, st := range m.claims {
		out = append(out, st.PodUIDs...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CDIDevices returns the CDI device IDs of the claims container c of pod
// uses (its resources.claims, and the requests of its DRA-backed extended
// resources), without repeats, in claim name order. A claim it uses that
// was not prepared for the pod is an error.
func (m *Manager) CDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error) {
	uses, err := ContainerClaims(pod, c, m.opts.ExtendedResources)
	if err != nil || len(uses) == 0 {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(uses)) {
		st := m.claimByNameLocked(pod.Namespace, name)
		if st == nil || !st.Prepared || !slices.Contains(st.PodUIDs, pod.UID) {
			return nil, fmt.Errorf("ResourceClaim %s in namespace %s is not prepared for the pod", name, pod.Namespace)
		}
		for _, req := range uses[name] {
			for _, id := range CDIDeviceIDs(*st, req) {
				if !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
		}
	}
	return out, nil
}

// countInUseLocked sets dra_resource_claims_in_use from the claims pods
// use (prepared or being prepared), by driver and across all drivers.
func (m *Manager) countInUseLocked() {
	byDriver := map[string]float64{}
	var all float64
	for _, c := range m.claims {
		if len(c.PodUIDs) == 0 {
			continue
		}
		all++
		for _, d := range c.Drivers {
			byDriver[d.Name]++
		}
	}
	// Each series is set in place and only those of drivers no claim uses
	// any more are deleted: a scrape never sees the gauge empty.
	metrics.DRAResourceClaimsInUse.WithLabelValues(metrics.DRAAnyDriver).Set(all)
	for name, n := range byDriver {
		metrics.DRAResourceClaimsInUse.WithLabelValues(name).Set(n)
	}
	for name := range m.countedDrivers {
		if _, ok := byDriver[name]; !ok {
			metrics.DRAResourceClaimsInUse.DeleteLabelValues(name)
		}
	}
	m.countedDrivers = map[string]bool{}
	for name := range byDriver {
		m.countedDrivers[name] = true
	}
}

// ContainerClaims returns the claims container c of pod uses that are
// prepared for the pod, in name order, with every device their drivers
// prepared: what the pod resources API reports. A claim the container
// cannot name or that is not prepared is left out.
func (m *Manager) ContainerClaims(pod *v1.Pod, c *v1.Container) []ClaimState {
	uses, err := ContainerClaims(pod, c, m.opts.ExtendedResources)
	if err != nil || len(uses) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ClaimState
	for _, name := range slices.Sorted(maps.Keys(uses)) {
		st := m.claimByNameLocked(pod.Namespace, name)
		if st == nil || !st.Prepared || !slices.Contains(st.PodUIDs, pod.UID) {
			continue
		}
		cp := *st
		cp.PodUIDs = slices.Clone(st.PodUIDs)
		cp.Drivers = slices.Clone(st.Drivers)
		out = append(out, cp)
	}
	return out
}

func (m *Manager) claimByNameLocked(namespace, name string) *ClaimState {
	for _, st := range m.claims {
		if st.Namespace == namespace && st.Name == name {
			return st
		}
	}
	return nil
}

// Claims returns a copy of the claims the node holds, sorted by UID.
func (m *Manager) Claims() []ClaimState {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ClaimState
	for _, uid := range slices.Sorted(maps.Keys(m.claims)) {
		c := *m.claims[uid]
		c.PodUIDs = slices.Clone(c.PodUIDs)
		out = append(out, c)
	}
	return out
}

func (m *Manager) saveLocked() error {
	m.countInUseLocked()
	if m.opts.StatePath == "" {
		return nil
	}
	st := State{}
	for _, c := range m.claims {
		st.Claims = append(st.Claims, *c)
	}
	if err := SaveState(m.opts.StatePath, st); err != nil {
		return fmt.Errorf("checkpoint ResourceClaim state: %w", err)
	}
	return nil
}
