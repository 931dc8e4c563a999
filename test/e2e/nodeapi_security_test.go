package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// attackNode is the node of the node API security specs.
	attackNode = "e2e-nodeapi-attack"
	// attackIdleTimeout is the node's server.idleTimeout and
	// streamingConnectionIdleTimeout.
	attackIdleTimeout = 3 * time.Second
	// idleConnections is how many connections the idle spec opens.
	idleConnections = 2000
	// rssSlack is how far above its baseline the agent's resident memory
	// must come back once the idle connections are gone.
	rssSlack = 30 << 20
)

var _ = Describe("Node API under attack", Ordered, ContinueOnFailure, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: attackNode, API: apiServer, Containerd: ctrd, Config: map[string]any{
			"server":                         map[string]any{"idleTimeout": attackIdleTimeout.String()},
			"streamingConnectionIdleTimeout": attackIdleTimeout.String(),
			// /debug/pprof/heap?gc=1 runs a garbage collection on demand.
			"enableProfilingHandler": true,
		}}
	})
	var (
		admin   client.Client
		nodelet *utils.Nodelet
		ns      string
		// master is a client certificate of the kubelet client CA in
		// system:masters: it may do anything on the node.
		master tls.Certificate
	)

	tlsConfig := func(certs ...tls.Certificate) *tls.Config {
		// The serving certificate is self-signed.
		return &tls.Config{InsecureSkipVerify: true, Certificates: certs, NextProtos: []string{"http/1.1"}} //nolint:gosec // test client
	}
	// do sends one request straight to the node API and returns the status
	// and body.
	doWith := func(ctx context.Context, method, path string, cert *tls.Certificate, header http.Header) (int, string) {
		GinkgoHelper()
		var certs []tls.Certificate
		if cert != nil {
			certs = append(certs, *cert)
		}
		c := &http.Client{Timeout: apiTimeout, Transport: &http.Transport{TLSClientConfig: tlsConfig(certs...)}}
		defer c.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, method, "https://"+nodelet.ServerAddr+path, http.NoBody)
		Expect(err).NotTo(HaveOccurred())
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := c.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}
	do := func(ctx context.Context, method, path string, cert *tls.Certificate) (int, string) {
		GinkgoHelper()
		return doWith(ctx, method, path, cert, nil)
	}
	startPod := func(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
		GinkgoHelper()
		Expect(admin.Create(ctx, pod)).To(Succeed())
		return utils.WaitForPod(ctx, admin, ns, pod.Name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).NotTo(BeEmpty())
		})
	}
	// bindNodeRole grants user verbs on nodes/subresource.
	bindNodeRole := func(ctx context.Context, name, user, subresource string, verbs ...string) {
		GinkgoHelper()
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/" + subresource}, Verbs: verbs}},
		}
		Expect(admin.Create(ctx, role)).To(Succeed())
		DeferCleanup(admin.Delete, role)
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		Expect(admin.Create(ctx, binding)).To(Succeed())
		DeferCleanup(admin.Delete, binding)
	}

	BeforeAll(func(ctx SpecContext) {
		admin, nodelet = env.Admin, env.Nodelet
		ns = utils.NewNamespace(ctx, admin)
		var err error
		master, err = apiServer.KubeletClientCA.TLSClientCert("e2e-attack-master", "system:masters")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			node := &corev1.Node{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: attackNode}, node)).To(Succeed())
			g.Expect(node.Status.DaemonEndpoints.KubeletEndpoint.Port).NotTo(BeZero())
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
	}, NodeTimeout(apiTimeout))

	It("reads logs from its own containers, whatever the pod's status says", func(ctx SpecContext) {
		startPod(ctx, utils.BusyboxPod(ns, "victim", attackNode, "sh", "-c", "echo secret-of-the-victim; sleep 3600"))
		startPod(ctx, utils.BusyboxPod(ns, "reader", attackNode, "sh", "-c", "echo reader-output; sleep 3600"))
		logPath := "/containerLogs/" + ns + "/reader/main"
		Eventually(func(g Gomega) {
			code, body := do(ctx, http.MethodGet, logPath, &master)
			g.Expect(code).To(Equal(http.StatusOK), body)
			g.Expect(body).To(Equal("reader-output\n"))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())

		victimID := utils.GetPod(ctx, admin, ns, "victim")(Default).Status.ContainerStatuses[0].ContainerID
		// Whoever may patch the reader's status points it at the victim's
		// container, in every place a container ID is read from.
		forge := func() {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				p := utils.GetPod(ctx, admin, ns, "reader")(g)
				base := p.DeepCopy()
				st := &p.Status.ContainerStatuses[0]
				st.ContainerID = victimID
				st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 1, ContainerID: victimID, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
				g.Expect(admin.Status().Patch(ctx, p, client.MergeFrom(base))).To(Succeed())
			}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		}
		forge()
		// The node sees the forged status (its /pods is its own view)...
		Eventually(func(g Gomega) {
			code, body := do(ctx, http.MethodGet, "/pods", &master)
			g.Expect(code).To(Equal(http.StatusOK))
			g.Expect(body).To(ContainSubstring(`"containerID":"` + victimID + `"`))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		// ... and still never serves the victim's log for the reader.
		for i := range 10 {
			if i%3 == 0 {
				forge()
			}
			code, body := do(ctx, http.MethodGet, logPath, &master)
			Expect(body).NotTo(ContainSubstring("secret-of-the-victim"))
			Expect(code).To(Equal(http.StatusOK), body)
			Expect(body).To(Equal("reader-output\n"))
			code, body = do(ctx, http.MethodGet, logPath+"?previous=true", &master)
			Expect(body).NotTo(ContainSubstring("secret-of-the-victim"))
			Expect(code).To(Equal(http.StatusBadRequest), body)
			Expect(body).To(ContainSubstring(`previous terminated container "main" in pod "reader" not found`))
			time.Sleep(200 * time.Millisecond)
		}

		// A container the node does not have is a clean 404, not a 500.
		code, body := do(ctx, http.MethodGet, "/containerLogs/"+ns+"/reader/nosuch", &master)
		Expect(code).To(Equal(http.StatusNotFound), body)
		code, body = do(ctx, http.MethodGet, "/containerLogs/"+ns+"/nosuch/main", &master)
		Expect(code).To(Equal(http.StatusNotFound), body)
	}, SpecTimeout(2*podStartTimeout+4*apiTimeout))

	It("authorizes exec over a WebSocket GET as create on nodes/proxy", func(ctx SpecContext) {
		startPod(ctx, utils.BusyboxPod(ns, "target", attackNode, "sleep", "3600"))
		bindNodeRole(ctx, "e2e-attack-proxy-get", "e2e-proxy-getter", "proxy", "get")
		bindNodeRole(ctx, "e2e-attack-proxy-create", "e2e-proxy-creator", "proxy", "get", "create")
		getter, err := apiServer.KubeletClientCA.TLSClientCert("e2e-proxy-getter")
		Expect(err).NotTo(HaveOccurred())
		creator, err := apiServer.KubeletClientCA.TLSClientCert("e2e-proxy-creator")
		Expect(err).NotTo(HaveOccurred())
		execPath := "/exec/" + ns + "/target/main?command=echo&command=exec-ran&output=1"

		// get nodes/proxy is enough for the read-only endpoints...
		Eventually(func(g Gomega) {
			code, body := do(ctx, http.MethodGet, "/pods", &getter)
			g.Expect(code).To(Equal(http.StatusOK), body)
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		// ... but not for a command, whichever method carries it.
		out, err := websocketExec(ctx, nodelet.ServerAddr, execPath, getter)
		Expect(err).To(HaveOccurred(), "a WebSocket exec with get only ran: %q", out)
		upgrade := http.Header{
			"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
			"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {"v4.channel.k8s.io"},
		}
		code, body := doWith(ctx, http.MethodGet, execPath, &getter, upgrade)
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring("verb=create"))
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
			code, body := do(ctx, method, execPath, &getter)
			Expect(code).To(Equal(http.StatusForbidden), "%s: %s", method, body)
			if method != http.MethodHead {
				Expect(body).To(ContainSubstring("verb=create"))
			}
		}
		code, _ = do(ctx, http.MethodGet, "/portForward/"+ns+"/target?port=80", &getter)
		Expect(code).To(Equal(http.StatusForbidden))
		code, _ = do(ctx, http.MethodGet, "/attach/"+ns+"/target/main?output=1", &getter)
		Expect(code).To(Equal(http.StatusForbidden))

		// With create, the same WebSocket exec runs.
		Eventually(func(g Gomega) {
			out, err := websocketExec(ctx, nodelet.ServerAddr, execPath, creator)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(Equal("exec-ran\n"))
		}).WithTimeout(apiTimeout).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(podStartTimeout+3*apiTimeout))

	It("answers a flood of unknown tokens with 429 instead of a TokenReview each", func(ctx SpecContext) {
		const flood = 60
		codes := make([]int, flood)
		retryAfter := make([]string, flood)
		var wg sync.WaitGroup
		c := &http.Client{Timeout: apiTimeout, Transport: &http.Transport{TLSClientConfig: tlsConfig()}}
		defer c.CloseIdleConnections()
		for i := range flood {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+nodelet.ServerAddr+"/pods", http.NoBody)
				Expect(err).NotTo(HaveOccurred())
				req.Header.Set("Authorization", fmt.Sprintf("Bearer flood-%d-%d", GinkgoRandomSeed(), i))
				resp, err := c.Do(req)
				Expect(err).NotTo(HaveOccurred())
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				codes[i], retryAfter[i] = resp.StatusCode, resp.Header.Get("Retry-After")
			}()
		}
		wg.Wait()
		limited := 0
		for i, code := range codes {
			Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusTooManyRequests))
			if code == http.StatusTooManyRequests {
				limited++
				Expect(retryAfter[i]).NotTo(BeEmpty())
			}
		}
		GinkgoWriter.Printf("%d new tokens at once: %d answered 401 after a review, %d answered 429\n", flood, flood-limited, limited)
		Expect(limited).To(BeNumerically(">=", flood/4), "the reviews of new tokens are not rate limited")
		// A token that was reviewed is answered from the cache while the
		// bucket is empty: 401, never 429.
		reviewed := slices.Index(codes, http.StatusUnauthorized)
		Expect(reviewed).NotTo(Equal(-1))
		for range 5 {
			code, _ := doWithToken(ctx, c, nodelet.ServerAddr, "/pods", fmt.Sprintf("flood-%d-%d", GinkgoRandomSeed(), reviewed))
			Expect(code).To(Equal(http.StatusUnauthorized))
		}
	}, SpecTimeout(apiTimeout))

	It("ends an exec session without traffic after streamingConnectionIdleTimeout", func(ctx SpecContext) {
		startPod(ctx, utils.BusyboxPod(ns, "idle-exec", attackNode, "sleep", "3600"))
		// A command that prints nothing and reads nothing: the session
		// carries no traffic either way.
		ectx, cancel := context.WithTimeout(ctx, apiTimeout)
		defer cancel()
		cmd, err := apiServer.Kubectl(ectx, "exec", "-n", ns, "idle-exec", "--", "sleep", "3600")
		Expect(err).NotTo(HaveOccurred())
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		start := time.Now()
		_ = cmd.Run() // the cut session is an error to kubectl
		took := time.Since(start)
		GinkgoWriter.Printf("idle exec ended after %s: %s\n", took.Round(100*time.Millisecond), out.String())
		Expect(ectx.Err()).NotTo(HaveOccurred(), "the idle exec was still running after %s", apiTimeout)
		Expect(took).To(BeNumerically(">=", attackIdleTimeout))
		Expect(took).To(BeNumerically("<", attackIdleTimeout+10*time.Second))

		// A session with traffic is not cut: it outlives the timeout.
		bctx, cancel := context.WithTimeout(ctx, apiTimeout)
		defer cancel()
		busy, err := apiServer.Kubectl(bctx, "exec", "-n", ns, "idle-exec", "--", "sh", "-c",
			"for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 1; done")
		Expect(err).NotTo(HaveOccurred())
		ticks, err := busy.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(ticks))
		Expect(string(ticks)).To(HaveSuffix("tick 8\n"))
	}, SpecTimeout(podStartTimeout+3*apiTimeout))

	It("closes thousands of idle connections after server.idleTimeout and gives their memory back", func(ctx SpecContext) {
		pid := nodelet.PID()
		Expect(pid).NotTo(BeZero())
		gc := func() {
			GinkgoHelper()
			resp, err := http.Get("http://" + nodelet.MetricsAddr + "/debug/pprof/heap?gc=1")
			Expect(err).NotTo(HaveOccurred())
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		gc()
		time.Sleep(2 * time.Second)
		gc()
		baseline := vmRSS(pid)

		// Most connections send one request, half of them with a client
		// certificate, then idle; some finish the TLS handshake and never
		// send a request at all.
		const handshakeOnly = idleConnections / 10
		conns := make([]*tls.Conn, idleConnections)
		errs := make(chan error, idleConnections)
		sem := make(chan struct{}, 32)
		var wg sync.WaitGroup
		for i := range conns {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				var certs []tls.Certificate
				if i%2 == 0 {
					certs = []tls.Certificate{master}
				}
				conn, err := idleConnection(ctx, nodelet.ServerAddr, tlsConfig(certs...), i >= handshakeOnly)
				if err != nil {
					errs <- err
					return
				}
				conns[i] = conn
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			Expect(err).NotTo(HaveOccurred())
		}
		opened := time.Now()
		peak := vmRSS(pid)
		GinkgoWriter.Printf("nodelet RSS: baseline %d MiB, with %d idle connections %d MiB\n", baseline>>20, idleConnections, peak>>20)

		// Every connection is closed by the server: a read ends with EOF
		// (or a reset), not with the client's deadline.
		var closed sync.WaitGroup
		var mu sync.Mutex
		var stillOpen, failed int
		var firstErr error
		deadline := opened.Add(attackIdleTimeout + 10*time.Second)
		for _, c := range conns {
			closed.Add(1)
			go func() {
				defer closed.Done()
				_ = c.SetReadDeadline(deadline)
				_, err := c.Read(make([]byte, 1))
				mu.Lock()
				defer mu.Unlock()
				var netErr net.Error
				switch {
				case errors.As(err, &netErr) && netErr.Timeout():
					stillOpen++
				case err == nil:
					failed++
					firstErr = errors.New("the server sent data on an idle connection")
				case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
				default:
					failed++
					firstErr = err
				}
			}()
		}
		closed.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
		took := time.Since(opened)
		GinkgoWriter.Printf("idle connections: %d still open after %s, %d failed (%v)\n", stillOpen, took.Round(time.Millisecond), failed, firstErr)
		Expect(stillOpen).To(BeZero(), "connections still open %s after they went idle", took.Round(time.Second))
		Expect(failed).To(BeZero(), "first error: %v", firstErr)

		var after int64
		Eventually(func(g Gomega) {
			gc()
			after = vmRSS(pid)
			GinkgoWriter.Printf("nodelet RSS %s after the connections closed: %d MiB\n", time.Since(opened).Round(time.Second), after>>20)
			g.Expect(after).To(BeNumerically("<", baseline+rssSlack))
		}).WithTimeout(2 * time.Minute).WithPolling(5 * time.Second).Should(Succeed())
		GinkgoWriter.Printf("nodelet RSS: baseline %d MiB, peak %d MiB, after %d MiB (bound %d MiB)\n",
			baseline>>20, peak>>20, after>>20, (baseline+rssSlack)>>20)
	}, SpecTimeout(5*time.Minute))
})

// idleConnection opens a TLS connection to addr, sends one GET /healthz on
// it when request is set and reads the answer, and returns it idle.
func idleConnection(ctx context.Context, addr string, cfg *tls.Config, request bool) (*tls.Conn, error) {
	d := &tls.Dialer{Config: cfg}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	conn := raw.(*tls.Conn)
	if !request {
		return conn, nil
	}
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n"); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("sending a request: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 64), nil)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("reading a response: %w", err)
	}
	// A small body: it was read with the headers or is in the kernel.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
		_ = conn.Close()
		return nil, fmt.Errorf("unexpected status %s", resp.Status)
	}
	return conn, nil
}

// vmRSS is the resident memory of process pid, in bytes.
func vmRSS(pid int) int64 {
	GinkgoHelper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(status), "\n") {
		if value, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(value)[0], 10, 64)
			Expect(err).NotTo(HaveOccurred())
			return kb << 10
		}
	}
	Fail("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}

// websocketExec runs the exec at path (with its query) on the node API at
// addr over a WebSocket (v4.channel.k8s.io), as a browser or the API
// server's WebSocket clients do, and returns what it wrote to stdout.
func websocketExec(ctx context.Context, addr, path string, cert tls.Certificate) (string, error) {
	u := &url.URL{Scheme: "wss", Host: addr}
	ref, err := url.Parse(path)
	if err != nil {
		return "", err
	}
	u = u.ResolveReference(ref)
	cfg, err := websocket.NewConfig(u.String(), "http://localhost")
	if err != nil {
		return "", err
	}
	cfg.TlsConfig = &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}} //nolint:gosec // test client
	cfg.Protocol = []string{"v4.channel.k8s.io"}
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		return "", err
	}
	defer ws.Close()
	_ = ws.SetDeadline(time.Now().Add(apiTimeout))
	return readWebSocket(ws, func(msg []byte) []byte {
		if len(msg) > 1 && msg[0] == 1 { // stdout
			return msg[1:]
		}
		return nil
	})
}

// doWithToken GETs path on the node API at addr with a bearer token and
// returns the status and body.
func doWithToken(ctx context.Context, c *http.Client, addr, path, token string) (int, string) {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, http.NoBody)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}
