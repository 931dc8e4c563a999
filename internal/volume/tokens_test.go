package volume

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestTokenRefreshAt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name      string
		requested int64
		expires   time.Time
		want      time.Duration
	}{
		{"issued as requested", 3600, now.Add(time.Hour), 48 * time.Minute},
		{"cut to the server's maximum", 48 * 3600, now.Add(time.Hour), 48 * time.Minute},
		{"long-lived token replaced after a day", 7 * 24 * 3600, now.Add(7 * 24 * time.Hour), 24 * time.Hour},
		{"the default stretched to a year by the server", 3607, now.Add(365 * 24 * time.Hour), 2885600 * time.Millisecond},
		{"no expiry in the answer", 600, time.Time{}, 480 * time.Second},
		{"no expiry, long request", 48 * 3600, time.Time{}, 24 * time.Hour},
		{"already expired", 3600, now.Add(-time.Minute), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokenRefreshAt(now, tc.requested, tc.expires).Sub(now); got != tc.want {
				t.Errorf("refresh after %s, want %s", got, tc.want)
			}
		})
	}
}

// A token requested for 48 hours from an API server whose maximum is one
// hour expires after one hour: it is replaced before that, not at 80 % of the
// 48 hours asked for.
func TestTokenCutShortByTheServerIsRefreshedBeforeItExpires(t *testing.T) {
	e := newTestEnv(t)
	e.f.maxTokenSeconds = 3600
	pod := testPod(v1.Volume{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{
			Path: "token", ExpirationSeconds: ptrTo[int64](48 * 3600)}}},
	}}})
	ctx := context.Background()
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	next, ok := e.m.NextRefresh(pod.UID)
	if !ok || !next.Equal(e.clock.Now().Add(48*time.Minute)) {
		t.Fatalf("NextRefresh = %v, %v; want 48m from now (80%% of the hour issued)", next, ok)
	}
	e.clock.Step(50 * time.Minute)
	if err := e.m.Refresh(ctx, pod); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if len(e.f.tokenCalls) != 2 {
		t.Fatalf("token requests after 50 minutes = %v, want a second one before the hour is up", e.f.tokenCalls)
	}
}
