package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// The directories of the pull records under the records directory, and
// their files' modes: the records name the secrets and service accounts
// that pulled each image.
const (
	pullingDir                  = "pulling"
	pulledDir                   = "pulled"
	recordsDirMode  os.FileMode = 0o700
	recordsFileMode os.FileMode = 0o600
	// corruptSuffix is appended to a record file that does not decode when
	// it is set aside.
	corruptSuffix = ".corrupt"
)

// PodCredentials are the credentials a pod presents for an image: the
// pull secrets that match it, and the service account whose token a
// credential provider plugin took. CredentialHash of each secret is the
// hash of the credential it holds for the image.
type PodCredentials struct {
	Secrets        []kubeletv1beta1.ImagePullSecret
	ServiceAccount *kubeletv1beta1.ImagePullServiceAccount
}

// PullRecords remembers, as the kubelet's image pull manager does, which
// images the node pulled and with which credentials, so that a pod may use
// an image that another pod's secret pulled only if it presents that
// secret (or the same credential in another secret) or the same service
// account, or the image was pulled without credentials or with the node's
// own. A pull in progress leaves an intent, so that an image whose pull a
// crash interrupted is still known as pulled by the node.
//
// Records are JSON files of the kubelet's ImagePullIntent and
// ImagePulledRecord kinds, one per image (intents) and per image ID
// (pulled), named by the SHA-256 of that key, in pulling/ and pulled/
// under the records directory (0700, files 0600); they are read once and
// kept in memory. A record file that does not decode is reported, kept
// beside with a .corrupt suffix, and read as an image pulled with unknown
// credentials, which every pod must verify. Safe for concurrent use.
type PullRecords struct {
	dir    string
	policy VerificationPolicy
	clock  clock.PassiveClock
	log    logr.Logger

	mu sync.Mutex
	// pulled are the records by image ID.
	pulled map[string]*kubeletv1beta1.ImagePulledRecord
	// intents count the pulls in progress by image; an image whose intent
	// file was left by an earlier run counts 0 but is in the map.
	intents map[string]int
}

// OpenPullRecords reads the records in dir, creating it if needed.
// Reconcile, with the runtime's images, turns the intents an earlier run
// left into records and drops the records of images that are gone.
func OpenPullRecords(dir string, policy VerificationPolicy, log logr.Logger, clk clock.PassiveClock) (*PullRecords, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &PullRecords{
		dir: dir, policy: policy, clock: clk, log: log,
		pulled:  map[string]*kubeletv1beta1.ImagePulledRecord{},
		intents: map[string]int{},
	}
	for _, d := range []string{dir, filepath.Join(dir, pullingDir), filepath.Join(dir, pulledDir)} {
		if err := os.MkdirAll(d, recordsDirMode); err != nil {
			return nil, fmt.Errorf("creating the image pull records directory: %w", err)
		}
		if err := os.Chmod(d, recordsDirMode); err != nil {
			return nil, fmt.Errorf("setting the mode of the image pull records directory: %w", err)
		}
	}
	r.readAll()
	return r, nil
}

// readAll loads the record files.
func (r *PullRecords) readAll() {
	r.forEachFile(pullingDir, func(path string, data []byte) {
		intent := &kubeletv1beta1.ImagePullIntent{}
		if err := json.Unmarshal(data, intent); err != nil || intent.Image == "" || filepath.Base(path) != recordFileName(intent.Image) {
			r.setAside(path, err)
			return
		}
		r.intents[intent.Image] += 0
	})
	r.forEachFile(pulledDir, func(path string, data []byte) {
		rec := &kubeletv1beta1.ImagePulledRecord{}
		if err := json.Unmarshal(data, rec); err != nil || rec.ImageRef == "" || filepath.Base(path) != recordFileName(rec.ImageRef) {
			// The image ID is lost with the file, so the image cannot be
			// marked: a pod that uses it is verified if it has a pull
			// intent, and under the policy for preloaded images if not.
			r.setAside(path, err)
			return
		}
		r.pulled[rec.ImageRef] = rec
	})
}

// forEachFile calls fn with each regular record file of sub and its
// content; temporary and set-aside files are skipped.
func (r *PullRecords) forEachFile(sub string, fn func(path string, data []byte)) {
	dir := filepath.Join(r.dir, sub)
	entries, err := os.ReadDir(dir)
	if err != nil {
		r.log.Error(err, "Unable to list image pull records", "dir", dir)
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || atomicfile.IsTemp(name) || strings.HasSuffix(name, corruptSuffix) {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			r.log.Error(err, "Unable to read an image pull record", "path", path)
			continue
		}
		fn(path, data)
	}
}

// setAside reports a record file that does not decode and renames it out
// of the way, so that it is kept for inspection and not read again.
func (r *PullRecords) setAside(path string, err error) {
	if err == nil {
		err = errors.New("the record is empty or not under its key's name")
	}
	r.log.Error(err, "Setting aside an image pull record that does not decode", "path", path, "keptAs", path+corruptSuffix)
	if err := os.Rename(path, path+corruptSuffix); err != nil {
		r.log.Error(err, "Unable to set aside an image pull record", "path", path)
	}
}

// Reconcile brings the records in line with listed, the runtime's images
// as listed at listedAt: the intents an earlier run left whose image is
// present become records of a pull with unknown credentials, and records
// not updated since listedAt of images not listed are dropped.
func (r *PullRecords) Reconcile(listed []*runtimeapi.Image, listedAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	present := map[string]bool{}
	for _, img := range listed {
		present[img.GetId()] = true
		for _, name := range slices.Concat(img.GetRepoTags(), img.GetRepoDigests()) {
			if n, ok := r.intents[name]; !ok || n > 0 {
				continue // none, or a pull of this run still going
			}
			if err := r.mergeLocked(name, img.GetId(), nil); err != nil {
				r.log.Error(err, "Unable to record an image whose pull an earlier run left unfinished", "image", name)
				continue
			}
			r.removeIntentLocked(name)
		}
	}
	for ref, rec := range r.pulled {
		if !present[ref] && rec.LastUpdatedTime.Time.Before(listedAt) {
			r.forgetLocked(ref)
		}
	}
}

// RecordIntent notes that image (as a container names it) is about to be
// pulled. Each call is matched by RecordPulled or RecordFailed.
func (r *PullRecords) RecordIntent(image string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.intents[image] == 0 {
		intent := &kubeletv1beta1.ImagePullIntent{Image: image}
		intent.APIVersion, intent.Kind = kubeletv1beta1.SchemeGroupVersion.String(), "ImagePullIntent"
		if err := r.write(pullingDir, image, intent); err != nil {
			return fmt.Errorf("recording the intent to pull image %q: %w", image, err)
		}
	}
	r.intents[image]++
	return nil
}

// RecordPulled notes that image was pulled as imageRef with creds (nil:
// unknown credentials, which every pod must verify) and ends the intent.
// When the record cannot be written the intent stays, so that the image is
// still verified.
func (r *PullRecords) RecordPulled(image, imageRef string, creds *kubeletv1beta1.ImagePullCredentials) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.mergeLocked(image, imageRef, creds); err != nil {
		r.log.Error(err, "Unable to record a pulled image", "image", image, "imageRef", imageRef)
		return
	}
	r.endIntentLocked(image)
}

// RecordFailed ends an intent whose pull failed.
func (r *PullRecords) RecordFailed(image string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endIntentLocked(image)
}

// Forget drops the record of imageRef, an image removed from the node.
func (r *PullRecords) Forget(imageRef string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(imageRef)
}

// MustPull reports whether a pod that uses image, present on the node as
// imageRef, must pull it to prove it may use it, as the verification
// policy and the records say. creds is called only when the records name
// credentials to compare with the pod's. Without a usable record the
// answer is yes (fail safe).
func (r *PullRecords) MustPull(image, imageRef string, creds func() PodCredentials) bool {
	r.mu.Lock()
	rec, recorded := r.pulled[imageRef]
	_, pulling := r.intents[image]
	r.mu.Unlock()
	if !r.policy.requiresVerification(image, recorded || pulling) {
		return false
	}
	if !recorded {
		return true
	}
	key, err := recordImageKey(image)
	if err != nil {
		return true
	}
	cached, ok := rec.CredentialMapping[key]
	switch {
	case !ok:
		return true
	case cached.NodePodsAccessible:
		return false
	}
	pod := creds()
	for _, s := range pod.Secrets {
		for _, c := range cached.KubernetesSecrets {
			sameHash := c.CredentialHash != "" && c.CredentialHash == s.CredentialHash
			sameSecret := c.UID == s.UID && c.Namespace == s.Namespace && c.Name == s.Name
			if sameHash || sameSecret {
				if !(sameHash && sameSecret) {
					// The same credential in another secret, or the
					// same secret rotated: it is valid from now on too.
					r.RecordPulledWith(image, imageRef, s)
				}
				return false
			}
		}
	}
	if sa := pod.ServiceAccount; sa != nil && slices.Contains(cached.KubernetesServiceAccounts, *sa) {
		return false
	}
	return true
}

// RecordPulledWith adds secret to the credentials recorded for image as
// imageRef.
func (r *PullRecords) RecordPulledWith(image, imageRef string, secret kubeletv1beta1.ImagePullSecret) {
	r.mu.Lock()
	defer r.mu.Unlock()
	creds := &kubeletv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletv1beta1.ImagePullSecret{secret}}
	if err := r.mergeLocked(image, imageRef, creds); err != nil {
		r.log.Error(err, "Unable to record a pulled image", "image", image, "imageRef", imageRef)
	}
}

// mergeLocked adds creds for image to the record of imageRef and writes it
// when it changed.
func (r *PullRecords) mergeLocked(image, imageRef string, creds *kubeletv1beta1.ImagePullCredentials) error {
	key, err := recordImageKey(image)
	if err != nil {
		return err
	}
	old := r.pulled[imageRef]
	rec, changed := mergeCredentials(old, key, creds)
	if !changed {
		return nil
	}
	rec.ImageRef = imageRef
	rec.LastUpdatedTime = metav1.NewTime(r.clock.Now())
	rec.APIVersion, rec.Kind = kubeletv1beta1.SchemeGroupVersion.String(), "ImagePulledRecord"
	if err := r.write(pulledDir, imageRef, rec); err != nil {
		return err
	}
	r.pulled[imageRef] = rec
	return nil
}

// mergeCredentials returns old (nil: none yet) with creds added for key,
// as a new record, and whether anything changed. Credentials that every
// pod of the node may use replace any others; secrets are added, or their
// hash updated; service accounts are added.
func mergeCredentials(old *kubeletv1beta1.ImagePulledRecord, key string, creds *kubeletv1beta1.ImagePullCredentials) (*kubeletv1beta1.ImagePulledRecord, bool) {
	rec := &kubeletv1beta1.ImagePulledRecord{CredentialMapping: map[string]kubeletv1beta1.ImagePullCredentials{}}
	if old != nil {
		old.DeepCopyInto(rec)
		if rec.CredentialMapping == nil {
			rec.CredentialMapping = map[string]kubeletv1beta1.ImagePullCredentials{}
		}
	}
	if creds == nil {
		return rec, old == nil
	}
	cur, had := rec.CredentialMapping[key]
	switch {
	case cur.NodePodsAccessible:
		return rec, old == nil
	case creds.NodePodsAccessible:
		rec.CredentialMapping[key] = kubeletv1beta1.ImagePullCredentials{NodePodsAccessible: true}
		return rec, true
	}
	changed := !had || old == nil
	for _, s := range creds.KubernetesSecrets {
		i := slices.IndexFunc(cur.KubernetesSecrets, func(c kubeletv1beta1.ImagePullSecret) bool {
			return c.UID == s.UID && c.Namespace == s.Namespace && c.Name == s.Name
		})
		switch {
		case i < 0:
			cur.KubernetesSecrets = append(cur.KubernetesSecrets, s)
			changed = true
		case cur.KubernetesSecrets[i].CredentialHash != s.CredentialHash:
			cur.KubernetesSecrets[i].CredentialHash = s.CredentialHash
			changed = true
		}
	}
	for _, sa := range creds.KubernetesServiceAccounts {
		if !slices.Contains(cur.KubernetesServiceAccounts, sa) {
			cur.KubernetesServiceAccounts = append(cur.KubernetesServiceAccounts, sa)
			changed = true
		}
	}
	rec.CredentialMapping[key] = cur
	return rec, changed
}

func (r *PullRecords) endIntentLocked(image string) {
	if r.intents[image] > 1 {
		r.intents[image]--
		return
	}
	r.removeIntentLocked(image)
}

func (r *PullRecords) removeIntentLocked(image string) {
	path := filepath.Join(r.dir, pullingDir, recordFileName(image))
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Kept in memory too, so that the image stays verified.
		r.log.Error(err, "Unable to remove an image pull intent", "image", image)
		return
	}
	delete(r.intents, image)
}

func (r *PullRecords) forgetLocked(imageRef string) {
	path := filepath.Join(r.dir, pulledDir, recordFileName(imageRef))
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Error(err, "Unable to remove an image pull record", "imageRef", imageRef)
		return
	}
	delete(r.pulled, imageRef)
}

// write writes v as the record file of key in sub.
func (r *PullRecords) write(sub, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(r.dir, sub, recordFileName(key)), data, recordsFileMode)
}

// recordFileName is the file name of a record's key, as the kubelet names
// them.
func recordFileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// recordImageKey is the name an image's credentials are recorded under:
// its repository, normalized, without tag or digest.
func recordImageKey(image string) (string, error) {
	key, err := providerImage(image)
	if err != nil {
		return "", fmt.Errorf("parsing image name %q: %w", image, err)
	}
	return key, nil
}

// VerificationPolicy is the kubelet's imagePullCredentialsVerificationPolicy
// with its preloadedImagesVerificationAllowlist.
type VerificationPolicy struct {
	policy   kubeletv1beta1.ImagePullCredentialsVerificationPolicy
	exact    map[string]bool
	prefixes []string
}

// NewVerificationPolicy returns the policy named policy ("" is the
// kubelet's default, NeverVerifyPreloadedImages); allowlist holds the
// images NeverVerifyAllowlistedImages does not verify: repositories
// without tag or digest, or a prefix ending in "/*".
func NewVerificationPolicy(policy string, allowlist []string) (VerificationPolicy, error) {
	p := VerificationPolicy{policy: kubeletv1beta1.ImagePullCredentialsVerificationPolicy(policy), exact: map[string]bool{}}
	switch p.policy {
	case "":
		p.policy = kubeletv1beta1.NeverVerifyPreloadedImages
	case kubeletv1beta1.NeverVerify, kubeletv1beta1.NeverVerifyPreloadedImages, kubeletv1beta1.NeverVerifyAllowlistedImages, kubeletv1beta1.AlwaysVerify:
	default:
		return VerificationPolicy{}, fmt.Errorf("unknown policy %q: must be NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages or AlwaysVerify", policy)
	}
	for i, pattern := range allowlist {
		norm, wildcard, err := ParseAllowlistPattern(pattern)
		if err != nil {
			return VerificationPolicy{}, fmt.Errorf("allowlist entry %d: %w", i, err)
		}
		if wildcard {
			p.prefixes = append(p.prefixes, norm)
		} else {
			p.exact[norm] = true
		}
	}
	return p, nil
}

// ParseAllowlistPattern checks one entry of
// preloadedImagesVerificationAllowlist and returns it normalized, and
// whether it is a prefix ("registry.example.com/team/*" gives
// "registry.example.com/team/").
func ParseAllowlistPattern(pattern string) (normalized string, wildcard bool, err error) {
	if pattern != strings.TrimSpace(pattern) {
		return "", false, fmt.Errorf("%q: leading or trailing spaces", pattern)
	}
	if prefix, ok := strings.CutSuffix(pattern, "/*"); ok {
		if prefix == "" || strings.Contains(prefix, "*") {
			return "", false, fmt.Errorf("%q: a wildcard pattern is a registry host, optionally with a path, followed by /*", pattern)
		}
		return prefix + "/", true, nil
	}
	if strings.Contains(pattern, "*") {
		return "", false, fmt.Errorf("%q: only a trailing /* is allowed as a wildcard", pattern)
	}
	if pattern == "" {
		return "", false, errors.New("empty pattern")
	}
	if tag, digest := tagAndDigest(pattern); tag != "" || digest != "" {
		return "", false, fmt.Errorf("%q: an image without tag or digest is expected", pattern)
	}
	norm, err := providerImage(pattern)
	if err != nil {
		return "", false, fmt.Errorf("%q: not an image name: %w", pattern, err)
	}
	return norm, false, nil
}

// requiresVerification reports whether the policy has pods verify their
// credentials for image, present on the node; pulledByNode is whether the
// node pulled it (or began to).
func (p VerificationPolicy) requiresVerification(image string, pulledByNode bool) bool {
	switch p.policy {
	case kubeletv1beta1.NeverVerify:
		return false
	case kubeletv1beta1.AlwaysVerify:
		return true
	case kubeletv1beta1.NeverVerifyAllowlistedImages:
		return !p.allowlisted(image)
	default:
		return pulledByNode
	}
}

func (p VerificationPolicy) allowlisted(image string) bool {
	name, err := providerImage(image)
	if err != nil {
		return false
	}
	if p.exact[name] {
		return true
	}
	for _, prefix := range p.prefixes {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// credentialsFor returns the record of a pull made with c (nil: without
// credentials).
func credentialsFor(c *Credential) *kubeletv1beta1.ImagePullCredentials {
	switch {
	case c == nil || (c.secret == nil && c.serviceAccount == nil):
		return &kubeletv1beta1.ImagePullCredentials{NodePodsAccessible: true}
	case c.secret != nil:
		return &kubeletv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletv1beta1.ImagePullSecret{*c.secret}}
	default:
		return &kubeletv1beta1.ImagePullCredentials{KubernetesServiceAccounts: []kubeletv1beta1.ImagePullServiceAccount{*c.serviceAccount}}
	}
}
