package prepuller

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func TestParseImages(t *testing.T) {
	cases := []struct {
		name        string
		value       string
		want        []string
		wantInvalid []string
	}{
		{name: "absent", value: ""},
		{name: "only separators and blanks", value: " , ,, "},
		{name: "one", value: "busybox", want: []string{"busybox"}},
		{name: "trimmed and in order", value: " reg.example:5000/a/b:1 ,busybox@sha256:" + strings.Repeat("a", 64) + "\n,c",
			want: []string{"reg.example:5000/a/b:1", "busybox@sha256:" + strings.Repeat("a", 64), "c"}},
		{name: "each once", value: "a:1,b,a:1", want: []string{"a:1", "b"}},
		{name: "invalid ones kept apart", value: "UPPER:1, good:2, bad tag:x, a::b",
			want: []string{"good:2"}, wantInvalid: []string{"UPPER:1", "bad tag:x", "a::b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, invalid := ParseImages(tc.value)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
			var names []string
			for _, i := range invalid {
				if i.Reason == "" {
					t.Errorf("invalid %q without a reason", i.Image)
				}
				names = append(names, i.Image)
			}
			if diff := cmp.Diff(tc.wantInvalid, names); diff != "" {
				t.Errorf("invalid (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPullRef(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("0", 64)
	for in, want := range map[string]string{
		"busybox":                   "busybox:latest",
		"busybox:1.35":              "busybox:1.35",
		"127.0.0.1:5000/busybox":    "127.0.0.1:5000/busybox:latest",
		"127.0.0.1:5000/b:1":        "127.0.0.1:5000/b:1",
		"busybox" + digest:          "busybox" + digest,
		"reg:5000/busybox" + digest: "reg:5000/busybox" + digest,
	} {
		if got := pullRef(in); got != want {
			t.Errorf("pullRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOptionsFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    Options
		wantErr string
	}{
		{name: "defaults", want: Options{Interval: DefaultInterval, PullTimeout: DefaultPullTimeout}},
		{name: "empty is unset", env: map[string]string{EnvInterval: ""}, want: Options{Interval: DefaultInterval, PullTimeout: DefaultPullTimeout}},
		{name: "set", env: map[string]string{EnvInterval: "2s", EnvPullTimeout: "90s"}, want: Options{Interval: 2 * time.Second, PullTimeout: 90 * time.Second}},
		{name: "not a duration", env: map[string]string{EnvInterval: "5"}, wantErr: `invalid PREPULL_INTERVAL "5"`},
		{name: "too short", env: map[string]string{EnvInterval: "5ms"}, wantErr: `invalid PREPULL_INTERVAL "5ms": must be at least 1s`},
		{name: "negative timeout", env: map[string]string{EnvPullTimeout: "-1m"}, wantErr: `invalid PREPULL_PULL_TIMEOUT "-1m"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OptionsFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := (Options{}).withDefaults(); got.Interval != DefaultInterval || got.PullTimeout != DefaultPullTimeout {
		t.Fatalf("zero options with defaults: %+v", got)
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func failure(count int, last time.Time, backoff time.Duration) Failure {
	return Failure{Count: count, Last: last, Backoff: metav1.Duration{Duration: backoff}, Message: "m"}
}

func TestRecordFailure(t *testing.T) {
	cases := []struct {
		name string
		old  Failure
		now  time.Time
		want Failure
	}{
		{name: "first", now: t0, want: failure(1, t0, 10*time.Second)},
		{name: "doubles", old: failure(1, t0, 10*time.Second), now: t0.Add(10 * time.Second), want: failure(2, t0.Add(10*time.Second), 20*time.Second)},
		{name: "caps at 300s", old: failure(6, t0, 160*time.Second), now: t0.Add(160 * time.Second), want: failure(7, t0.Add(160*time.Second), 300*time.Second)},
		{name: "stays at 300s", old: failure(7, t0, 300*time.Second), now: t0.Add(300 * time.Second), want: failure(8, t0.Add(300*time.Second), 300*time.Second)},
		{name: "starts over after 2×max quiet", old: failure(7, t0, 300*time.Second), now: t0.Add(601 * time.Second), want: failure(8, t0.Add(601*time.Second), 10*time.Second)},
		{name: "a checkpoint without back-off", old: failure(3, t0, 0), now: t0.Add(time.Second), want: failure(4, t0.Add(time.Second), 10*time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := RecordFailure(tc.old, tc.now, "m")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanPulls(t *testing.T) {
	state := State{Failures: map[string]Failure{
		"waiting": failure(2, t0, 20*time.Second),
		"due":     failure(1, t0.Add(-10*time.Second), 10*time.Second),
		"here":    failure(1, t0, 10*time.Second),
	}}
	cases := []struct {
		name    string
		images  []string
		present map[string]bool
		want    Plan
	}{
		{name: "nothing named", want: Plan{BackingOff: map[string]time.Time{}}},
		{name: "present needs nothing", images: []string{"a"}, present: map[string]bool{"a": true}, want: Plan{BackingOff: map[string]time.Time{}}},
		{name: "missing is pulled", images: []string{"b", "a"}, want: Plan{Pull: []string{"b", "a"}, BackingOff: map[string]time.Time{}}},
		{
			name:    "back-off holds a failed image until it ends",
			images:  []string{"waiting", "due", "here", "new"},
			present: map[string]bool{"here": true},
			want:    Plan{Pull: []string{"due", "new"}, BackingOff: map[string]time.Time{"waiting": t0.Add(20 * time.Second)}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanPulls(tc.images, tc.present, state, t0)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrune(t *testing.T) {
	state := State{Failures: map[string]Failure{"kept": failure(1, t0, InitialBackoff), "gone": failure(1, t0, InitialBackoff), "pulled": failure(1, t0, InitialBackoff)}}
	got, changed := Prune(state, []string{"kept", "pulled"}, map[string]bool{"pulled": true})
	if !changed || len(got.Failures) != 1 || got.Failures["kept"].Count != 1 {
		t.Fatalf("pruned %+v (changed %v), want only kept", got, changed)
	}
	if len(state.Failures) != 3 {
		t.Fatal("Prune changed its input")
	}
	if _, changed := Prune(got, []string{"kept"}, nil); changed {
		t.Fatal("nothing to prune, yet changed")
	}
}

func TestRequeueAfter(t *testing.T) {
	const interval = time.Minute
	cases := []struct {
		name    string
		images  []string
		present map[string]bool
		state   State
		want    time.Duration
	}{
		{name: "nothing named waits for the annotation", want: 0},
		{name: "all present: the interval", images: []string{"a"}, present: map[string]bool{"a": true}, want: interval},
		{name: "a back-off ending sooner", images: []string{"a", "b"}, present: map[string]bool{"a": true},
			state: State{Failures: map[string]Failure{"b": failure(1, t0, 10*time.Second)}}, want: 10 * time.Second},
		{name: "a back-off ending later than the interval", images: []string{"b"},
			state: State{Failures: map[string]Failure{"b": failure(6, t0, 300*time.Second)}}, want: interval},
		{name: "a back-off that ended already: soon, not at once", images: []string{"b"},
			state: State{Failures: map[string]Failure{"b": failure(1, t0.Add(-time.Hour), 10*time.Second)}}, want: time.Second},
		{name: "a stale entry of a present image is no reason", images: []string{"b"}, present: map[string]bool{"b": true},
			state: State{Failures: map[string]Failure{"b": failure(1, t0, 10*time.Second)}}, want: interval},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := RequeueAfter(tc.images, tc.present, tc.state, t0, interval); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDesiredCondition(t *testing.T) {
	invalid := []InvalidImage{{Image: "BAD", Reason: "r"}}
	cases := []struct {
		name    string
		images  []string
		invalid []InvalidImage
		present map[string]bool
		want    *corev1.NodeCondition
	}{
		{name: "nothing named: no condition"},
		{name: "one present", images: []string{"a"}, present: map[string]bool{"a": true},
			want: &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionTrue, Reason: ReasonAllImagesPresent, Message: "The image is present"}},
		{name: "all present", images: []string{"a", "b"}, present: map[string]bool{"a": true, "b": true},
			want: &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionTrue, Reason: ReasonAllImagesPresent, Message: "All 2 images are present"}},
		{name: "one failed", images: []string{"a", "b", "c"}, present: map[string]bool{"a": true, "c": true},
			want: &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonPullFailed, Message: "Failed to pull 1 of 3 images: b"}},
		{name: "failed and invalid", images: []string{"a", "b"}, invalid: invalid, present: map[string]bool{"a": true},
			want: &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonPullFailed, Message: "Failed to pull 1 of 3 images: b; invalid image reference: BAD"}},
		{name: "only invalid missing", images: []string{"a"}, invalid: invalid, present: map[string]bool{"a": true},
			want: &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonInvalidImageName, Message: "1 of 2 image references is invalid: BAD"}},
		{name: "nothing valid", invalid: invalid,
			want: &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonInvalidImageName, Message: "1 of 1 image reference is invalid: BAD"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DesiredCondition(tc.images, tc.invalid, tc.present)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNeedsUpdateAndTimes(t *testing.T) {
	old := &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonPullFailed, Message: "m",
		LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour)), LastHeartbeatTime: metav1.NewTime(t0.Add(-time.Minute))}
	same := old.DeepCopy()
	same.LastHeartbeatTime = metav1.Time{}
	cases := []struct {
		name     string
		old, new *corev1.NodeCondition
		want     bool
	}{
		{name: "both absent", want: false},
		{name: "new", new: same, want: true},
		{name: "removed", old: old, want: true},
		{name: "only times differ", old: old, new: same, want: false},
		{name: "message", old: old, new: &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonPullFailed, Message: "n"}, want: true},
		{name: "status", old: old, new: &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionTrue, Reason: ReasonPullFailed, Message: "m"}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsUpdate(tc.old, tc.new); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}

	now := t0.Add(500 * time.Millisecond)
	kept := WithTimes(corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Message: "other"}, old, now)
	if !kept.LastTransitionTime.Equal(&old.LastTransitionTime) || !kept.LastHeartbeatTime.Time.Equal(t0) {
		t.Errorf("same status: transition %v (want %v), heartbeat %v (want %v, whole seconds)", kept.LastTransitionTime, old.LastTransitionTime, kept.LastHeartbeatTime, t0)
	}
	flipped := WithTimes(corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionTrue}, old, now)
	if !flipped.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("flipped status: transition %v, want %v", flipped.LastTransitionTime, t0)
	}
	fresh := WithTimes(corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionTrue}, nil, now)
	if !fresh.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("new condition: transition %v, want %v", fresh.LastTransitionTime, t0)
	}
}

// TestConditionPatch applies the patch the way the API server does to a
// Node whose status has nodelet's conditions and someone else's: only
// ImagesPrePulled changes.
func TestConditionPatch(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}
	others := corev1.NodeCondition{Type: "SomeoneElses", Status: corev1.ConditionTrue, Reason: "Theirs"}
	node := corev1.Node{Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{ready, others},
		Images:     []corev1.ContainerImage{{Names: []string{"x"}}},
	}}
	apply := func(t *testing.T, node corev1.Node, c *corev1.NodeCondition) corev1.Node {
		t.Helper()
		patch, err := ConditionPatch(c)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := json.Marshal(node)
		if err != nil {
			t.Fatal(err)
		}
		out, err := strategicpatch.StrategicMergePatch(orig, patch, corev1.Node{})
		if err != nil {
			t.Fatalf("applying %s: %v", patch, err)
		}
		var got corev1.Node
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The API server's merge puts a new item first; order means nothing.
	byType := cmpopts.SortSlices(func(a, b corev1.NodeCondition) bool { return a.Type < b.Type })
	mine := corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonPullFailed, Message: "m",
		LastTransitionTime: metav1.NewTime(t0), LastHeartbeatTime: metav1.NewTime(t0)}
	set := apply(t, node, &mine)
	if diff := cmp.Diff([]corev1.NodeCondition{ready, others, mine}, set.Status.Conditions, byType); diff != "" {
		t.Fatalf("after setting (-want +got):\n%s", diff)
	}
	if len(set.Status.Images) != 1 {
		t.Fatalf("the patch touched the images: %+v", set.Status.Images)
	}
	mine.Status, mine.Reason, mine.Message = corev1.ConditionTrue, ReasonAllImagesPresent, "The image is present"
	updated := apply(t, set, &mine)
	if diff := cmp.Diff([]corev1.NodeCondition{ready, others, mine}, updated.Status.Conditions, byType); diff != "" {
		t.Fatalf("after updating (-want +got):\n%s", diff)
	}
	removed := apply(t, updated, nil)
	if diff := cmp.Diff([]corev1.NodeCondition{ready, others}, removed.Status.Conditions, byType); diff != "" {
		t.Fatalf("after removing (-want +got):\n%s", diff)
	}
	if again := apply(t, removed, nil); len(again.Status.Conditions) != 2 {
		t.Fatalf("removing an absent condition: %+v", again.Status.Conditions)
	}
}
