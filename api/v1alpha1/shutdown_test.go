package v1alpha1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateShutdown(t *testing.T) {
	d := func(s string) metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return metav1.Duration{Duration: v}
	}
	byPriority := []ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: 20}, {Priority: 2000000000, ShutdownGracePeriodSeconds: 10}}
	cases := []struct {
		name                 string
		total, critical      string
		byPriority           []ShutdownGracePeriodByPodPriority
		gateOff, priorityOff bool
		// want are the field paths of the errors, in order.
		want []string
		// wantDetail is a part of the first error.
		wantDetail string
	}{
		{name: "unset", total: "0s", critical: "0s"},
		{name: "eks", total: "2m30s", critical: "30s"},
		{name: "no critical part", total: "30s", critical: "0s"},
		{name: "critical is the whole", total: "30s", critical: "30s"},
		{name: "critical above the whole", total: "30s", critical: "31s",
			want: []string{"shutdownGracePeriodCriticalPods"}, wantDetail: "must be at most shutdownGracePeriod (30s)"},
		{name: "critical without the whole", total: "0s", critical: "10s",
			want: []string{"shutdownGracePeriodCriticalPods"}},
		{name: "under a second", total: "500ms", critical: "0s",
			want: []string{"shutdownGracePeriod"}, wantDetail: "must be 0 or at least 1s"},
		{name: "critical under a second", total: "10s", critical: "100ms",
			want: []string{"shutdownGracePeriodCriticalPods"}},
		{name: "negative", total: "-1s", critical: "0s",
			want: []string{"shutdownGracePeriodCriticalPods", "shutdownGracePeriod"}},
		{name: "without the gate", total: "30s", critical: "10s", gateOff: true,
			want: []string{"shutdownGracePeriod", "shutdownGracePeriodCriticalPods"}, wantDetail: "GracefulNodeShutdown feature gate"},
		{name: "unset without the gate", total: "0s", critical: "0s", gateOff: true},
		{name: "by priority", total: "0s", critical: "0s", byPriority: byPriority},
		{name: "both forms", total: "30s", critical: "0s", byPriority: byPriority,
			want: []string{"shutdownGracePeriodByPodPriority"}, wantDetail: "must be empty when shutdownGracePeriod"},
		{name: "by priority without its gate", total: "0s", critical: "0s", byPriority: byPriority, priorityOff: true,
			want: []string{"shutdownGracePeriodByPodPriority"}, wantDetail: "GracefulNodeShutdownBasedOnPodPriority feature gate"},
		{name: "periods without the priority gate", total: "30s", critical: "10s", priorityOff: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.ShutdownGracePeriod, c.ShutdownGracePeriodCriticalPods = d(tc.total), d(tc.critical)
			c.ShutdownGracePeriodByPodPriority = tc.byPriority
			if errs := Validate(c); len(errs) != 0 {
				t.Fatalf("Validate: %v", errs)
			}
			errs := ValidateShutdown(c, !tc.gateOff, !tc.priorityOff)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("errors on %v, want on %v: %v", got, tc.want, errs)
			}
			if tc.wantDetail != "" && !strings.Contains(errs[0].Error(), tc.wantDetail) {
				t.Errorf("error %q does not say %q", errs[0].Error(), tc.wantDetail)
			}
		})
	}
}
