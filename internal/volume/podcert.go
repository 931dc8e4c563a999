package volume

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// certIssueWait is how long a set-up waits for the signer to answer a
	// request it just made before it reports the volume not ready; the pod
	// worker's retry reads the request again.
	certIssueWait = 5 * time.Second
	// certRetryWait is how long a refresh whose request is not answered yet
	// waits before it reads the request again.
	certRetryWait = 15 * time.Second
)

// podCertKey names one podCertificate source of a pod: sources that ask
// for the same thing share a credential, like two reads of one file.
type podCertKey struct {
	uid    types.UID
	source string
}

// podCert is what nodelet holds for one source: the credential written
// (key and chain), the request in flight with its key, and, once the signer
// denied or failed a request, the error every set-up reports from then on.
type podCert struct {
	keyPEM    []byte
	chainPEM  []byte
	refreshAt time.Time

	pendingName string
	pendingKey  []byte
	// checkAt is when a refresh still in flight is read again.
	checkAt time.Time

	final error
}

// podCertCache keeps the credentials of each pod's podCertificate sources
// in memory, so that set-ups and refreshes between two of the signer's
// certificates write the same key and chain.
type podCertCache struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	certs map[podCertKey]*podCert
}

func newPodCertCache(c clock.PassiveClock) *podCertCache {
	return &podCertCache{clock: c, certs: map[podCertKey]*podCert{}}
}

// nextRefresh returns the earliest time a credential of uid is due for a
// new certificate, or a refresh in flight is due to be read again.
func (c *podCertCache) nextRefresh(uid types.UID) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for k, pc := range c.certs {
		if k.uid != uid || pc.final != nil || pc.keyPEM == nil {
			continue
		}
		at := pc.refreshAt
		if pc.pendingName != "" {
			at = pc.checkAt
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

func (c *podCertCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.certs {
		if k.uid == uid {
			delete(c.certs, k)
		}
	}
}

// podCertSourceKey identifies a podCertificate source by what it asks for.
func podCertSourceKey(s *v1.PodCertificateProjection) string {
	parts := []string{s.SignerName, s.KeyType, s.CredentialBundlePath, s.KeyPath, s.CertificateChainPath}
	if s.MaxExpirationSeconds != nil {
		parts = append(parts, strconv.Itoa(int(*s.MaxExpirationSeconds)))
	}
	for _, k := range slices.Sorted(maps.Keys(s.UserAnnotations)) {
		parts = append(parts, k+"="+s.UserAnnotations[k])
	}
	return strings.Join(parts, "\x00")
}

// podCertPayload projects a podCertificate source, as the kubelet does: a
// private key of the source's type, made in memory, and the certificate
// chain a signer issued for it through a PodCertificateRequest, written as
// one credential bundle (key, then chain) and/or as separate key and chain
// files. A new key is requested at the certificate's beginRefreshAt; until
// it is issued the files keep the previous credential. A request the signer
// denied or failed fails the volume for good.
func (m *Manager) podCertPayload(ctx context.Context, pod *v1.Pod, s *v1.PodCertificateProjection, defaultMode fs.FileMode) (payload, error) {
	if !m.podCertificates {
		return nil, fmt.Errorf("podCertificate projection requires the PodCertificateRequest feature gate")
	}
	key := podCertKey{uid: pod.UID, source: podCertSourceKey(s)}
	m.podCerts.mu.Lock()
	pc, ok := m.podCerts.certs[key]
	if !ok {
		pc = &podCert{}
		m.podCerts.certs[key] = pc
	}
	m.podCerts.mu.Unlock()
	// The pod's lock serialises the set-ups of one pod: pc is its own.
	if err := m.advancePodCert(ctx, pod, s, pc); err != nil {
		return nil, err
	}
	return podCertFiles(s, pc.keyPEM, pc.chainPEM, defaultMode), nil
}

// advancePodCert brings pc up to date: it requests a certificate when
// there is none or the one there is due for refresh, and reads the request
// in flight. It returns an error when there is no credential to write.
func (m *Manager) advancePodCert(ctx context.Context, pod *v1.Pod, s *v1.PodCertificateProjection, pc *podCert) error {
	if pc.final != nil {
		return pc.final
	}
	now := m.clock.Now()
	haveCert := pc.keyPEM != nil
	if haveCert && now.Before(pc.refreshAt) {
		return nil
	}
	if haveCert && pc.pendingName != "" && now.Before(pc.checkAt) {
		return nil
	}
	if pc.pendingName == "" {
		name, keyPEM, err := m.requestPodCert(ctx, pod, s)
		if err != nil {
			if haveCert {
				log.FromContext(ctx).Error(err, "Cannot request a new pod certificate, keeping the current one", "pod", klog.KObj(pod), "signer", s.SignerName)
				pc.checkAt = now.Add(certRetryWait)
				pc.refreshAt = pc.checkAt
				return nil
			}
			return err
		}
		pc.pendingName, pc.pendingKey = name, keyPEM
	}
	req, err := m.waitPodCert(ctx, pod.Namespace, pc.pendingName, haveCert)
	if apierrors.IsNotFound(err) {
		// Deleted before it was answered: ask again next time.
		pc.pendingName, pc.pendingKey = "", nil
		err = fmt.Errorf("PodCertificateRequest %s/%s was deleted before it was issued", pod.Namespace, req.GetName())
	}
	if err != nil {
		if haveCert {
			pc.checkAt = now.Add(certRetryWait)
			return nil
		}
		return err
	}
	switch state, reason, message := podCertRequestState(req); state {
	case certificatesv1.PodCertificateRequestConditionTypeIssued:
		chain, err := cleanCertificateChain(req.Status.CertificateChain)
		if err != nil {
			pc.pendingName, pc.pendingKey = "", nil
			return fmt.Errorf("PodCertificateRequest %s/%s: %w", req.Namespace, req.Name, err)
		}
		pc.keyPEM, pc.chainPEM = pc.pendingKey, chain
		pc.refreshAt = podCertRefreshAt(req)
		pc.pendingName, pc.pendingKey = "", nil
		log.FromContext(ctx).Info("Pod certificate issued", "pod", klog.KObj(pod), "request", req.Name, "signer", s.SignerName, "beginRefreshAt", pc.refreshAt)
		return nil
	case certificatesv1.PodCertificateRequestConditionTypeDenied:
		pc.final = fmt.Errorf("PodCertificateRequest was permanently denied: reason=%q message=%q", reason, message)
	case certificatesv1.PodCertificateRequestConditionTypeFailed:
		pc.final = fmt.Errorf("PodCertificateRequest was permanently failed: reason=%q message=%q", reason, message)
	default:
		if haveCert {
			pc.checkAt = now.Add(certRetryWait)
			return nil
		}
		return fmt.Errorf("credential bundle is not issued yet: PodCertificateRequest %s/%s is pending", req.Namespace, req.Name)
	}
	pc.pendingName, pc.pendingKey = "", nil
	return pc.final
}

// requestPodCert makes a key of the source's type and creates the request
// for it, returning the request's name and the key as PEM.
func (m *Manager) requestPodCert(ctx context.Context, pod *v1.Pod, s *v1.PodCertificateProjection) (string, []byte, error) {
	priv, err := generatePodCertKey(s.KeyType)
	if err != nil {
		return "", nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", nil, fmt.Errorf("encoding the %s private key: %w", s.KeyType, err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, priv)
	if err != nil {
		return "", nil, fmt.Errorf("signing the certificate request with the %s key: %w", s.KeyType, err)
	}
	created, err := m.fetcher.CreatePodCertificateRequest(ctx, buildPodCertRequest(pod, s, csr))
	if err != nil {
		return "", nil, fmt.Errorf("creating a PodCertificateRequest for signer %q: %w", s.SignerName, err)
	}
	log.FromContext(ctx).Info("Requested a pod certificate", "pod", klog.KObj(pod), "request", created.Name, "signer", s.SignerName, "keyType", s.KeyType)
	return created.Name, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// waitPodCert reads the request until the signer answered it or, unless
// once is set, certIssueWait has passed; it returns the request last read.
func (m *Manager) waitPodCert(ctx context.Context, namespace, name string, once bool) (*certificatesv1.PodCertificateRequest, error) {
	var req *certificatesv1.PodCertificateRequest
	read := func(ctx context.Context) (bool, error) {
		r, err := m.fetcher.PodCertificateRequest(ctx, namespace, name)
		if err != nil {
			return false, err
		}
		req = r
		state, _, _ := podCertRequestState(r)
		return state != "" || once, nil
	}
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 6, Cap: time.Second}
	waitCtx, cancel := context.WithTimeout(ctx, m.podCertWait)
	defer cancel()
	err := wait.ExponentialBackoffWithContext(waitCtx, backoff, read)
	if req != nil && (wait.Interrupted(err) || err == nil) {
		return req, nil
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, err
		}
		return nil, fmt.Errorf("reading PodCertificateRequest %s/%s: %w", namespace, name, err)
	}
	return req, nil
}

// buildPodCertRequest is the request for a source of pod, with the stub
// PKCS#10 request that proves possession of its key. The node's name and
// UID and the service account's UID are the Fetcher's to fill in.
func buildPodCertRequest(pod *v1.Pod, s *v1.PodCertificateProjection, csrDER []byte) *certificatesv1.PodCertificateRequest {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    pod.Namespace,
			GenerateName: "req-" + pod.Name + "-",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:                s.SignerName,
			PodName:                   pod.Name,
			PodUID:                    pod.UID,
			ServiceAccountName:        sa,
			NodeName:                  types.NodeName(pod.Spec.NodeName),
			MaxExpirationSeconds:      s.MaxExpirationSeconds,
			StubPKCS10Request:         csrDER,
			UnverifiedUserAnnotations: maps.Clone(s.UserAnnotations),
		},
	}
}

// podCertRequestState returns the answer of the signer (Issued, Denied or
// Failed, empty while pending) with its reason and message. An Issued
// condition counts only with a chain to write.
func podCertRequestState(r *certificatesv1.PodCertificateRequest) (state, reason, message string) {
	for _, t := range []string{
		certificatesv1.PodCertificateRequestConditionTypeDenied,
		certificatesv1.PodCertificateRequestConditionTypeFailed,
		certificatesv1.PodCertificateRequestConditionTypeIssued,
	} {
		c := meta.FindStatusCondition(r.Status.Conditions, t)
		if c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		if t == certificatesv1.PodCertificateRequestConditionTypeIssued && r.Status.CertificateChain == "" {
			continue
		}
		return t, c.Reason, c.Message
	}
	return "", "", ""
}

// podCertRefreshAt is when a new certificate is requested: beginRefreshAt,
// or, when the signer set none, four fifths of the way to notAfter.
func podCertRefreshAt(r *certificatesv1.PodCertificateRequest) time.Time {
	st := r.Status
	switch {
	case st.BeginRefreshAt != nil:
		return st.BeginRefreshAt.Time
	case st.NotBefore != nil && st.NotAfter != nil:
		return st.NotBefore.Add(st.NotAfter.Sub(st.NotBefore.Time) * 4 / 5)
	default:
		return time.Now().Add(time.Hour)
	}
}

// generatePodCertKey makes a private key of one of the API's key types.
func generatePodCertKey(keyType string) (crypto.Signer, error) {
	var (
		k   crypto.Signer
		err error
	)
	switch keyType {
	case "RSA3072":
		k, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		k, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		k, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, k, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("unknown podCertificate key type %q", keyType)
	}
	if err != nil {
		return nil, fmt.Errorf("generating a %s key: %w", keyType, err)
	}
	return k, nil
}

// cleanCertificateChain re-encodes the CERTIFICATE blocks of a chain,
// dropping anything between them; a chain with no certificate or another
// kind of block is refused.
func cleanCertificateChain(chain string) ([]byte, error) {
	var out []byte
	rest := []byte(chain)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("certificate chain holds a %s block", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("parsing the certificate chain: %w", err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("certificate chain holds no certificate")
	}
	return out, nil
}

// podCertFiles lays a credential out as the source asks.
func podCertFiles(s *v1.PodCertificateProjection, keyPEM, chainPEM []byte, mode fs.FileMode) payload {
	p := payload{}
	if s.CredentialBundlePath != "" {
		bundle := slices.Concat(keyPEM, chainPEM)
		p[s.CredentialBundlePath] = file{data: bundle, mode: mode}
	}
	if s.KeyPath != "" {
		p[s.KeyPath] = file{data: keyPEM, mode: mode}
	}
	if s.CertificateChainPath != "" {
		p[s.CertificateChainPath] = file{data: chainPEM, mode: mode}
	}
	return p
}
