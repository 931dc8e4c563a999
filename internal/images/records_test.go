package images

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/credentialprovider"
)

func openRecords(t *testing.T, dir, policy string, allow []string, present ...*runtimeapi.Image) *PullRecords {
	t.Helper()
	p, err := NewVerificationPolicy(policy, allow)
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Now())
	r, err := OpenPullRecords(dir, p, logr.Discard(), clk)
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	r.Reconcile(present, clk.Now())
	return r
}

func secretRef(uid, name, hash string) kubeletv1beta1.ImagePullSecret {
	return kubeletv1beta1.ImagePullSecret{UID: uid, Namespace: "ns", Name: name, CredentialHash: hash}
}

func TestVerificationPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy       string
		allow        []string
		image        string
		pulledByNode bool
		want         bool
	}{
		{policy: "", image: "busybox:1", pulledByNode: true, want: true},
		{policy: "", image: "busybox:1", pulledByNode: false, want: false},
		{policy: "NeverVerifyPreloadedImages", image: "busybox:1", pulledByNode: true, want: true},
		{policy: "NeverVerify", image: "busybox:1", pulledByNode: true, want: false},
		{policy: "AlwaysVerify", image: "busybox:1", pulledByNode: false, want: true},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{"docker.io/library/busybox"}, image: "busybox:1", pulledByNode: true, want: false},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{"busybox"}, image: "docker.io/library/busybox@sha256:" + sixtyFour, want: false},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{"registry.example.com/team/*"}, image: "registry.example.com/team/app:1", want: false},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{"registry.example.com/team/*"}, image: "registry.example.com/teammate/app:1", want: true},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{"registry.example.com/team/*"}, image: "busybox:1", want: true},
	} {
		p, err := NewVerificationPolicy(tc.policy, tc.allow)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.requiresVerification(tc.image, tc.pulledByNode); got != tc.want {
			t.Errorf("%s %v: %s pulled by node %v: got %v, want %v", tc.policy, tc.allow, tc.image, tc.pulledByNode, got, tc.want)
		}
	}
}

func TestVerificationPolicyRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		policy string
		allow  []string
	}{
		{policy: "Sometimes"},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{"busybox:1"}},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{"registry.example.com/*/app"}},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{"/*"}},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{" busybox"}},
		{policy: "NeverVerifyAllowlistedImages", allow: []string{""}},
	} {
		if _, err := NewVerificationPolicy(tc.policy, tc.allow); err == nil {
			t.Errorf("%s %q: accepted", tc.policy, tc.allow)
		}
	}
}

func TestMergeCredentials(t *testing.T) {
	g := NewWithT(t)
	a := secretRef("ua", "a", "h1")
	rec, changed := mergeCredentials(nil, "docker.io/library/app", &kubeletv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletv1beta1.ImagePullSecret{a}})
	g.Expect(changed).To(BeTrue())
	g.Expect(rec.CredentialMapping["docker.io/library/app"].KubernetesSecrets).To(ConsistOf(a))

	_, changed = mergeCredentials(rec, "docker.io/library/app", &kubeletv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletv1beta1.ImagePullSecret{a}})
	g.Expect(changed).To(BeFalse(), "the same secret again")

	rotated := secretRef("ua", "a", "h2")
	next, changed := mergeCredentials(rec, "docker.io/library/app", &kubeletv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletv1beta1.ImagePullSecret{rotated}})
	g.Expect(changed).To(BeTrue())
	g.Expect(next.CredentialMapping["docker.io/library/app"].KubernetesSecrets).To(ConsistOf(rotated))
	g.Expect(rec.CredentialMapping["docker.io/library/app"].KubernetesSecrets).To(ConsistOf(a), "the old record is not changed in place")

	sa := kubeletv1beta1.ImagePullServiceAccount{UID: "us", Namespace: "ns", Name: "builder"}
	next, changed = mergeCredentials(next, "docker.io/library/app", &kubeletv1beta1.ImagePullCredentials{KubernetesServiceAccounts: []kubeletv1beta1.ImagePullServiceAccount{sa}})
	g.Expect(changed).To(BeTrue())
	g.Expect(next.CredentialMapping["docker.io/library/app"].KubernetesServiceAccounts).To(ConsistOf(sa))

	open, changed := mergeCredentials(next, "docker.io/library/app", &kubeletv1beta1.ImagePullCredentials{NodePodsAccessible: true})
	g.Expect(changed).To(BeTrue())
	g.Expect(open.CredentialMapping["docker.io/library/app"]).To(Equal(kubeletv1beta1.ImagePullCredentials{NodePodsAccessible: true}))
	_, changed = mergeCredentials(open, "docker.io/library/app", &kubeletv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletv1beta1.ImagePullSecret{a}})
	g.Expect(changed).To(BeFalse(), "an image every pod may use stays so")

	unknown, changed := mergeCredentials(nil, "docker.io/library/app", nil)
	g.Expect(changed).To(BeTrue())
	g.Expect(unknown.CredentialMapping).To(BeEmpty(), "unknown credentials record the image and no credential")
}

func TestPullRecordsDecideWhoMayUseAnImage(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	r := openRecords(t, dir, "", nil)
	const image, ref = "registry.example.com/team/app:1", "sha256:app"
	a := secretRef("ua", "a", "h1")

	g.Expect(r.MustPull(image, ref, nil)).To(BeFalse(), "an image the node did not pull is preloaded")

	g.Expect(r.RecordIntent(image)).To(Succeed())
	g.Expect(r.MustPull(image, ref, func() PodCredentials { return PodCredentials{} })).To(BeTrue(), "a pull in progress makes the image the node's")
	r.RecordPulled(image, ref, &kubeletv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletv1beta1.ImagePullSecret{a}})

	none := func() PodCredentials { return PodCredentials{} }
	with := func(s ...kubeletv1beta1.ImagePullSecret) func() PodCredentials {
		return func() PodCredentials { return PodCredentials{Secrets: s} }
	}
	g.Expect(r.MustPull(image, ref, none)).To(BeTrue(), "a pod without the secret")
	g.Expect(r.MustPull(image, ref, with(secretRef("ub", "b", "other")))).To(BeTrue(), "a pod with another credential")
	g.Expect(r.MustPull(image, ref, with(a))).To(BeFalse(), "a pod with the secret")
	g.Expect(r.MustPull("registry.example.com/team/app:2", ref, with(a))).To(BeFalse(), "another tag of the same image")
	g.Expect(r.MustPull("registry.example.com/team/other:1", ref, with(a))).To(BeTrue(), "another repository naming the same image ID")

	// The same credential in another secret is accepted and recorded.
	copied := secretRef("uc", "c", "h1")
	g.Expect(r.MustPull(image, ref, with(copied))).To(BeFalse())
	// A rotated secret is still the same secret.
	rotated := secretRef("ua", "a", "h9")
	g.Expect(r.MustPull(image, ref, with(rotated))).To(BeFalse())

	// A service account's pull is open to pods of that service account.
	sa := kubeletv1beta1.ImagePullServiceAccount{UID: "us", Namespace: "ns", Name: "builder"}
	r.RecordPulled(image, ref, &kubeletv1beta1.ImagePullCredentials{KubernetesServiceAccounts: []kubeletv1beta1.ImagePullServiceAccount{sa}})
	g.Expect(r.MustPull(image, ref, func() PodCredentials { return PodCredentials{ServiceAccount: &sa} })).To(BeFalse())
	other := sa
	other.UID = "recreated"
	g.Expect(r.MustPull(image, ref, func() PodCredentials { return PodCredentials{ServiceAccount: &other} })).To(BeTrue())

	// What the records say survives a restart, files 0600 in 0700.
	r2 := openRecords(t, dir, "", nil, &runtimeapi.Image{Id: ref, RepoTags: []string{image}})
	g.Expect(r2.MustPull(image, ref, none)).To(BeTrue())
	g.Expect(r2.MustPull(image, ref, with(copied))).To(BeFalse())
	g.Expect(r2.MustPull(image, ref, func() PodCredentials { return PodCredentials{ServiceAccount: &sa} })).To(BeFalse())
	for _, d := range []string{dir, filepath.Join(dir, pulledDir), filepath.Join(dir, pullingDir)} {
		fi, err := os.Stat(d)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o700)), d)
	}
	fi, err := os.Stat(filepath.Join(dir, pulledDir, recordFileName(ref)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	entries, err := os.ReadDir(filepath.Join(dir, pullingDir))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty(), "no intent is left once the pull is recorded")

	// Once the image is gone, so is its record.
	r3 := openRecords(t, dir, "", nil)
	g.Expect(r3.MustPull(image, ref, none)).To(BeFalse(), "a later image of that ID is preloaded")
	_, err = os.Stat(filepath.Join(dir, pulledDir, recordFileName(ref)))
	g.Expect(os.IsNotExist(err)).To(BeTrue())
}

func TestAnonymousPullsAreOpenToEveryPod(t *testing.T) {
	g := NewWithT(t)
	r := openRecords(t, t.TempDir(), "AlwaysVerify", nil)
	r.RecordPulled("busybox:1", "sha256:bb", credentialsFor(nil))
	g.Expect(r.MustPull("busybox:1", "sha256:bb", func() PodCredentials { return PodCredentials{} })).To(BeFalse())
	g.Expect(r.MustPull("busybox:1", "sha256:other", func() PodCredentials { return PodCredentials{} })).To(BeTrue(), "AlwaysVerify verifies what the node did not pull")
}

func TestInterruptedPullIsVerifiedAfterARestart(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	r := openRecords(t, dir, "", nil)
	g.Expect(r.RecordIntent("registry.example.com/app:1")).To(Succeed())
	g.Expect(r.RecordIntent("registry.example.com/gone:1")).To(Succeed())

	// The first image arrived before the crash, the second did not.
	r2 := openRecords(t, dir, "", nil, &runtimeapi.Image{Id: "sha256:app", RepoTags: []string{"registry.example.com/app:1"}})
	none := func() PodCredentials { return PodCredentials{} }
	g.Expect(r2.MustPull("registry.example.com/app:1", "sha256:app", none)).To(BeTrue(), "pulled with credentials nobody knows")
	g.Expect(r2.MustPull("registry.example.com/gone:1", "sha256:gone", none)).To(BeTrue(), "an intent still marks the image as the node's")
	_, err := os.Stat(filepath.Join(dir, pullingDir, recordFileName("registry.example.com/app:1")))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the intent became a record")
}

func TestCorruptRecordsAreSetAside(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	r := openRecords(t, dir, "", nil)
	g.Expect(r.RecordIntent("app:1")).To(Succeed())
	r.RecordPulled("app:1", "sha256:app", &kubeletv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletv1beta1.ImagePullSecret{secretRef("u", "a", "h")}})
	g.Expect(r.RecordIntent("app:2")).To(Succeed())
	pulled := filepath.Join(dir, pulledDir, recordFileName("sha256:app"))
	intent := filepath.Join(dir, pullingDir, recordFileName("app:2"))
	g.Expect(os.WriteFile(pulled, []byte("{not json"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(intent, []byte(`{"image":"not-app:2"}`), 0o600)).To(Succeed())

	openRecords(t, dir, "", nil, &runtimeapi.Image{Id: "sha256:app"})
	for _, p := range []string{pulled, intent} {
		_, err := os.Stat(p)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), p)
		data, err := os.ReadFile(p + corruptSuffix)
		g.Expect(err).NotTo(HaveOccurred(), "kept for inspection")
		g.Expect(data).NotTo(BeEmpty())
	}
}

// The second pod of a node asks for an image the first pulled with its
// pull secret.
func TestAPodWithoutTheSecretCannotUseAnImageAnotherPodPulled(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.failPull = func(_ string, a *runtimeapi.AuthConfig) error {
		if a.GetUsername() != "registry.example.com" {
			return status.Error(codes.Unauthenticated, "pull access denied")
		}
		return nil
	}
	rec := record.NewFakeRecorder(20)
	m := NewManager(fi, rec, Options{Records: openRecords(t, t.TempDir(), "", nil)})
	secret := configJSONSecret("a", "registry.example.com")
	secret.UID = "secret-a"
	c := corev1.Container{Name: "app", Image: "registry.example.com/team/app:1", ImagePullPolicy: corev1.PullIfNotPresent}

	_, _, err := m.EnsureImage(context.Background(), testPod("first", c), &c, []*corev1.Secret{secret}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.pullUsers()).To(Equal([]string{"registry.example.com"}))
	drainEvents(rec)

	// Without the secret: the image is pulled again, and that fails.
	_, _, err = m.EnsureImage(context.Background(), testPod("second", c), &c, nil, nil)
	reason, _ := Reason(err)
	g.Expect(reason).To(Equal(ErrImagePull.Error()))
	g.Expect(fi.pullUsers()).To(Equal([]string{"registry.example.com", ""}))
	g.Expect(drainEvents(rec)).To(ContainElement(`Normal Pulling Pulling image "registry.example.com/team/app:1"`))

	// With pull policy Never, the answer is the one for an absent image.
	never := c
	never.ImagePullPolicy = corev1.PullNever
	_, _, err = m.EnsureImage(context.Background(), testPod("third", never), &never, nil, nil)
	reason, _ = Reason(err)
	g.Expect(reason).To(Equal(ErrImageNeverPull.Error()))
	g.Expect(drainEvents(rec)).To(Equal([]string{`Warning ErrImageNeverPull Container image "registry.example.com/team/app:1" is not present with pull policy of Never`}))

	// The same secret uses it without a pull.
	_, img, err := m.EnsureImage(context.Background(), testPod("fourth", never), &never, []*corev1.Secret{secret}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img).NotTo(BeNil())
	g.Expect(fi.pullCount()).To(Equal(2))
	g.Expect(drainEvents(rec)).To(Equal([]string{`Normal Pulled Container image "registry.example.com/team/app:1" already present on machine and can be accessed by the pod`}))
}

func TestAServiceAccountsPullIsOpenToItsPods(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.failPull = func(_ string, a *runtimeapi.AuthConfig) error {
		if a.GetUsername() != "AWS" {
			return status.Error(codes.Unauthenticated, "pull access denied")
		}
		return nil
	}
	builder := &credentialprovider.ServiceAccountRef{Namespace: "ns", Name: "builder", UID: types.UID("sa-1")}
	fp := &fakeProviders{creds: []credentialprovider.Credential{{Provider: "ecr", Registry: "123.dkr.ecr.us-west-2.amazonaws.com", Username: "AWS", Password: "pw", ServiceAccount: builder}}}
	m := NewManager(fi, nil, Options{Providers: fp, Records: openRecords(t, t.TempDir(), "", nil)})
	c := corev1.Container{Name: "app", Image: "123.dkr.ecr.us-west-2.amazonaws.com/app:1", ImagePullPolicy: corev1.PullNever}
	c.ImagePullPolicy = corev1.PullIfNotPresent
	_, _, err := m.EnsureImage(context.Background(), testPod("first", c), &c, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())

	c.ImagePullPolicy = corev1.PullNever
	_, _, err = m.EnsureImage(context.Background(), testPod("second", c), &c, nil, nil)
	g.Expect(err).NotTo(HaveOccurred(), "the provider gives the same service account")

	fp.creds[0].ServiceAccount = &credentialprovider.ServiceAccountRef{Namespace: "ns", Name: "other", UID: types.UID("sa-2")}
	_, _, err = m.EnsureImage(context.Background(), testPod("third", c), &c, nil, nil)
	g.Expect(err).To(MatchError(ErrImageNeverPull))
}
