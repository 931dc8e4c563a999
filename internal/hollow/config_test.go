package hollow

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

func TestNodeNames(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		count  int
		want   []string
	}{
		{"hollow", 0, []string{}},
		{"hollow", 1, []string{"hollow-0000"}},
		{"h", 3, []string{"h-0000", "h-0001", "h-0002"}},
	} {
		got := NodeNames(tc.prefix, tc.count)
		if !slices.Equal(got, tc.want) {
			t.Errorf("NodeNames(%q, %d) = %v, want %v", tc.prefix, tc.count, got, tc.want)
		}
	}
	// Zero padding keeps the order of the names their numeric order.
	names := NodeNames("n", 1000)
	if !slices.IsSorted(names) {
		t.Errorf("NodeNames(n, 1000) is not sorted")
	}
}

func TestNodeConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*v1alpha1.NodeletConfiguration)
		wantErr bool
		check   func(*testing.T, *v1alpha1.NodeletConfiguration)
	}{{
		name: "keeps the node's state and logs in its directory and opens no port",
		check: func(t *testing.T, c *v1alpha1.NodeletConfiguration) {
			if c.NodeName != "n-1" || c.RootDir != "/r/n-1" {
				t.Errorf("name %q, root %q", c.NodeName, c.RootDir)
			}
			if c.PodLogsDir != "/r/n-1/logs" || ptr.Deref(c.ContainerLogLinksDir, "") != "/r/n-1/containers" {
				t.Errorf("logs %q, links %v", c.PodLogsDir, c.ContainerLogLinksDir)
			}
			if c.HealthzBindAddress != "0" || c.MetricsBindAddress != "0" || ptr.Deref(c.Server.Port, -1) != 0 {
				t.Errorf("listeners: healthz %q, metrics %q, server %v", c.HealthzBindAddress, c.MetricsBindAddress, c.Server.Port)
			}
			if ptr.Deref(c.CgroupsPerQOS, true) {
				t.Errorf("cgroupsPerQOS is on")
			}
		},
	}, {
		name: "keeps nodelet's defaults for what the API server sees",
		check: func(t *testing.T, c *v1alpha1.NodeletConfiguration) {
			d := &v1alpha1.NodeletConfiguration{}
			v1alpha1.SetDefaults(d)
			if c.NodeStatusUpdateFrequency != d.NodeStatusUpdateFrequency ||
				c.NodeStatusReportFrequency != d.NodeStatusReportFrequency ||
				c.NodeLeaseDurationSeconds != d.NodeLeaseDurationSeconds ||
				c.RelistPeriod != d.RelistPeriod || c.MaxPods != d.MaxPods {
				t.Errorf("frequencies or capacity differ from the defaults: %+v", c)
			}
		},
	}, {
		name:   "applies the caller's change before defaulting",
		mutate: func(c *v1alpha1.NodeletConfiguration) { c.MaxPods = 20 },
		check: func(t *testing.T, c *v1alpha1.NodeletConfiguration) {
			if c.MaxPods != 20 {
				t.Errorf("maxPods %d", c.MaxPods)
			}
		},
	}, {
		name: "registers with the hollow taint",
		check: func(t *testing.T, c *v1alpha1.NodeletConfiguration) {
			if want := []corev1.Taint{Taint()}; !slices.EqualFunc(c.RegisterWithTaints, want, taintEqual) {
				t.Errorf("taints %v, want %v", c.RegisterWithTaints, want)
			}
		},
	}, {
		name: "adds the hollow taint to the caller's",
		mutate: func(c *v1alpha1.NodeletConfiguration) {
			c.RegisterWithTaints = []corev1.Taint{{Key: "dedicated", Value: "bench", Effect: corev1.TaintEffectNoExecute}}
		},
		check: func(t *testing.T, c *v1alpha1.NodeletConfiguration) {
			want := []corev1.Taint{{Key: "dedicated", Value: "bench", Effect: corev1.TaintEffectNoExecute}, Taint()}
			if !slices.EqualFunc(c.RegisterWithTaints, want, taintEqual) {
				t.Errorf("taints %v, want %v", c.RegisterWithTaints, want)
			}
		},
	}, {
		name: "keeps the hollow taint once when the caller sets it",
		mutate: func(c *v1alpha1.NodeletConfiguration) {
			c.RegisterWithTaints = []corev1.Taint{{Key: TaintKey, Value: "bench", Effect: corev1.TaintEffectNoSchedule}}
		},
		check: func(t *testing.T, c *v1alpha1.NodeletConfiguration) {
			want := []corev1.Taint{{Key: TaintKey, Value: "bench", Effect: corev1.TaintEffectNoSchedule}}
			if !slices.EqualFunc(c.RegisterWithTaints, want, taintEqual) {
				t.Errorf("taints %v, want %v", c.RegisterWithTaints, want)
			}
		},
	}, {
		name:    "refuses an invalid configuration",
		mutate:  func(c *v1alpha1.NodeletConfiguration) { c.MaxPods = -1 },
		wantErr: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NodeConfig("/r", "n-1", tc.mutate)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func taintEqual(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }

func TestToleration(t *testing.T) {
	taint, tol := Taint(), Toleration()
	if !tol.ToleratesTaint(klog.Background(), &taint, false) {
		t.Errorf("%v does not tolerate %v", tol, taint)
	}
}

func TestNodeSigner(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "client-ca"}, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	base := &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "admin", QPS: 7}
	s, err := NewNodeSigner(base,
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.Credentials("n-7")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "" || cfg.Host != base.Host || cfg.QPS != 7 {
		t.Errorf("config: token %q, host %q, qps %v", cfg.BearerToken, cfg.Host, cfg.QPS)
	}
	certs, err := certutil.ParseCertsPEM(cfg.CertData)
	if err != nil {
		t.Fatal(err)
	}
	c := certs[0]
	if c.Subject.CommonName != "system:node:n-7" || !slices.Equal(c.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v", c.Subject)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the node certificate does not verify against the CA: %v", err)
	}
	if _, err := NewNodeSigner(base, []byte("nope"), nil); err == nil {
		t.Errorf("a CA that is no PEM was accepted")
	}
}
