package prepuller

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionType is the Node condition the pre-puller reports. It is the
// pre-puller's own: nodelet sets only the kubelet's types and keeps others'.
const ConditionType corev1.NodeConditionType = "ImagesPrePulled"

// Reasons of the ImagesPrePulled condition.
const (
	// ReasonAllImagesPresent: every named image is present (True).
	ReasonAllImagesPresent = "AllImagesPresent"
	// ReasonPullFailed: some named images failed to pull (False).
	ReasonPullFailed = "PullFailed"
	// ReasonInvalidImageName: every valid image is present, but some
	// entries of the annotation are no image reference (False).
	ReasonInvalidImageName = "InvalidImageName"
)

// DesiredCondition is the condition to report for the named images, the
// invalid entries and which images are present (after this round's pulls:
// a missing image is one that failed to pull, now or earlier and backing
// off). Nil when the annotation names nothing: the condition is removed.
// The times are left for WithTimes.
func DesiredCondition(images []string, invalid []InvalidImage, present map[string]bool) *corev1.NodeCondition {
	total := len(images) + len(invalid)
	if total == 0 {
		return nil
	}
	var missing []string
	for _, image := range images {
		if !present[image] {
			missing = append(missing, image)
		}
	}
	var bad []string
	for _, i := range invalid {
		bad = append(bad, i.Image)
	}
	c := &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse}
	switch {
	case len(missing) > 0:
		c.Reason = ReasonPullFailed
		c.Message = fmt.Sprintf("Failed to pull %d of %d %s: %s", len(missing), total, plural(total, "image"), strings.Join(missing, ", "))
		if len(bad) > 0 {
			c.Message += fmt.Sprintf("; invalid image %s: %s", plural(len(bad), "reference"), strings.Join(bad, ", "))
		}
	case len(bad) > 0:
		c.Reason = ReasonInvalidImageName
		c.Message = fmt.Sprintf("%d of %d image %s %s invalid: %s", len(bad), total, plural(total, "reference"), isAre(len(bad)), strings.Join(bad, ", "))
	default:
		c.Status = corev1.ConditionTrue
		c.Reason = ReasonAllImagesPresent
		if total == 1 {
			c.Message = "The image is present"
		} else {
			c.Message = fmt.Sprintf("All %d images are present", total)
		}
	}
	return c
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// FindCondition returns the condition of type t in conds, or nil.
func FindCondition(conds []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// NeedsUpdate says whether the reported condition old (nil when absent)
// must be written to become want (nil to remove it): only a change of
// status, reason or message is written.
func NeedsUpdate(old, want *corev1.NodeCondition) bool {
	if old == nil || want == nil {
		return (old == nil) != (want == nil)
	}
	return old.Status != want.Status || old.Reason != want.Reason || old.Message != want.Message
}

// WithTimes returns want with its heartbeat at now and its transition
// time kept from old when the status did not change.
func WithTimes(want corev1.NodeCondition, old *corev1.NodeCondition, now time.Time) corev1.NodeCondition {
	ts := metav1.NewTime(now).Rfc3339Copy()
	want.LastHeartbeatTime = ts
	want.LastTransitionTime = ts
	if old != nil && old.Status == want.Status {
		want.LastTransitionTime = old.LastTransitionTime
	}
	return want
}

// ConditionPatch is a strategic-merge patch of a Node's status that sets
// c, or removes the condition when c is nil, and touches nothing else:
// conditions merge by type, so the other conditions stay as they are.
func ConditionPatch(c *corev1.NodeCondition) ([]byte, error) {
	var item any = map[string]any{"type": ConditionType, "$patch": "delete"}
	if c != nil {
		item = c
	}
	patch := map[string]any{"status": map[string]any{"conditions": []any{item}}}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s condition patch: %w", ConditionType, err)
	}
	return data, nil
}
