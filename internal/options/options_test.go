package options

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const header = "apiVersion: config.nodelet.io/v1alpha1\nkind: NodeletConfiguration\n"

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name    string
		file    string // written to a temp file and passed with --config when not empty
		args    []string
		wantErr string
	}{
		{"misspelt field", header + "nodeNmae: a\n", nil, `unknown field "nodeNmae"`},
		{"misspelt nested field", header + "server:\n  prot: 1\n", nil, `unknown field "server.prot"`},
		{"duplicate field", header + "maxPods: 1\nmaxPods: 2\n", nil, `"maxPods"`},
		{"wrong type", header + "maxPods: many\n", nil, "maxPods"},
		{"wrong apiVersion", "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", nil, "no kind"},
		{"missing kind", "apiVersion: config.nodelet.io/v1alpha1\n", nil, "apiVersion and kind must be set"},
		{"empty file", "\n", nil, "is empty"},
		{"invalid value names field", header + "maxPods: -3\n", nil, "maxPods: Invalid value: -3"},
		{"invalid flag value names field", "", []string{"--node-name=n", "--cluster-dns=not-an-ip"}, "clusterDNS[0]"},
		{"misspelt taint field", header + "registerWithTaints:\n- key: k\n  efect: NoSchedule\n", nil, `unknown field "registerWithTaints[0].efect"`},
		{"unknown flag", "", []string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"missing file", "", []string{"--config=/nonexistent/nodelet.yaml"}, "reading config file"},
		{"anonymous exec", header + "server:\n  anonymous:\n    enabled: true\n  authorization:\n    mode: AlwaysAllow\n", nil,
			"server.anonymous.enabled: Forbidden: must not be true with authorization mode AlwaysAllow"},
		{"zero QPS", header + "kubeAPIQPS: 0\n", nil, "kubeAPIQPS: Invalid value: 0"},
		{"negative review cache", header + "server:\n  webhook:\n    cacheTTL: -1s\n", nil, "server.webhook.cacheTTL"},
		{"unknown swap behaviour", header + "memorySwap:\n  swapBehavior: UnlimitedSwap\n", nil, `memorySwap.swapBehavior: Unsupported value: "UnlimitedSwap"`},
		{"throttling factor out of range", header + "memoryThrottlingFactor: 1.5\n", nil, "memoryThrottlingFactor: Invalid value: \"1.5\": must be greater than 0 and at most 1"},
		{"throttling factor without MemoryQoS", header + "memoryThrottlingFactor: 0.7\nfeatureGates:\n  MemoryQoS: false\n", nil, "memoryThrottlingFactor: Invalid value: \"0.7\": needs the MemoryQoS feature gate"},
		{"tiered reservation without MemoryQoS", header + "memoryReservationPolicy: TieredReservation\n", []string{"--feature-gates=MemoryQoS=false"}, "memoryReservationPolicy: Invalid value: \"TieredReservation\": needs the MemoryQoS feature gate"},
		{"critical pods' shutdown part above the whole", header + "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n", nil,
			`shutdownGracePeriodCriticalPods: Invalid value: "20s": must be at most shutdownGracePeriod (10s)`},
		{"shutdown without GracefulNodeShutdown", kubeletHeader + "shutdownGracePeriod: 30s\n", []string{"--feature-gates=GracefulNodeShutdown=false"},
			"shutdownGracePeriod: Forbidden: needs the GracefulNodeShutdown feature gate"},
		{"both shutdown forms", kubeletHeader + "shutdownGracePeriod: 30s\nshutdownGracePeriodByPodPriority:\n- priority: 0\n  shutdownGracePeriodSeconds: 10\n", nil,
			"shutdownGracePeriodByPodPriority: Forbidden: must be empty when shutdownGracePeriod or shutdownGracePeriodCriticalPods is set"},
		{"bootstrap without kubeconfig", "", []string{"--node-name=n", "--bootstrap-kubeconfig=/b"}, "--bootstrap-kubeconfig needs --kubeconfig"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, tc.file), "--node-name=n"}, args...)
			}
			_, err := Parse(args, nil)
			if err == nil {
				t.Fatalf("want an error containing %q, got none", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	file := writeFile(t, header+`nodeName: from-file
maxPods: 20
clusterDomain: file.example
relistPeriod: 3s
nodeLabels:
  zone: a
controllers: ["*", "-secret"]
`)
	opts, err := Parse([]string{"--config", file, "--max-pods=30", "--node-labels=zone=b,tier=x", "--kubeconfig=/k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := opts.Config
	if c.NodeName != "from-file" {
		t.Errorf("nodeName from file lost: %q", c.NodeName)
	}
	if c.MaxPods != 30 {
		t.Errorf("--max-pods did not override the file: %d", c.MaxPods)
	}
	if c.ClusterDomain != "file.example" || c.RelistPeriod.Duration != 3*time.Second {
		t.Errorf("file values not kept: %q %v", c.ClusterDomain, c.RelistPeriod)
	}
	if c.NodeLabels["zone"] != "b" || c.NodeLabels["tier"] != "x" {
		t.Errorf("--node-labels did not override the file: %v", c.NodeLabels)
	}
	if strings.Join(c.Controllers, ",") != "*,-secret" {
		t.Errorf("controllers from file lost: %v", c.Controllers)
	}
	if opts.Kubeconfig != "/k" || opts.ConfigFile != file {
		t.Errorf("paths not kept: %+v", opts)
	}
	if c.NodeStatusUpdateFrequency.Duration != 10*time.Second {
		t.Errorf("unset field not defaulted: %v", c.NodeStatusUpdateFrequency)
	}
}

func TestNodeNameDefault(t *testing.T) {
	t.Setenv("NODE_NAME", "Worker-7")
	opts, err := Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Config.NodeName != "worker-7" {
		t.Fatalf("node name %q, want worker-7", opts.Config.NodeName)
	}
}

func TestSampleConfigIsValid(t *testing.T) {
	if _, err := Parse([]string{"--config", "../../config/daemonset/nodelet.yaml", "--node-name=n"}, nil); err != nil {
		t.Fatalf("config/daemonset/nodelet.yaml: %v", err)
	}
}

// TestVersionBeforeConfig: --version answers even when the configuration
// would not load, as the kubelet's does.
func TestVersionBeforeConfig(t *testing.T) {
	for _, args := range [][]string{
		{"--version"},
		{"--version", "--config=/nonexistent/nodelet.yaml"},
		{"--max-pods=-1", "--version"},
	} {
		if _, err := Parse(args, nil); !errors.Is(err, ErrVersion) {
			t.Errorf("Parse(%q) = %v, want ErrVersion", args, err)
		}
	}
}

func TestCertificateOptions(t *testing.T) {
	rotate := func(o *Options) string {
		if o.Config.RotateCertificates == nil {
			return "unset"
		}
		if *o.Config.RotateCertificates {
			return "true"
		}
		return "false"
	}
	cases := []struct {
		name       string
		file       string
		args       []string
		wantRotate string
		wantDir    string
	}{
		{"no bootstrap", "", []string{"--root-dir=/r"}, "unset", "/r/pki"},
		{"bootstrap rotates by default", "", []string{"--root-dir=/r", "--kubeconfig=/k", "--bootstrap-kubeconfig=/b"}, "true", "/r/pki"},
		{"bootstrap keeps rotateCertificates false", header + "rotateCertificates: false\n", []string{"--kubeconfig=/k", "--bootstrap-kubeconfig=/b"}, "false", "/var/lib/nodelet/pki"},
		{"rotation without bootstrap", header + "rotateCertificates: true\n", nil, "true", "/var/lib/nodelet/pki"},
		{"cert-dir flag", "", []string{"--cert-dir=/etc/nodelet/pki"}, "unset", "/etc/nodelet/pki"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--node-name=n"}, tc.args...)
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			opts, err := Parse(args, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := rotate(opts); got != tc.wantRotate {
				t.Errorf("rotateCertificates %s, want %s", got, tc.wantRotate)
			}
			if opts.CertDir != tc.wantDir {
				t.Errorf("cert dir %q, want %q", opts.CertDir, tc.wantDir)
			}
		})
	}
}

// An explicit 0 in the file turns a review cache off; it is not taken for
// "unset" and defaulted.
func TestZeroReviewCacheTTLs(t *testing.T) {
	file := writeFile(t, header+"server:\n  webhook:\n    cacheTTL: 0s\n  authorization:\n    cacheAuthorizedTTL: 0s\n    cacheUnauthorizedTTL: 0s\n")
	cfg, err := Parse([]string{"--config", file, "--node-name=n"}, nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	s := cfg.Config.Server
	for name, d := range map[string]time.Duration{
		"webhook.cacheTTL":                   s.Webhook.CacheTTL.Duration,
		"authorization.cacheAuthorizedTTL":   s.Authorization.CacheAuthorizedTTL.Duration,
		"authorization.cacheUnauthorizedTTL": s.Authorization.CacheUnauthorizedTTL.Duration,
	} {
		if d != 0 {
			t.Errorf("%s = %s, want 0", name, d)
		}
	}
}
