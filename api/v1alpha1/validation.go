package v1alpha1

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	tracingapi "k8s.io/component-base/tracing/api/v1"
)

// ReservableResources are the resource names SystemReserved and KubeReserved accept.
var ReservableResources = []string{"cpu", "memory", "ephemeral-storage", "pid"}

// EvictionSignals are the signal names EvictionHard accepts.
var EvictionSignals = []string{
	"memory.available", "nodefs.available", "nodefs.inodesFree",
	"imagefs.available", "imagefs.inodesFree", "pid.available",
}

var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// Validate checks a defaulted configuration and returns every problem with
// the path of the field it is in.
func Validate(c *NodeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	p := func(name string) *field.Path { return field.NewPath(name) }

	for _, msg := range validation.IsDNS1123Subdomain(c.NodeName) {
		errs = append(errs, field.Invalid(p("nodeName"), c.NodeName, msg))
	}
	if c.NodeIP != "" && net.ParseIP(c.NodeIP) == nil {
		errs = append(errs, field.Invalid(p("nodeIP"), c.NodeIP, "must be an IP address"))
	}
	errs = append(errs, validatePodCIDR(p("podCIDR"), c.PodCIDR)...)
	errs = append(errs, validateEndpoint(p("containerRuntimeEndpoint"), c.ContainerRuntimeEndpoint)...)
	errs = append(errs, validateEndpoint(p("imageServiceEndpoint"), c.ImageServiceEndpoint)...)
	errs = append(errs, validateAbsPath(p("rootDir"), c.RootDir)...)
	errs = append(errs, validateAbsPath(p("podLogsDir"), c.PodLogsDir)...)
	errs = append(errs, validateAbsPath(p("hostRoot"), c.HostRoot)...)
	if m := c.MaxParallelImagePulls; m != nil {
		switch {
		case *m < 1:
			errs = append(errs, field.Invalid(p("maxParallelImagePulls"), *m, "must be at least 1"))
		case *m > 1 && c.SerializeImagePulls != nil && *c.SerializeImagePulls:
			errs = append(errs, field.Invalid(p("maxParallelImagePulls"), *m, "must be 1 or unset when serializeImagePulls is true"))
		}
	}
	if q := c.RegistryPullQPS; q != nil && *q < 0 {
		errs = append(errs, field.Invalid(p("registryPullQPS"), *q, "must not be negative"))
	}
	if b := c.RegistryBurst; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(p("registryBurst"), *b, "must not be negative"))
	}
	errs = append(errs, validateImagePullVerification(c, p)...)
	errs = append(errs, tracingapi.ValidateTracingConfiguration(c.Tracing, nil, p("tracing"))...)
	if q := c.CPUCFSQuotaPeriod; q != nil && (q.Duration < time.Millisecond || q.Duration > time.Second) {
		errs = append(errs, field.Invalid(p("cpuCFSQuotaPeriod"), q.Duration.String(), "must be between 1ms and 1s, inclusive"))
	}
	if c.MaxPods <= 0 {
		errs = append(errs, field.Invalid(p("maxPods"), c.MaxPods, "must be greater than 0"))
	}
	errs = append(errs, metavalidation.ValidateLabels(c.NodeLabels, p("nodeLabels"))...)
	errs = append(errs, validateTaints(p("registerWithTaints"), c.RegisterWithTaints)...)
	for name, d := range map[string]int64{
		"runtimeRequestTimeout":          int64(c.RuntimeRequestTimeout.Duration),
		"nodeStatusUpdateFrequency":      int64(c.NodeStatusUpdateFrequency.Duration),
		"nodeStatusReportFrequency":      int64(c.NodeStatusReportFrequency.Duration),
		"syncFrequency":                  int64(c.SyncFrequency.Duration),
		"fileCheckFrequency":             int64(c.FileCheckFrequency.Duration),
		"httpCheckFrequency":             int64(c.HTTPCheckFrequency.Duration),
		"relistPeriod":                   int64(c.RelistPeriod.Duration),
		"configMapAndSecretCacheTTL":     int64(c.ConfigMapAndSecretCacheTTL.Duration),
		"streamingConnectionIdleTimeout": int64(c.StreamingConnectionIdleTimeout.Duration),
	} {
		if d <= 0 {
			errs = append(errs, field.Invalid(p(name), fmt.Sprint(d), "must be a positive duration"))
		}
	}
	if d := c.VolumeStatsAggPeriod; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(p("volumeStatsAggPeriod"), d.String(), "must not be negative (0 disables volume stats)"))
	}
	if c.NodeLeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(p("nodeLeaseDurationSeconds"), c.NodeLeaseDurationSeconds, "must be greater than 0"))
	}
	errs = append(errs, validateReserved(p("systemReserved"), c.SystemReserved)...)
	errs = append(errs, validateReserved(p("kubeReserved"), c.KubeReserved)...)
	errs = append(errs, validateEviction(p("evictionHard"), c.EvictionHard)...)
	errs = append(errs, validateHygiene(c)...)
	errs = append(errs, validateMemory(c)...)
	errs = append(errs, validateStaticPods(c)...)
	switch c.ConfigMapAndSecretChangeDetectionStrategy {
	case WatchChangeDetectionStrategy, CacheChangeDetectionStrategy, GetChangeDetectionStrategy:
	default:
		errs = append(errs, field.NotSupported(p("configMapAndSecretChangeDetectionStrategy"),
			c.ConfigMapAndSecretChangeDetectionStrategy,
			[]ChangeDetectionStrategy{WatchChangeDetectionStrategy, CacheChangeDetectionStrategy, GetChangeDetectionStrategy}))
	}
	for i, ip := range c.ClusterDNS {
		if net.ParseIP(ip) == nil {
			errs = append(errs, field.Invalid(p("clusterDNS").Index(i), ip, "must be an IP address"))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.ClusterDomain) {
		errs = append(errs, field.Invalid(p("clusterDomain"), c.ClusterDomain, msg))
	}
	errs = append(errs, validateServer(p("server"), &c.Server)...)
	errs = append(errs, validateBindAddress(p("healthzBindAddress"), c.HealthzBindAddress)...)
	errs = append(errs, validateBindAddress(p("metricsBindAddress"), c.MetricsBindAddress)...)
	if c.KubeAPIQPS != nil && *c.KubeAPIQPS == 0 {
		errs = append(errs, field.Invalid(p("kubeAPIQPS"), *c.KubeAPIQPS,
			"must not be 0 (the client would fall back to 5 requests per second): give a rate, or a negative value for no limit"))
	}
	if c.KubeAPIBurst < 0 {
		errs = append(errs, field.Invalid(p("kubeAPIBurst"), c.KubeAPIBurst, "must not be negative"))
	}
	if d := c.CrashLoopBackOff.MaxContainerRestartPeriod; d != nil && (d.Duration < time.Second || d.Duration > 300*time.Second) {
		errs = append(errs, field.Invalid(p("crashLoopBackOff").Child("maxContainerRestartPeriod"), d.Duration.String(), "must be between 1s and 300s"))
	}
	for i, s := range c.AllowedUnsafeSysctls {
		if msg := validateSysctlPattern(s); msg != "" {
			errs = append(errs, field.Invalid(p("allowedUnsafeSysctls").Index(i), s, msg))
		}
	}
	for i, s := range c.Controllers {
		if strings.TrimPrefix(s, "-") == "" {
			errs = append(errs, field.Invalid(p("controllers").Index(i), s, "must be *, a controller name or -name"))
		}
	}
	return errs
}

// sysctlPattern is a sysctl name with "." or "/" separators, or a prefix of
// one ending in "*".
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*(\*|[a-z0-9]([-_a-z0-9]*[a-z0-9])?\*?)$`)

// namespacedSysctls are the sysctls (a trailing "." marks a prefix) the
// kernel namespaces per pod, so a pod's setting stays in the pod.
var namespacedSysctls = []string{"kernel.shm", "kernel.msg", "kernel.sem", "kernel.domainname", "fs.mqueue.", "net."}

// validateSysctlPattern returns what is wrong with an allowedUnsafeSysctls
// entry, or "".
func validateSysctlPattern(s string) string {
	if len(s) > 253 || !sysctlPattern.MatchString(s) {
		return "must be a sysctl name or a prefix ending in \"*\", at most 253 characters, matching " + sysctlPattern.String()
	}
	name := strings.TrimSuffix(s, "*")
	if i := strings.IndexAny(name, "./"); i >= 0 && name[i] == '/' {
		name = strings.Map(func(r rune) rune {
			switch r {
			case '.':
				return '/'
			case '/':
				return '.'
			}
			return r
		}, name)
	}
	for _, ns := range namespacedSysctls {
		if strings.HasPrefix(name, ns) {
			return ""
		}
	}
	return "is not known to be namespaced: only kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.* and net.* sysctls may be allowed"
}

// validateTaints checks registration taints as the API server checks a
// Node's: a qualified key, a label-value value, a known effect, each key and
// effect pair once; and no timeAdded, which the control plane sets.
func validateTaints(fp *field.Path, taints []corev1.Taint) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range taints {
		tp := fp.Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		if t.Value != "" {
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(tp.Child("value"), t.Value, msg))
			}
		}
		if !slices.Contains(taintEffects, t.Effect) {
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, taintEffects))
		}
		if t.TimeAdded != nil {
			errs = append(errs, field.Forbidden(tp.Child("timeAdded"), "is set by the control plane"))
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			errs = append(errs, field.Duplicate(tp, id))
		}
		seen[id] = true
	}
	return errs
}

func validateEndpoint(fp *field.Path, ep string) field.ErrorList {
	switch {
	case ep == "":
		return field.ErrorList{field.Required(fp, "")}
	case strings.HasPrefix(ep, "unix:///"), strings.HasPrefix(ep, "tcp://"):
		return nil
	}
	return field.ErrorList{field.Invalid(fp, ep, "must be unix:///path or tcp://host:port")}
}

func validateAbsPath(fp *field.Path, path string) field.ErrorList {
	if !filepath.IsAbs(path) {
		return field.ErrorList{field.Invalid(fp, path, "must be an absolute path")}
	}
	return nil
}

func validateReserved(fp *field.Path, m map[string]string) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		if !slices.Contains(ReservableResources, k) {
			errs = append(errs, field.NotSupported(fp.Key(k), k, ReservableResources))
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, field.Invalid(fp.Key(k), v, err.Error()))
		} else if q.Sign() < 0 {
			errs = append(errs, field.Invalid(fp.Key(k), v, "must not be negative"))
		}
	}
	return errs
}

func validateEviction(fp *field.Path, m map[string]string) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		if !slices.Contains(EvictionSignals, k) {
			errs = append(errs, field.NotSupported(fp.Key(k), k, EvictionSignals))
			continue
		}
		if pct, ok := strings.CutSuffix(v, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil || f < 0 || f > 100 {
				errs = append(errs, field.Invalid(fp.Key(k), v, "must be a percentage between 0% and 100%"))
			}
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, field.Invalid(fp.Key(k), v, "must be a quantity or a percentage"))
		} else if q.Sign() < 0 {
			errs = append(errs, field.Invalid(fp.Key(k), v, "must not be negative"))
		}
	}
	return errs
}

func validateServer(fp *field.Path, s *ServerConfig) field.ErrorList {
	var errs field.ErrorList
	if s.Address != "" && net.ParseIP(s.Address) == nil {
		errs = append(errs, field.Invalid(fp.Child("address"), s.Address, "must be an IP address"))
	}
	if s.Port != nil && (*s.Port < 0 || *s.Port > 65535) {
		errs = append(errs, field.Invalid(fp.Child("port"), *s.Port, "must be between 0 and 65535"))
	}
	if s.ReadOnlyPort < 0 || s.ReadOnlyPort > 65535 {
		errs = append(errs, field.Invalid(fp.Child("readOnlyPort"), s.ReadOnlyPort, "must be between 0 and 65535"))
	} else if s.ReadOnlyPort != 0 && s.Port != nil && *s.Port == s.ReadOnlyPort {
		errs = append(errs, field.Invalid(fp.Child("readOnlyPort"), s.ReadOnlyPort, "must differ from port"))
	}
	if (s.TLSCertFile == "") != (s.TLSPrivateKeyFile == "") {
		errs = append(errs, field.Invalid(fp.Child("tlsPrivateKeyFile"), s.TLSPrivateKeyFile,
			"tlsCertFile and tlsPrivateKeyFile must be set together"))
	}
	for _, f := range []struct {
		name string
		path string
	}{{"tlsCertFile", s.TLSCertFile}, {"tlsPrivateKeyFile", s.TLSPrivateKeyFile}, {"clientCAFile", s.ClientCAFile}} {
		if f.path != "" {
			errs = append(errs, validateAbsPath(fp.Child(f.name), f.path)...)
		}
	}
	if _, err := cliflag.TLSCipherSuites(s.TLSCipherSuites); err != nil {
		errs = append(errs, field.Invalid(fp.Child("tlsCipherSuites"), s.TLSCipherSuites, err.Error()))
	}
	if s.TLSMinVersion != "" {
		if _, err := cliflag.TLSVersion(s.TLSMinVersion); err != nil {
			errs = append(errs, field.NotSupported(fp.Child("tlsMinVersion"), s.TLSMinVersion, cliflag.TLSPossibleVersions()))
		}
	}
	for i, c := range s.TLSCurvePreferences {
		if !KnownCurve(c) {
			errs = append(errs, field.Invalid(fp.Child("tlsCurvePreferences").Index(i), c, "not a key exchange Go knows (a tls.CurveID such as 23 for P-256 or 29 for X25519)"))
		}
	}
	if s.IdleTimeout.Duration <= 0 {
		errs = append(errs, field.Invalid(fp.Child("idleTimeout"), s.IdleTimeout.String(), "must be a positive duration"))
	}
	errs = append(errs, validateTTL(fp.Child("webhook", "cacheTTL"), s.Webhook.CacheTTL)...)
	authz := fp.Child("authorization")
	modes := []string{AuthorizationModeWebhook, AuthorizationModeAlwaysAllow}
	if !slices.Contains(modes, s.Authorization.Mode) {
		errs = append(errs, field.NotSupported(authz.Child("mode"), s.Authorization.Mode, modes))
	}
	if s.Anonymous.Enabled && s.Authorization.Mode == AuthorizationModeAlwaysAllow {
		errs = append(errs, field.Forbidden(fp.Child("anonymous", "enabled"),
			"must not be true with authorization mode AlwaysAllow: anyone reaching the port could exec into every pod"))
	}
	errs = append(errs, validateTTL(authz.Child("cacheAuthorizedTTL"), s.Authorization.CacheAuthorizedTTL)...)
	errs = append(errs, validateTTL(authz.Child("cacheUnauthorizedTTL"), s.Authorization.CacheUnauthorizedTTL)...)
	return errs
}

// KnownCurve reports whether id is a tls.CurveID that Go names.
func KnownCurve(id int32) bool {
	return id > 0 && id <= math.MaxUint16 && !strings.HasPrefix(tls.CurveID(id).String(), "CurveID(")
}

// validateTTL checks a cache lifetime, where 0 means no caching.
func validateTTL(fp *field.Path, d *metav1.Duration) field.ErrorList {
	if d != nil && d.Duration < 0 {
		return field.ErrorList{field.Invalid(fp, d.String(), "must not be negative")}
	}
	return nil
}

func validateBindAddress(fp *field.Path, addr string) field.ErrorList {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return field.ErrorList{field.Invalid(fp, addr, "must be host:port or 0")}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return field.ErrorList{field.Invalid(fp, addr, "port must be between 0 and 65535")}
	}
	return nil
}

// validateImagePullVerification checks the image pull credentials
// verification policy and its allowlist as the kubelet does: the list
// only with NeverVerifyAllowlistedImages, each entry an image repository
// without tag or digest, or a prefix ending in "/*".
func validateImagePullVerification(c *NodeletConfiguration, p func(string) *field.Path) field.ErrorList {
	var errs field.ErrorList
	policies := []string{"NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages", "AlwaysVerify"}
	if v := c.ImagePullCredentialsVerificationPolicy; v != "" && !slices.Contains(policies, v) {
		errs = append(errs, field.NotSupported(p("imagePullCredentialsVerificationPolicy"), v, policies))
	}
	list := p("preloadedImagesVerificationAllowlist")
	if len(c.PreloadedImagesVerificationAllowlist) > 0 && c.ImagePullCredentialsVerificationPolicy != "NeverVerifyAllowlistedImages" {
		errs = append(errs, field.Invalid(list, c.PreloadedImagesVerificationAllowlist, "only with imagePullCredentialsVerificationPolicy NeverVerifyAllowlistedImages"))
	}
	for i, pattern := range c.PreloadedImagesVerificationAllowlist {
		if err := validAllowlistPattern(pattern); err != nil {
			errs = append(errs, field.Invalid(list.Index(i), pattern, err.Error()))
		}
	}
	return errs
}

// validAllowlistPattern checks the form of an allowlist entry: the image
// package parses it fully when nodelet starts.
func validAllowlistPattern(pattern string) error {
	switch prefix, wildcard := strings.CutSuffix(pattern, "/*"); {
	case pattern != strings.TrimSpace(pattern):
		return errors.New("leading or trailing spaces")
	case pattern == "":
		return errors.New("empty")
	case wildcard && prefix == "":
		return errors.New("a prefix pattern needs at least a registry host before /*")
	case strings.Contains(prefix, "*"):
		return errors.New("only a trailing /* is allowed as a wildcard")
	case !wildcard && (strings.Contains(pattern, "@") || strings.LastIndex(pattern, ":") > strings.LastIndex(pattern, "/")):
		return errors.New("an image without tag or digest is expected")
	}
	return nil
}
