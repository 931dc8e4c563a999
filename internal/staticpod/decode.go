package staticpod

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Values of the kubernetes.io/config.source annotation, as the kubelet sets them.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	SourceAPI  = "api"
)

// The annotations the kubelet puts on static and mirror pods (the values of
// the kubelet's ConfigHashAnnotationKey, ConfigSourceAnnotationKey,
// ConfigFirstSeenAnnotationKey and ConfigMirrorAnnotationKey).
const (
	ConfigHashAnnotationKey      = "kubernetes.io/config.hash"
	ConfigSourceAnnotationKey    = "kubernetes.io/config.source"
	ConfigFirstSeenAnnotationKey = "kubernetes.io/config.seen"
	ConfigMirrorAnnotationKey    = corev1.MirrorPodAnnotationKey
)

// uidLength is how many hex digits of the manifest hash make a static pod's UID.
const uidLength = 32

// Decode reads one manifest (YAML or JSON): a Pod, a PodList or a v1 List of
// pods, and returns the static pods it defines for nodeName, defaulted and
// validated, named as the kubelet names them: "<name>-<nodeName>", namespace
// "default" when empty, spec.nodeName set, a UID that is a hash of the pod,
// the node name and origin (the file path or URL), the config.hash and
// config.source annotations, and status.phase Pending. A UID the manifest
// sets itself is kept, as the kubelet keeps it. Pods from files also
// tolerate every NoExecute taint, as the kubelet's do. Unknown fields are
// ignored; an unknown kind, bad YAML or a pod that fails Validate is an
// error that names origin and, for validation, the field paths.
func Decode(data []byte, source, origin, nodeName string) ([]*corev1.Pod, error) {
	return decode(data, source, origin, origin, nodeName)
}

// decode is Decode with the origin that makes the UIDs apart from the one
// errors name (a URL without its credentials).
func decode(data []byte, source, origin, shown, nodeName string) ([]*corev1.Pod, error) {
	pods, err := decodePods(data, source, origin, nodeName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	return pods, nil
}

func decodePods(data []byte, source, origin, nodeName string) ([]*corev1.Pod, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty manifest")
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parsing manifest: %w", bodyless(err))
	}
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(js, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding manifest: %w", bodyless(err))
	}
	var items []*corev1.Pod
	isList := true
	switch o := obj.(type) {
	case *corev1.Pod:
		items = []*corev1.Pod{o}
		isList = false
	case *corev1.PodList:
		for i := range o.Items {
			items = append(items, &o.Items[i])
		}
	case *corev1.List:
		for i, raw := range o.Items {
			pod, err := decodeListItem(raw)
			if err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			items = append(items, pod)
		}
	default:
		return nil, fmt.Errorf("not a Pod, PodList or List of pods: kind %q", gvk.Kind)
	}

	pods := make([]*corev1.Pod, 0, len(items))
	for i, pod := range items {
		if err := prepare(pod, source, origin, nodeName); err != nil {
			if isList {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			return nil, err
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// decodeListItem decodes one item of a v1 List, which must be a Pod.
func decodeListItem(raw runtime.RawExtension) (*corev1.Pod, error) {
	if raw.Object != nil {
		if pod, ok := raw.Object.(*corev1.Pod); ok {
			return pod, nil
		}
		return nil, fmt.Errorf("not a Pod: %T", raw.Object)
	}
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding item: %w", bodyless(err))
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("not a Pod: kind %q", gvk.Kind)
	}
	return pod, nil
}

// bodyless is a parsing or decoding error without any of the document it
// failed on: a manifest's content (a password in an env value, or a whole
// page a URL answered with) does not go into Events and logs. The decoders
// quote the document whole for a missing kind or version, a map with a
// null key, and a value of the wrong type or tag; such a message is
// replaced by one that keeps only the line, when it has one. A message
// that quotes nothing (the parser's "yaml: line N: ..." and the decoder's
// field paths) is kept.
func bodyless(err error) error {
	switch {
	case runtime.IsMissingKind(err):
		return errors.New("the object has no kind")
	case runtime.IsMissingVersion(err):
		return errors.New("the object has no apiVersion")
	}
	msg := err.Error()
	if len(msg) <= maxDecodeMessage && !strings.ContainsAny(msg, "`'\"\n") && !strings.Contains(msg, "map[") {
		return err
	}
	if m := errorLine.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("not a valid document at line %s (the parser's message quotes the manifest and is left out)", m[1])
	}
	return errors.New("not a valid document (the decoder's message quotes the manifest and is left out)")
}

// maxDecodeMessage is the longest decoding error kept as it is.
const maxDecodeMessage = 256

// errorLine finds the line a parser's message names.
var errorLine = regexp.MustCompile(`\bline (\d+)\b`)

// prepare defaults, names and validates one decoded pod in place.
func prepare(pod *corev1.Pod, source, origin, nodeName string) error {
	// A manifest carries no status and no server-set metadata; drop what a
	// copied "kubectl get -o yaml" would bring so it does not reach the hash
	// or the engine.
	pod.Status = corev1.PodStatus{}
	pod.ResourceVersion = ""
	pod.ManagedFields = nil
	pod.CreationTimestamp = metav1.Time{}
	pod.TypeMeta = metav1.TypeMeta{}

	SetDefaults(pod)
	if pod.UID == "" {
		uid, err := manifestHash(pod, nodeName, origin)
		if err != nil {
			return err
		}
		pod.UID = uid
	}
	if pod.Name == "" {
		return errors.New("metadata.name: Required value: name or generateName is required")
	}
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigHashAnnotationKey] = string(pod.UID)
	pod.Annotations[ConfigSourceAnnotationKey] = source
	if source == SourceFile {
		addNoExecuteToleration(pod)
	}
	pod.Status.Phase = corev1.PodPending
	if errs := Validate(pod); len(errs) > 0 {
		return fmt.Errorf("invalid pod %s: %w", FullName(pod), errs.ToAggregate())
	}
	return nil
}

// manifestHash is the static pod's UID: a hash of the defaulted pod as the
// manifest gives it, the node and where the manifest came from, so the same
// manifest on the same node always gives the same UID and any change a new one.
func manifestHash(pod *corev1.Pod, nodeName, origin string) (types.UID, error) {
	js, err := json.Marshal(pod)
	if err != nil {
		return "", fmt.Errorf("hashing pod: %w", err)
	}
	h := sha256.New()
	h.Write(js)
	h.Write([]byte{0})
	h.Write([]byte(nodeName))
	h.Write([]byte{0})
	h.Write([]byte(origin))
	return types.UID(hex.EncodeToString(h.Sum(nil))[:uidLength]), nil
}

// addNoExecuteToleration makes the pod tolerate every NoExecute taint, unless
// it already does.
func addNoExecuteToleration(pod *corev1.Pod) {
	want := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	for _, t := range pod.Spec.Tolerations {
		if t.Key == "" && t.Operator == corev1.TolerationOpExists && t.Effect == corev1.TaintEffectNoExecute && t.TolerationSeconds == nil {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, want)
}
