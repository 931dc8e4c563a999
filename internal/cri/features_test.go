package cri

import (
	"context"
	"errors"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestFeaturesFromStatus(t *testing.T) {
	for _, tc := range []struct {
		name         string
		resp         *runtimeapi.StatusResponse
		handler      string
		wantHas      bool
		wantUserns   bool
		wantStrict   bool
		wantHostUser bool
	}{
		{name: "containerd 1.6: nothing reported", resp: &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}},
			handler: "runc", wantHas: true},
		{name: "nil response", handler: "", wantHas: true},
		{name: "listed handler with userns", handler: "runc", wantHas: true, wantUserns: true, wantStrict: true, wantHostUser: true,
			resp: &runtimeapi.StatusResponse{
				RuntimeHandlers: []*runtimeapi.RuntimeHandler{
					{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}},
					{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}},
				},
				Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true, UserNamespacesHostNetwork: true},
			}},
		{name: "default handler without userns", handler: "",
			wantHas: true, resp: &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: ""}}}},
		{name: "handler missing from the list", handler: "kata",
			resp: &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: ""}, {Name: "runc"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := FeaturesFromStatus(tc.resp)
			if got := f.HasHandler(tc.handler); got != tc.wantHas {
				t.Errorf("HasHandler(%q) = %v, want %v", tc.handler, got, tc.wantHas)
			}
			if got := f.UserNamespaces(tc.handler); got != tc.wantUserns {
				t.Errorf("UserNamespaces(%q) = %v, want %v", tc.handler, got, tc.wantUserns)
			}
			if f.FeaturesReported != (tc.resp.GetFeatures() != nil) {
				t.Errorf("FeaturesReported = %v", f.FeaturesReported)
			}
			if f.SupplementalGroupsPolicy != tc.wantStrict || f.UserNamespacesHostNetwork != tc.wantHostUser {
				t.Errorf("features = %+v", f)
			}
		})
	}
}

type countingSource struct {
	calls int
	f     Features
	err   error
}

func (s *countingSource) Features(context.Context) (Features, error) {
	s.calls++
	return s.f, s.err
}

func TestFeatureCache(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	src := &countingSource{f: Features{SupplementalGroupsPolicy: true}}
	c := &FeatureCache{Source: src, Refresh: time.Minute, Clock: clk}
	for range 3 {
		if f, err := c.Features(ctx); err != nil || !f.SupplementalGroupsPolicy {
			t.Fatalf("Features = %+v, %v", f, err)
		}
	}
	if src.calls != 1 {
		t.Errorf("runtime asked %d times within the refresh period, want 1", src.calls)
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	src.err = errors.New("down")
	if f, err := c.Features(ctx); err != nil || !f.SupplementalGroupsPolicy {
		t.Errorf("after a failed refresh: %+v, %v; want the last features", f, err)
	}
	if src.calls != 2 {
		t.Errorf("runtime asked %d times, want 2", src.calls)
	}
	if _, err := (&FeatureCache{Source: &countingSource{err: errors.New("down")}, Clock: clk}).Features(ctx); err == nil {
		t.Error("no features read yet and the runtime down: want an error")
	}
	if _, err := (*FeatureCache)(nil).Features(ctx); !errors.Is(err, ErrFeaturesUnknown) {
		t.Errorf("nil cache: err = %v", err)
	}
}

func TestClientFeatures(t *testing.T) {
	c, _, _ := newTestClient(t)
	f, err := c.Features(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.HandlersReported || f.SupplementalGroupsPolicy {
		t.Errorf("fake runtime reports nothing, got %+v", f)
	}
}

func TestImageVolumesFromVersion(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		want          bool
	}{
		{"containerd", "v1.6.20", false},
		{"containerd", "1.7.27", false},
		{"containerd", "v2.0.5", false},
		{"containerd", "v2.1.0", true},
		{"containerd", "2.4.2+unknown", true},
		{"containerd", "not a version", true},
		{"cri-o", "1.30.4", false},
		{"cri-o", "1.31.0", true},
		{"some-runtime", "0.1.0", true},
	} {
		v := &runtimeapi.VersionResponse{RuntimeName: tc.name, RuntimeVersion: tc.version}
		if got := ImageVolumesFromVersion(v); got != tc.want {
			t.Errorf("ImageVolumesFromVersion(%s %s) = %v, want %v", tc.name, tc.version, got, tc.want)
		}
	}
}

func TestCDIFromRuntime(t *testing.T) {
	config := func(js string) *runtimeapi.StatusResponse {
		return &runtimeapi.StatusResponse{Info: map[string]string{"config": js}}
	}
	for _, tc := range []struct {
		desc, name, version string
		status              *runtimeapi.StatusResponse
		want                bool
	}{
		{"containerd 1.6 has no CDI", "containerd", "v1.6.20", config(`{"enableSelinux":false}`), false},
		{"containerd 1.7 with enable_cdi off", "containerd", "1.7.27", config(`{"enableCDI":false,"cdiSpecDirs":[]}`), false},
		{"containerd 1.7 with enable_cdi on", "containerd", "1.7.27", config(`{"enableCDI":true}`), true},
		{"containerd 2 with enable_cdi off", "containerd", "v2.4.2", config(`{"enableCDI":false}`), false},
		{"containerd 2 without its configuration: on by default", "containerd", "v2.4.2", &runtimeapi.StatusResponse{}, true},
		{"containerd 1.7 without its configuration: off by default", "containerd", "1.7.0", &runtimeapi.StatusResponse{}, false},
		{"a configuration that does not parse", "containerd", "v1.6.20", config(`{`), false},
		{"another runtime is trusted", "cri-o", "1.31.0", &runtimeapi.StatusResponse{}, true},
	} {
		v := &runtimeapi.VersionResponse{RuntimeName: tc.name, RuntimeVersion: tc.version}
		if got := CDIFromRuntime(tc.status, v); got != tc.want {
			t.Errorf("%s: CDIFromRuntime = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
