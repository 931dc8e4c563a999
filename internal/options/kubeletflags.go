package options

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// flagKind is how a kubelet flag's text becomes its field's JSON value.
type flagKind int

const (
	boolFlag     flagKind = iota
	intFlag               // a JSON number
	stringFlag            // a JSON string
	durationFlag          // a JSON string Go's time.ParseDuration takes
	listFlag              // a comma-separated list: a JSON array of strings
	mapFlag               // key=value,...: a JSON object of strings
	langleFlag            // signal<quantity,...: a JSON object of strings
	rawListFlag           // a value of its own syntax, kept as a one-string array
)

// kubeletFieldFlag is a kubelet flag that sets a KubeletConfiguration
// field (field is the JSON path, dot-separated).
type kubeletFieldFlag struct {
	flag  string
	field string
	kind  flagKind
}

// kubeletFieldFlags are the kubelet's flags for KubeletConfiguration
// fields that nodelet has no flag of its own for. Their values are merged
// over the kubelet configuration (the --config file and --config-dir
// drop-ins), as the kubelet's flags are, and then read as the file's fields
// are (see kubeletFields): mapped, ignored, or refused by name unless at
// the kubelet's default.
var kubeletFieldFlags = []kubeletFieldFlag{
	{"allowed-unsafe-sysctls", "allowedUnsafeSysctls", listFlag},
	{"anonymous-auth", "authentication.anonymous.enabled", boolFlag},
	{"authentication-token-webhook", "authentication.webhook.enabled", boolFlag},
	{"authentication-token-webhook-cache-ttl", "authentication.webhook.cacheTTL", durationFlag},
	{"authorization-mode", "authorization.mode", stringFlag},
	{"authorization-webhook-cache-authorized-ttl", "authorization.webhook.cacheAuthorizedTTL", durationFlag},
	{"authorization-webhook-cache-unauthorized-ttl", "authorization.webhook.cacheUnauthorizedTTL", durationFlag},
	{"cgroups-per-qos", "cgroupsPerQOS", boolFlag},
	{"container-log-max-files", "containerLogMaxFiles", intFlag},
	{"container-log-max-size", "containerLogMaxSize", stringFlag},
	{"contention-profiling", "enableContentionProfiling", boolFlag},
	{"cpu-cfs-quota", "cpuCFSQuota", boolFlag},
	{"cpu-cfs-quota-period", "cpuCFSQuotaPeriod", durationFlag},
	{"cpu-manager-policy", "cpuManagerPolicy", stringFlag},
	{"cpu-manager-policy-options", "cpuManagerPolicyOptions", mapFlag},
	{"cpu-manager-reconcile-period", "cpuManagerReconcilePeriod", durationFlag},
	{"enable-controller-attach-detach", "enableControllerAttachDetach", boolFlag},
	{"enable-debugging-handlers", "enableDebuggingHandlers", boolFlag},
	{"enable-server", "enableServer", boolFlag},
	{"enforce-node-allocatable", "enforceNodeAllocatable", listFlag},
	{"event-burst", "eventBurst", intFlag},
	{"event-qps", "eventRecordQPS", intFlag},
	{"eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", intFlag},
	{"eviction-minimum-reclaim", "evictionMinimumReclaim", mapFlag},
	{"eviction-pressure-transition-period", "evictionPressureTransitionPeriod", durationFlag},
	{"eviction-soft", "evictionSoft", langleFlag},
	{"eviction-soft-grace-period", "evictionSoftGracePeriod", mapFlag},
	{"fail-cgroupv1", "failCgroupV1", boolFlag},
	{"file-check-frequency", "fileCheckFrequency", durationFlag},
	{"hairpin-mode", "hairpinMode", stringFlag},
	{"http-check-frequency", "httpCheckFrequency", durationFlag},
	{"kernel-memcg-notification", "kernelMemcgNotification", boolFlag},
	{"kube-api-burst", "kubeAPIBurst", intFlag},
	{"kube-api-content-type", "contentType", stringFlag},
	{"kube-api-qps", "kubeAPIQPS", intFlag},
	{"kube-reserved", "kubeReserved", mapFlag},
	{"kube-reserved-cgroup", "kubeReservedCgroup", stringFlag},
	{"kubelet-cgroups", "kubeletCgroups", stringFlag},
	{"local-storage-capacity-isolation", "localStorageCapacityIsolation", boolFlag},
	{"make-iptables-util-chains", "makeIPTablesUtilChains", boolFlag},
	{"max-open-files", "maxOpenFiles", intFlag},
	{"memory-manager-policy", "memoryManagerPolicy", stringFlag},
	{"minimum-image-ttl-duration", "imageMinimumGCAge", durationFlag},
	{"node-status-max-images", "nodeStatusMaxImages", intFlag},
	{"oom-score-adj", "oomScoreAdj", intFlag},
	{"pod-max-pids", "podPidsLimit", intFlag},
	{"pods-per-core", "podsPerCore", intFlag},
	{"protect-kernel-defaults", "protectKernelDefaults", boolFlag},
	{"qos-reserved", "qosReserved", mapFlag},
	{"read-only-port", "readOnlyPort", intFlag},
	{"register-node", "registerNode", boolFlag},
	{"reserved-cpus", "reservedSystemCPUs", stringFlag},
	{"reserved-memory", "reservedMemory", rawListFlag},
	{"rotate-certificates", "rotateCertificates", boolFlag},
	{"rotate-server-certificates", "serverTLSBootstrap", boolFlag},
	{"runonce", "runOnce", boolFlag},
	{"streaming-connection-idle-timeout", "streamingConnectionIdleTimeout", durationFlag},
	{"sync-frequency", "syncFrequency", durationFlag},
	{"system-cgroups", "systemCgroups", stringFlag},
	{"system-reserved", "systemReserved", mapFlag},
	{"system-reserved-cgroup", "systemReservedCgroup", stringFlag},
	{"topology-manager-policy", "topologyManagerPolicy", stringFlag},
	{"topology-manager-policy-options", "topologyManagerPolicyOptions", mapFlag},
	{"topology-manager-scope", "topologyManagerScope", stringFlag},
	{"volume-plugin-dir", "volumePluginDir", stringFlag},
	{"volume-stats-agg-period", "volumeStatsAggPeriod", durationFlag},
}

// ignoredKubeletFlags are the kubelet's flags that no configuration field
// holds and that change nothing a pod or a user sees on nodelet: accepted,
// with a warning saying so.
var ignoredKubeletFlags = map[string]string{
	"runtime-cgroups":                          "the runtime's cgroup is its unit's; nodelet does not report it as a system container",
	"experimental-mounter-path":                "volumes are mounted with the host's mount",
	"exit-on-lock-contention":                  "nodelet takes no lock file",
	"lock-file":                                "nodelet takes no lock file",
	"experimental-allocatable-ignore-eviction": "allocatable always leaves out the hard eviction thresholds",
	"housekeeping-interval":                    "container stats come from the runtime, not cAdvisor",
	"maximum-dead-containers":                  "dead containers are removed by nodelet's own garbage collection",
	"maximum-dead-containers-per-container":    "dead containers are removed by nodelet's own garbage collection",
	"minimum-container-ttl-duration":           "dead containers are removed by nodelet's own garbage collection",
}

// kubeletOverlay collects the kubelet flags of kubeletFieldFlags that were
// set, as a KubeletConfiguration fragment, and the warnings of
// ignoredKubeletFlags.
type kubeletOverlay struct {
	fields   map[string]any
	flags    map[string]string // field path -> flag, for errors
	warnings []string
}

func newKubeletOverlay() *kubeletOverlay {
	return &kubeletOverlay{fields: map[string]any{}, flags: map[string]string{}}
}

func (o *kubeletOverlay) empty() bool { return len(o.fields) == 0 }

// addFlags registers kubeletFieldFlags and ignoredKubeletFlags on fs.
func (o *kubeletOverlay) addFlags(flags *pflag.FlagSet) {
	for _, f := range kubeletFieldFlags {
		flags.Var(&overlayValue{o: o, f: f}, f.flag, fmt.Sprintf("The kubelet's flag for its configuration field %s; see docs/kubeadm.md for what nodelet does with it.", f.field))
		if f.kind == boolFlag {
			flags.Lookup(f.flag).NoOptDefVal = "true"
		}
	}
	names := make([]string, 0, len(ignoredKubeletFlags))
	for name := range ignoredKubeletFlags {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		flags.Var(&ignoredValue{o: o, name: name}, name, "Accepted for the kubelet's command line; nodelet ignores it: "+ignoredKubeletFlags[name]+".")
	}
}

// overlayValue is one kubelet field flag.
type overlayValue struct {
	o   *kubeletOverlay
	f   kubeletFieldFlag
	set string
}

func (v *overlayValue) String() string { return v.set }
func (v *overlayValue) Type() string {
	switch v.f.kind {
	case boolFlag:
		return "bool"
	case intFlag:
		return "int"
	case durationFlag:
		return "duration"
	case listFlag:
		return "strings"
	case mapFlag, langleFlag:
		return "mapStringString"
	}
	return "string"
}

func (v *overlayValue) Set(s string) error {
	val, err := flagJSON(v.f.kind, s)
	if err != nil {
		return err
	}
	v.set = s
	setPath(v.o.fields, strings.Split(v.f.field, "."), val)
	v.o.flags[v.f.field] = v.f.flag
	return nil
}

// ignoredValue is one of ignoredKubeletFlags.
type ignoredValue struct {
	o    *kubeletOverlay
	name string
	set  string
}

func (v *ignoredValue) String() string { return v.set }
func (v *ignoredValue) Type() string   { return "string" }
func (v *ignoredValue) Set(s string) error {
	v.set = s
	v.o.warnings = append(v.o.warnings, fmt.Sprintf("kubelet flag --%s=%s is ignored: %s", v.name, s, ignoredKubeletFlags[v.name]))
	return nil
}

// flagJSON converts a flag's text to its field's JSON value.
func flagJSON(kind flagKind, s string) (any, error) {
	switch kind {
	case boolFlag:
		return strconv.ParseBool(s)
	case intFlag:
		return strconv.ParseInt(s, 10, 64)
	case durationFlag:
		if _, err := time.ParseDuration(s); err != nil {
			return nil, err
		}
		return s, nil
	case listFlag:
		out := []any{}
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out, nil
	case mapFlag, langleFlag:
		sep := "="
		if kind == langleFlag {
			sep = "<"
		}
		out := map[string]any{}
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			k, val, ok := strings.Cut(part, sep)
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("%q: want key%svalue", part, sep)
			}
			out[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
		return out, nil
	case rawListFlag:
		return []any{s}, nil
	}
	return s, nil
}

// setPath sets m[path[0]][path[1]]... to v, making the objects between.
func setPath(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// check refuses, naming the flag, a kubelet field flag set to a value
// nodelet cannot honour.
func (o *kubeletOverlay) check() error {
	if o.empty() {
		return nil
	}
	raw := map[string]json.RawMessage{}
	for name, v := range o.fields {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		raw[name] = b
	}
	if err := checkKubeletFields(raw); err != nil {
		var fe *refusedFieldError
		if errors.As(err, &fe) {
			if flag, ok := o.flags[fe.name]; ok {
				return fmt.Errorf("kubelet flag --%s: %w", flag, err)
			}
		}
		return err
	}
	return nil
}

func (o *kubeletOverlay) json() ([]byte, error) { return json.Marshal(o.fields) }

// kubeletConfigHeader is an empty KubeletConfiguration.
var kubeletConfigHeader = []byte(`{"apiVersion":"` + KubeletConfigGroupVersion + `","kind":"` + KubeletConfigKind + `"}`)

// dropInExtension is the kubelet's: only files ending in it are read from
// --config-dir.
const dropInExtension = ".conf"

// mergeDropIns merges the KubeletConfiguration drop-ins of dir, every file
// ending in .conf below it in lexical order of their paths, over base, a
// KubeletConfiguration as JSON, as the kubelet does (a JSON merge patch
// each: later files win, objects merge, lists are replaced).
func mergeDropIns(base []byte, dir string) ([]byte, error) {
	if dir == "" {
		return base, nil
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(d.Name()) != dropInExtension {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		patch, err := yaml.YAMLToJSON(data)
		if err != nil {
			return fmt.Errorf("drop-in %s: %w", path, err)
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(patch, &tm); err != nil {
			return fmt.Errorf("drop-in %s: %w", path, err)
		}
		if tm.APIVersion != KubeletConfigGroupVersion || tm.Kind != KubeletConfigKind {
			return fmt.Errorf("drop-in %s: apiVersion %q and kind %q, want %s and %s", path, tm.APIVersion, tm.Kind, KubeletConfigGroupVersion, KubeletConfigKind)
		}
		if base, err = jsonpatch.MergePatch(base, patch); err != nil {
			return fmt.Errorf("drop-in %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--config-dir: %w", err)
	}
	return base, nil
}

// loadConfigs reads the configuration the way the kubelet does when the
// configuration is the kubelet's: the --config file, then the --config-dir
// drop-ins merged over it, then the kubelet field flags merged over them,
// decoded as one KubeletConfiguration. A NodeletConfiguration file takes
// no drop-ins; kubelet field flags are applied over it field by field.
// With none of the three, the configuration is empty (defaults).
func loadConfigs(file, dir string, ov *kubeletOverlay) (*v1alpha1.NodeletConfiguration, []string, error) {
	var base []byte
	if file != "" {
		data, isKubelet, err := readConfigFile(file)
		if err != nil {
			return nil, nil, err
		}
		if !isKubelet {
			if dir != "" {
				return nil, nil, fmt.Errorf("--config-dir takes KubeletConfiguration drop-ins, but --config %s is a NodeletConfiguration", file)
			}
			cfg, err := Decode(data)
			if err != nil {
				return nil, nil, fmt.Errorf("decoding config file %s: %w", file, err)
			}
			if err := overlayNodelet(cfg, ov); err != nil {
				return nil, nil, err
			}
			return cfg, ov.warnings, nil
		}
		if base, err = yaml.YAMLToJSON(data); err != nil {
			return nil, nil, fmt.Errorf("decoding config file %s: %w", file, err)
		}
	}
	if base == nil {
		if dir == "" && ov.empty() {
			return &v1alpha1.NodeletConfiguration{}, ov.warnings, nil
		}
		base = kubeletConfigHeader
	}
	merged, err := mergeDropIns(base, dir)
	if err != nil {
		return nil, nil, err
	}
	if err := ov.check(); err != nil {
		return nil, nil, err
	}
	patch, err := ov.json()
	if err != nil {
		return nil, nil, err
	}
	if merged, err = jsonpatch.MergePatch(merged, patch); err != nil {
		return nil, nil, fmt.Errorf("kubelet flags: %w", err)
	}
	cfg, warnings, err := DecodeKubelet(merged)
	if err != nil {
		what := "config file " + file
		if file == "" || dir != "" {
			what = "kubelet configuration (--config, --config-dir and kubelet flags)"
		}
		return nil, nil, fmt.Errorf("decoding %s: %w", what, err)
	}
	return cfg, append(warnings, ov.warnings...), nil
}

// overlayNodelet applies the kubelet field flags to a NodeletConfiguration:
// the fields their mapping changes from that of an empty KubeletConfiguration
// are merged over cfg.
func overlayNodelet(cfg *v1alpha1.NodeletConfiguration, ov *kubeletOverlay) error {
	if ov.empty() {
		return nil
	}
	if err := ov.check(); err != nil {
		return err
	}
	patch, err := ov.json()
	if err != nil {
		return err
	}
	withFlags, err := jsonpatch.MergePatch(kubeletConfigHeader, patch)
	if err != nil {
		return fmt.Errorf("kubelet flags: %w", err)
	}
	empty, _, err := DecodeKubelet(kubeletConfigHeader)
	if err != nil {
		return err
	}
	flagged, _, err := DecodeKubelet(withFlags)
	if err != nil {
		return fmt.Errorf("kubelet flags: %w", err)
	}
	emptyJSON, err := json.Marshal(empty)
	if err != nil {
		return err
	}
	flaggedJSON, err := json.Marshal(flagged)
	if err != nil {
		return err
	}
	diff, err := jsonpatch.CreateMergePatch(emptyJSON, flaggedJSON)
	if err != nil {
		return err
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	out, err := jsonpatch.MergePatch(cfgJSON, diff)
	if err != nil {
		return err
	}
	*cfg = v1alpha1.NodeletConfiguration{}
	return json.Unmarshal(out, cfg)
}
