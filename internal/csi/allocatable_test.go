package csi

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

func TestPlanAllocatableRefresh(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const period = time.Minute
	tests := []struct {
		name       string
		registered bool
		period     time.Duration
		last       time.Time
		exhausted  bool
		want       allocatablePlan
	}{
		{"not registered", false, period, now.Add(-time.Hour), true, allocatablePlan{}},
		{"no period", true, 0, now.Add(-time.Hour), false, allocatablePlan{}},
		{"no period, exhausted", true, 0, now.Add(-time.Hour), true, allocatablePlan{}},
		{"never asked: one period from now", true, period, time.Time{}, false, allocatablePlan{last: now, after: period}},
		{"not due", true, period, now.Add(-20 * time.Second), false, allocatablePlan{last: now.Add(-20 * time.Second), after: 40 * time.Second}},
		{"due", true, period, now.Add(-period), false, allocatablePlan{refresh: true, last: now, after: period}},
		{"overdue", true, period, now.Add(-time.Hour), false, allocatablePlan{refresh: true, last: now, after: period}},
		{"exhausted before due: at once", true, period, now.Add(-time.Second), true, allocatablePlan{refresh: true, last: now, after: period}},
		{"exhausted, never asked", true, period, time.Time{}, true, allocatablePlan{refresh: true, last: now, after: period}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planAllocatableRefresh(tt.registered, tt.period, tt.last, now, tt.exhausted)
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(allocatablePlan{})); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestAllocatablePeriod(t *testing.T) {
	for _, tt := range []struct {
		d    *storagev1.CSIDriver
		want time.Duration
	}{
		{nil, 0},
		{&storagev1.CSIDriver{}, 0},
		{&storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{NodeAllocatableUpdatePeriodSeconds: ptr.To[int64](30)}}, 30 * time.Second},
	} {
		if got := allocatablePeriod(tt.d); got != tt.want {
			t.Errorf("allocatablePeriod(%v) = %v, want %v", tt.d, got, tt.want)
		}
	}
}

func TestResourceExhausted(t *testing.T) {
	va := func(e *storagev1.VolumeError) *storagev1.VolumeAttachment {
		return &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{AttachError: e}}
	}
	for _, tt := range []struct {
		name string
		va   *storagev1.VolumeAttachment
		want bool
	}{
		{"no error", va(nil), false},
		{"error without code", va(&storagev1.VolumeError{Message: "x"}), false},
		{"other code", va(&storagev1.VolumeError{Message: "x", ErrorCode: ptr.To[int32](13)}), false},
		{"ResourceExhausted", va(&storagev1.VolumeError{Message: "x", ErrorCode: ptr.To[int32](8)}), true},
	} {
		if got := resourceExhausted(tt.va); got != tt.want {
			t.Errorf("%s: resourceExhausted = %v, want %v", tt.name, got, tt.want)
		}
	}
}
