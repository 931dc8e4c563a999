package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestAdmitSupplementalGroupsPolicy(t *testing.T) {
	policy := func(p *v1.SupplementalGroupsPolicy) podOpt {
		return func(pod *v1.Pod) {
			pod.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: p}
		}
	}
	strict := ptr.To(v1.SupplementalGroupsPolicyStrict)
	n := node(10, "4", "8Gi")
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		runtime    RuntimeFeatures
		wantReason string
	}{
		{name: "no security context", pod: pod("a")},
		{name: "policy unset", pod: pod("a", policy(nil))},
		{name: "Merge on a runtime without the feature", pod: pod("a", policy(ptr.To(v1.SupplementalGroupsPolicyMerge)))},
		{name: "Strict on a runtime without the feature", pod: pod("a", policy(strict)),
			wantReason: ReasonSupplementalGroupsPolicyNotSupported},
		{name: "Strict on a runtime with it", pod: pod("a", policy(strict)), runtime: RuntimeFeatures{SupplementalGroupsPolicy: true}},
		{name: "another OS is reported first", pod: pod("a", policy(strict), func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: "windows"} }),
			wantReason: ReasonPodOSNotSupported},
		{name: "before resources", pod: pod("a", policy(strict), requests("64", "1Gi")),
			wantReason: ReasonSupplementalGroupsPolicyNotSupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Policy{Runtime: tc.runtime}.Admit(tc.pod, n, nil)
			if r.Reason != tc.wantReason || r.Admit != (tc.wantReason == "") {
				t.Fatalf("Admit = %+v, want reason %q", r, tc.wantReason)
			}
			if tc.wantReason == ReasonSupplementalGroupsPolicyNotSupported && r.Message != "SupplementalGroupsPolicy=Strict is not supported in this node" {
				t.Errorf("message %q", r.Message)
			}
		})
	}
}
