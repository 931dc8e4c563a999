package agent

import "testing"

func TestEventCacheEntries(t *testing.T) {
	for _, tc := range []struct {
		maxPods int32
		want    int
	}{
		{0, minEventCacheEntries},
		{10, minEventCacheEntries},
		{110, 880},
		{250, 2000},
	} {
		if got := eventCacheEntries(tc.maxPods); got != tc.want {
			t.Errorf("eventCacheEntries(%d) = %d, want %d", tc.maxPods, got, tc.want)
		}
	}
}
