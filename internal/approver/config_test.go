package approver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInvalidDNSNamePattern(t *testing.T) {
	cases := []struct {
		pattern string
		why     string // "" when valid
	}{
		{"node-1", ""},
		{"node-1.example.com", ""},
		{"*.nodes.example.com", ""},
		{"*.example.com", ""},
		{"*", `"*" may only be the whole first label`},
		{"*.com", "at least two labels"},
		{"*.local", "at least two labels"},
		{"**.example.com", `"*" may only be the whole first label`},
		{"a*.example.com", `"*" may only be the whole first label`},
		{"a.*.example.com", `"*" may only be the whole first label`},
		{"*.*.example.com", `"*" may only be the whole first label`},
		{"Node-1.example.com", "not a lower-case DNS name"},
		{"node-1.example.com.", "not a lower-case DNS name"},
		{"", "not a lower-case DNS name"},
		{"kubernetes", "never approved"},
		{"kubernetes.default", "never approved"},
		{"*.default", "at least two labels"},
		{"kubernetes.default.svc", `"svc" or "pod" label`},
		{"kubernetes.default.svc.cluster.local", `"svc" or "pod" label`},
		{"*.default.svc", `"svc" or "pod" label`},
		{"*.svc.cluster.local", `"svc" or "pod" label`},
		{"*.my-namespace.pod.cluster.local", `"svc" or "pod" label`},
		{"*.kubernetes.default", ""}, // names under it are not the Service's
	}
	for _, tc := range cases {
		got := invalidDNSNamePattern(tc.pattern)
		if (got == "") != (tc.why == "") || !strings.Contains(got, tc.why) {
			t.Errorf("invalidDNSNamePattern(%q) = %q, want %q", tc.pattern, got, tc.why)
		}
	}
}

func TestConfigurationValidate(t *testing.T) {
	valid := func() Configuration {
		return Configuration{APIVersion: ConfigurationAPIVersion, Kind: ConfigurationKind, ServingCertificates: ServingCertificates{
			DNSNamePatterns: []string{"*.nodes.example.com", "node-1"},
			IPCIDRs:         []string{"10.0.0.0/16", "fd00::/64"},
			ServiceCIDRs:    []string{"10.96.0.0/12"},
		}}
	}
	cases := []struct {
		name   string
		modify func(*Configuration)
		want   []string // the field paths of the errors
	}{
		{name: "valid"},
		{name: "empty serving policy", modify: func(c *Configuration) { c.ServingCertificates = ServingCertificates{} }},
		{name: "wrong kind and version", modify: func(c *Configuration) { c.Kind, c.APIVersion = "NodeletConfiguration", "v1" }, want: []string{"apiVersion", "kind"}},
		{name: "bad patterns", modify: func(c *Configuration) {
			c.ServingCertificates.DNSNamePatterns = []string{"node-1", "*", "*.default.svc", "node-1"}
		}, want: []string{"servingCertificates.dnsNamePatterns[1]", "servingCertificates.dnsNamePatterns[2]", "servingCertificates.dnsNamePatterns[3]"}},
		{name: "bad CIDRs", modify: func(c *Configuration) {
			c.ServingCertificates.IPCIDRs = []string{"10.0.0.1/16", "0.0.0.0/0", "::/0", "10.1.0.0", "::ffff:10.0.0.0/104", "10.2.0.0/16", "10.2.0.0/16"}
		}, want: []string{
			"servingCertificates.ipCIDRs[0]", "servingCertificates.ipCIDRs[1]", "servingCertificates.ipCIDRs[2]",
			"servingCertificates.ipCIDRs[3]", "servingCertificates.ipCIDRs[4]", "servingCertificates.ipCIDRs[6]",
		}},
		{name: "node CIDR holding the service CIDR", modify: func(c *Configuration) {
			c.ServingCertificates.IPCIDRs = []string{"10.0.0.0/8"}
		}, want: []string{"servingCertificates.ipCIDRs[0]"}},
		{name: "node CIDR inside the service CIDR", modify: func(c *Configuration) {
			c.ServingCertificates.IPCIDRs = []string{"10.100.0.0/16"}
		}, want: []string{"servingCertificates.ipCIDRs[0]"}},
		{name: "bad service CIDR", modify: func(c *Configuration) {
			c.ServingCertificates.ServiceCIDRs = []string{"10.96.0.1/12"}
		}, want: []string{"servingCertificates.serviceCIDRs[0]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			if tc.modify != nil {
				tc.modify(&c)
			}
			var got []string
			for _, e := range c.Validate() {
				got = append(got, e.Field)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("errors at %q, want %q: %v", got, tc.want, c.Validate())
			}
		})
	}
}

func TestLoadConfiguration(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.yaml", `apiVersion: config.nodelet.io/v1alpha1
kind: CSRApproverConfiguration
servingCertificates:
  dnsNamePatterns: ["*.nodes.example.com"]
  ipCIDRs: [10.0.0.0/16]
  serviceCIDRs: [10.96.0.0/12]
`)
	c, err := LoadConfiguration(good)
	if err != nil {
		t.Fatal(err)
	}
	p, errs := c.ServingCertificates.Policy(nil)
	if len(errs) > 0 || len(p.DNSNamePatterns) != 1 || p.IPCIDRs[0].String() != "10.0.0.0/16" || p.ServiceCIDRs[0].String() != "10.96.0.0/12" {
		t.Errorf("policy %+v, errors %v", p, errs)
	}
	for name, text := range map[string]string{
		"unknown field":      "apiVersion: config.nodelet.io/v1alpha1\nkind: CSRApproverConfiguration\nservingCertificates:\n  dnsNames: [a]\n",
		"invalid pattern":    "apiVersion: config.nodelet.io/v1alpha1\nkind: CSRApproverConfiguration\nservingCertificates:\n  dnsNamePatterns: ['*']\n",
		"not YAML":           "{",
		"missing apiVersion": "kind: CSRApproverConfiguration\n",
	} {
		if _, err := LoadConfiguration(write(strings.ReplaceAll(name, " ", "-")+".yaml", text)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if _, err := LoadConfiguration(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing file loaded")
	}
}
