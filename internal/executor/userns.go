package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

// UserNamespaceIDsPerPod is how many host IDs one pod's user namespace
// maps, and the alignment of its range: the kubelet's default.
const UserNamespaceIDsPerPod = 65536

// Default range pods' user namespaces are taken from, the kubelet's
// without a "kubelet" user in /etc/subuid: every ID above the first
// 65536, which stay the host's.
const (
	DefaultUserNamespaceFirstID = UserNamespaceIDsPerPod
	DefaultUserNamespaceLength  = 1<<32 - DefaultUserNamespaceFirstID
)

// UserNamespaces hands out the host ID ranges of pods' user namespaces:
// one UserNamespaceIDsPerPod-aligned range per pod out of a configured
// range, the lowest free one, kept for the pod until Release. Each pod's
// range is written to a file in a directory, so that a restart gives a
// running pod the range its sandbox has, and never hands it to another
// pod. Safe for concurrent use.
type UserNamespaces struct {
	dir   string
	first uint32 // first host ID of slot 0
	slots uint32

	mu    sync.Mutex
	byPod map[types.UID]uint32
	used  map[uint32]types.UID
}

// usernsRecord is what a pod's file holds.
type usernsRecord struct {
	HostID uint32 `json:"hostID"`
	Length uint32 `json:"length"`
}

// NewUserNamespaces returns the allocator of the length host IDs from
// first on, recording in dir (created when missing) and reading back what
// it recorded there before. first and length must be multiples of
// UserNamespaceIDsPerPod and first at least that (host IDs below it are
// the host's own users).
func NewUserNamespaces(dir string, first, length uint32) (*UserNamespaces, error) {
	if err := checkUserNamespaceRange(first, length); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating user namespace directory: %w", err)
	}
	u := &UserNamespaces{
		dir: dir, first: first, slots: length / UserNamespaceIDsPerPod,
		byPod: map[types.UID]uint32{}, used: map[uint32]types.UID{},
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading user namespace directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || atomicfile.IsTemp(name) || !strings.HasSuffix(name, ".json") {
			continue
		}
		uid := types.UID(strings.TrimSuffix(name, ".json"))
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading user namespace of pod %s: %w", uid, err)
		}
		slot, err := u.parse(data)
		if err != nil {
			return nil, fmt.Errorf("user namespace of pod %s: %w", uid, err)
		}
		if other, taken := u.used[slot]; taken {
			return nil, fmt.Errorf("user namespace of pod %s: range already used by pod %s", uid, other)
		}
		u.byPod[uid], u.used[slot] = slot, uid
	}
	return u, nil
}

func checkUserNamespaceRange(first, length uint32) error {
	switch {
	case first%UserNamespaceIDsPerPod != 0:
		return fmt.Errorf("user namespace IDs start at %d, not a multiple of %d", first, UserNamespaceIDsPerPod)
	case first < UserNamespaceIDsPerPod:
		return fmt.Errorf("user namespace IDs start at %d, below %d", first, UserNamespaceIDsPerPod)
	case length%UserNamespaceIDsPerPod != 0 || length == 0:
		return fmt.Errorf("user namespace IDs number %d, not a positive multiple of %d", length, UserNamespaceIDsPerPod)
	case uint64(first)+uint64(length) > 1<<32:
		return fmt.Errorf("user namespace IDs %d+%d exceed the 32-bit ID space", first, length)
	}
	return nil
}

// parse checks a recorded range against the configured one and returns
// its slot.
func (u *UserNamespaces) parse(data []byte) (uint32, error) {
	var r usernsRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, fmt.Errorf("parsing: %w", err)
	}
	if r.Length != UserNamespaceIDsPerPod || r.HostID%UserNamespaceIDsPerPod != 0 || r.HostID < u.first {
		return 0, fmt.Errorf("range %d+%d is not one of this node's", r.HostID, r.Length)
	}
	slot := (r.HostID - u.first) / UserNamespaceIDsPerPod
	if slot >= u.slots {
		return 0, fmt.Errorf("range %d+%d is outside this node's", r.HostID, r.Length)
	}
	return slot, nil
}

// IDs returns the pod's range, taking the lowest free one and recording it
// the first time.
func (u *UserNamespaces) IDs(uid types.UID) (criconfig.IDRange, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if slot, ok := u.byPod[uid]; ok {
		return u.idRange(slot), nil
	}
	slot, ok := lowestFreeSlot(u.used, u.slots)
	if !ok {
		return criconfig.IDRange{}, errors.New("could not find an empty slot to allocate a user namespace")
	}
	ids := u.idRange(slot)
	data, err := json.Marshal(usernsRecord{HostID: ids.First, Length: ids.Length})
	if err != nil {
		return criconfig.IDRange{}, err
	}
	if err := atomicfile.WriteFile(u.path(uid), data, 0o600); err != nil {
		return criconfig.IDRange{}, fmt.Errorf("recording user namespace of pod %s: %w", uid, err)
	}
	u.byPod[uid], u.used[slot] = slot, uid
	return ids, nil
}

// UIDs lists the pods that hold a range.
func (u *UserNamespaces) UIDs() []types.UID {
	u.mu.Lock()
	defer u.mu.Unlock()
	uids := make([]types.UID, 0, len(u.byPod))
	for uid := range u.byPod {
		uids = append(uids, uid)
	}
	return uids
}

// Release frees the pod's range, if it has one.
func (u *UserNamespaces) Release(uid types.UID) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	slot, ok := u.byPod[uid]
	if !ok {
		return nil
	}
	if err := os.Remove(u.path(uid)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("releasing user namespace of pod %s: %w", uid, err)
	}
	delete(u.byPod, uid)
	delete(u.used, slot)
	return nil
}

func (u *UserNamespaces) idRange(slot uint32) criconfig.IDRange {
	return criconfig.IDRange{First: u.first + slot*UserNamespaceIDsPerPod, Length: UserNamespaceIDsPerPod}
}

func (u *UserNamespaces) path(uid types.UID) string {
	return filepath.Join(u.dir, string(uid)+".json")
}

// lowestFreeSlot returns the lowest of slots slots not in used.
func lowestFreeSlot(used map[uint32]types.UID, slots uint32) (uint32, bool) {
	for i := range slots {
		if _, taken := used[i]; !taken {
			return i, true
		}
	}
	return 0, false
}
