package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"text/template"
)

// cniTemplateData is what containerd's CRI hands a conf_template: the pod
// CIDRs of UpdateRuntimeConfig, and a default route per IP family.
type cniTemplateData struct {
	PodCIDR       string
	PodCIDRRanges []string
	Routes        []string
}

// TestHostCNITemplate renders config/host/10-nodelet.conflist as
// containerd does and checks that it is a conflist whose host-local IPAM
// gives out the pod CIDRs, one range set per CIDR.
func TestHostCNITemplate(t *testing.T) {
	data, err := os.ReadFile("../../config/host/10-nodelet.conflist")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New("cni").Parse(string(data))
	if err != nil {
		t.Fatalf("parsing the template: %v", err)
	}
	for _, tc := range []struct {
		name string
		in   cniTemplateData
	}{
		{"IPv4", cniTemplateData{PodCIDR: "10.244.3.0/24", PodCIDRRanges: []string{"10.244.3.0/24"}, Routes: []string{"0.0.0.0/0"}}},
		{"dual stack", cniTemplateData{PodCIDR: "10.244.3.0/24", PodCIDRRanges: []string{"10.244.3.0/24", "fd00:3::/64"}, Routes: []string{"0.0.0.0/0", "::/0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := tmpl.Execute(&out, tc.in); err != nil {
				t.Fatalf("rendering: %v", err)
			}
			var conf struct {
				Plugins []struct {
					Type string `json:"type"`
					IPAM struct {
						Ranges [][]struct {
							Subnet string `json:"subnet"`
						} `json:"ranges"`
						Routes []struct {
							Dst string `json:"dst"`
						} `json:"routes"`
					} `json:"ipam"`
				} `json:"plugins"`
			}
			if err := json.Unmarshal(out.Bytes(), &conf); err != nil {
				t.Fatalf("the rendered conflist is not JSON: %v\n%s", err, out.String())
			}
			if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[1].Type != "portmap" {
				t.Fatalf("plugins %+v, want bridge and portmap", conf.Plugins)
			}
			ipam := conf.Plugins[0].IPAM
			if len(ipam.Ranges) != len(tc.in.PodCIDRRanges) || len(ipam.Routes) != len(tc.in.Routes) {
				t.Fatalf("ranges %+v routes %+v, want one per pod CIDR and route of %+v", ipam.Ranges, ipam.Routes, tc.in)
			}
			for i, r := range ipam.Ranges {
				if len(r) != 1 || r[0].Subnet != tc.in.PodCIDRRanges[i] {
					t.Errorf("range %d = %+v, want subnet %s", i, r, tc.in.PodCIDRRanges[i])
				}
			}
			for i, r := range ipam.Routes {
				if r.Dst != tc.in.Routes[i] {
					t.Errorf("route %d = %s, want %s", i, r.Dst, tc.in.Routes[i])
				}
			}
		})
	}
}
