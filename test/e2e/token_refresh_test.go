package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// tokenNode is the node of the token refresh specs.
	tokenNode = "e2e-tokens"
	// serverMaxTokenLifetime is the API server's maximum token lifetime
	// (--service-account-max-token-expiration, at least an hour).
	serverMaxTokenLifetime = time.Hour
	// requestedTokenSeconds is what the pod asks for: two days.
	requestedTokenSeconds = 48 * 3600
	// shortenedTokenLifetime is the lifetime the proxy in front of the API
	// server reports for the tokens it passes on: the hour of the API
	// server's maximum, scaled down so that a refresh before the expiry
	// happens during the spec.
	shortenedTokenLifetime = 30 * time.Second
)

// tokenRequestPath is the TokenRequest subresource of a service account.
var tokenRequestPath = regexp.MustCompile(`^/api/v1/namespaces/[^/]+/serviceaccounts/[^/]+/token$`)

// tokenProxy forwards nodelet's API requests to the API server with the
// node's own credentials, and answers a TokenRequest with the token the
// API server issued but an expiry shortenedTokenLifetime from now, as an API
// server with that maximum would. It records the real expiry of each token.
type tokenProxy struct {
	mu sync.Mutex
	// issued is, per token handed out, the lifetime the API server gave it.
	issued map[string]time.Duration
}

func (p *tokenProxy) lifetime(token string) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.issued[token]
	return d, ok
}

func (p *tokenProxy) rewrite(resp *http.Response) error {
	if resp.Request.Method != http.MethodPost || !tokenRequestPath.MatchString(resp.Request.URL.Path) || resp.StatusCode != http.StatusCreated {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	// nodelet's client speaks protobuf to the API server; decode and encode
	// in the response's own media type.
	mediaType, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return fmt.Errorf("no serializer for %q", mediaType)
	}
	tr := &authenticationv1.TokenRequest{}
	if _, _, err := info.Serializer.Decode(body, nil, tr); err != nil {
		return err
	}
	now := time.Now()
	p.mu.Lock()
	p.issued[tr.Status.Token] = tr.Status.ExpirationTimestamp.Sub(now)
	p.mu.Unlock()
	tr.Status.ExpirationTimestamp = metav1.NewTime(now.Add(shortenedTokenLifetime))
	if body, err = runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, authenticationv1.SchemeGroupVersion), tr); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// jwtLifetime is exp - iat of a service account token.
func jwtLifetime(token string) time.Duration {
	GinkgoHelper()
	parts := strings.Split(token, ".")
	Expect(parts).To(HaveLen(3), "not a JWT")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	Expect(err).NotTo(HaveOccurred())
	var claims struct {
		IssuedAt  int64 `json:"iat"`
		ExpiresAt int64 `json:"exp"`
	}
	Expect(json.Unmarshal(payload, &claims)).To(Succeed())
	return time.Duration(claims.ExpiresAt-claims.IssuedAt) * time.Second
}

var _ = Describe("Service account token refresh", Ordered, func() {
	var (
		api     *utils.APIServer
		proxy   *tokenProxy
		nodelet *utils.Nodelet
	)
	BeforeAll(func(ctx SpecContext) {
		var err error
		api, err = utils.StartAPIServerWithOptions(ctx, utils.APIServerOptions{
			Args: map[string]string{"service-account-max-token-expiration": serverMaxTokenLifetime.String()},
		})
		Expect(err).NotTo(HaveOccurred(), "starting an API server with a maximum token lifetime")
		DeferCleanup(api.Stop)

		nodeCfg, err := api.NodeUserConfig(tokenNode)
		Expect(err).NotTo(HaveOccurred())
		transport, err := rest.TransportFor(nodeCfg)
		Expect(err).NotTo(HaveOccurred())
		upstream, err := url.Parse(nodeCfg.Host)
		Expect(err).NotTo(HaveOccurred())
		proxy = &tokenProxy{issued: map[string]time.Duration{}}
		srv := httptest.NewUnstartedServer(&httputil.ReverseProxy{
			Rewrite:        func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
			Transport:      transport,
			FlushInterval:  -1,
			ModifyResponse: proxy.rewrite,
		})
		srv.StartTLS()
		DeferCleanup(srv.Close)
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		opts := utils.NodeletOptions{NodeName: tokenNode, API: api, Containerd: ctrd, APIServerURL: srv.URL, APIServerCA: ca}
		nodelet, err = utils.StartNodelet(ctx, opts)
		if nodelet != nil {
			DeferCleanup(nodelet.Cleanup)
		}
		Expect(err).NotTo(HaveOccurred(), "starting nodelet behind the proxy")
	}, NodeTimeout(3*time.Minute))
	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && nodelet != nil {
			GinkgoWriter.Printf("nodelet log (%s):\n%s\n", nodelet.LogPath, nodelet.LogTail(100))
		}
	})

	It("replaces a token asked for 48 h before the shorter lifetime the API server gave it runs out", func(ctx SpecContext) {
		admin, err := api.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		ns := utils.NewNamespace(ctx, admin)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		Expect(client.IgnoreAlreadyExists(admin.Create(ctx, sa))).To(Succeed())
		pod := utils.BusyboxPod(ns, "token-holder", tokenNode, "sleep", "3600")
		pod.Spec.ServiceAccountName = "default"
		pod.Spec.Volumes = []corev1.Volume{{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Path: "token", ExpirationSeconds: ptr.To[int64](requestedTokenSeconds)}}},
		}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tok", MountPath: "/tok"}}
		createPod(ctx, admin, pod)
		running := utils.WaitForPod(ctx, admin, ns, pod.Name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})

		// The token as the container sees it, read from the volume on the
		// node.
		tokenFile := filepath.Join(nodelet.RootDir, "pods", string(running.UID), "volumes", "kubernetes.io~projected", "tok", "token")
		readToken := func() string {
			data, _ := os.ReadFile(tokenFile)
			return string(data)
		}
		first := readToken()
		Expect(first).NotTo(BeEmpty(), "no token in %s", tokenFile)
		written := time.Now()

		By("checking that the API server cut the 48 h asked for to its maximum")
		issued, ok := proxy.lifetime(first)
		Expect(ok).To(BeTrue(), "the token did not come through the proxy")
		GinkgoWriter.Printf("asked for %s, the API server issued %s (JWT exp-iat %s)\n",
			time.Duration(requestedTokenSeconds)*time.Second, issued.Round(time.Second), jwtLifetime(first))
		Expect(jwtLifetime(first)).To(Equal(serverMaxTokenLifetime))

		By("waiting for a new token before the first one's reported expiry")
		Eventually(readToken).WithTimeout(shortenedTokenLifetime).WithPolling(pollInterval).ShouldNot(Equal(first),
			"the token reported to expire after %s was not replaced in time", shortenedTokenLifetime)
		GinkgoWriter.Printf("token replaced %s after it was written (reported lifetime %s)\n",
			time.Since(written).Round(100*time.Millisecond), shortenedTokenLifetime)
	}, SpecTimeout(3*time.Minute))
})
