package credentialprovider

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	kubeletconfigv1alpha1 "k8s.io/kubelet/config/v1alpha1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubelet/pkg/apis/credentialprovider/install"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	credentialproviderv1alpha1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1alpha1"
	credentialproviderv1beta1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1beta1"
)

var (
	// scheme knows the config's kubelet.config.k8s.io versions and the
	// plugin protocol's credentialprovider.kubelet.k8s.io versions with their
	// internal types and conversions.
	scheme = runtime.NewScheme()
	// codecs decode strictly, as the kubelet's: unknown or duplicate fields
	// are errors.
	codecs = serializer.NewCodecFactory(scheme, serializer.EnableStrict)

	// pluginAPIVersions are the protocol versions a provider may name in
	// apiVersion, as the kubelet accepts them.
	pluginAPIVersions = map[string]schema.GroupVersion{
		credentialproviderv1alpha1.SchemeGroupVersion.String(): credentialproviderv1alpha1.SchemeGroupVersion,
		credentialproviderv1beta1.SchemeGroupVersion.String():  credentialproviderv1beta1.SchemeGroupVersion,
		credentialproviderv1.SchemeGroupVersion.String():       credentialproviderv1.SchemeGroupVersion,
	}

	validCacheTypes = []string{
		string(kubeletconfigv1.ServiceAccountServiceAccountTokenCacheType),
		string(kubeletconfigv1.TokenServiceAccountTokenCacheType),
	}

	// configExtensions are the files read from a config directory.
	configExtensions = []string{".json", ".yaml", ".yml"}
)

func init() {
	install.Install(scheme)
	utilruntime.Must(kubeletconfigv1.AddToScheme(scheme))
	utilruntime.Must(kubeletconfigv1beta1.AddToScheme(scheme))
	utilruntime.Must(kubeletconfigv1alpha1.AddToScheme(scheme))
}

// LoadConfig reads --image-credential-provider-config: a file, or a
// directory whose *.json, *.yaml and *.yml files are read in name order and
// their providers appended in that order. Each file is a
// CredentialProviderConfig of kubelet.config.k8s.io/v1, v1beta1 or v1alpha1
// (the older ones have no tokenAttributes), decoded strictly. A provider name
// seen twice is an error. The result is not validated: see Validate.
func LoadConfig(path string) (*kubeletconfigv1.CredentialProviderConfig, error) {
	if path == "" {
		return nil, errors.New("credential provider config path is empty")
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading credential provider config: %w", err)
	}
	files := []string{path}
	if info.IsDir() {
		if files, err = configFiles(path); err != nil {
			return nil, err
		}
	}
	merged := &kubeletconfigv1.CredentialProviderConfig{}
	merged.APIVersion = kubeletconfigv1.SchemeGroupVersion.String()
	merged.Kind = "CredentialProviderConfig"
	seen := map[string]string{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading credential provider config: %w", err)
		}
		cfg, err := decodeConfig(data)
		if err != nil {
			return nil, fmt.Errorf("decoding credential provider config %s: %w", file, err)
		}
		for _, p := range cfg.Providers {
			if prev, ok := seen[p.Name]; ok {
				return nil, fmt.Errorf("credential provider config %s: duplicate provider name %q, already in %s", file, p.Name, prev)
			}
			seen[p.Name] = file
			merged.Providers = append(merged.Providers, p)
		}
	}
	return merged, nil
}

// configFiles lists the config files of dir, sorted by name.
func configFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading credential provider config directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && slices.Contains(configExtensions, filepath.Ext(e.Name())) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("credential provider config directory %s holds no *.json, *.yaml or *.yml file", dir)
	}
	slices.Sort(files)
	return files, nil
}

// decodeConfig decodes one file, converting the older versions to v1.
func decodeConfig(data []byte) (*kubeletconfigv1.CredentialProviderConfig, error) {
	obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	switch {
	// These two errors quote the whole file, which may hold secrets in env.
	case runtime.IsMissingVersion(err):
		return nil, errors.New("apiVersion is not set")
	case runtime.IsMissingKind(err):
		return nil, errors.New("kind is not set")
	case err != nil:
		return nil, err
	}
	switch cfg := obj.(type) {
	case *kubeletconfigv1.CredentialProviderConfig:
		return cfg, nil
	case *kubeletconfigv1beta1.CredentialProviderConfig:
		out := &kubeletconfigv1.CredentialProviderConfig{TypeMeta: cfg.TypeMeta}
		for _, p := range cfg.Providers {
			out.Providers = append(out.Providers, kubeletconfigv1.CredentialProvider{
				Name: p.Name, MatchImages: p.MatchImages, DefaultCacheDuration: p.DefaultCacheDuration,
				APIVersion: p.APIVersion, Args: p.Args, Env: envV1(p.Env, func(e kubeletconfigv1beta1.ExecEnvVar) (string, string) { return e.Name, e.Value }),
			})
		}
		return out, nil
	case *kubeletconfigv1alpha1.CredentialProviderConfig:
		out := &kubeletconfigv1.CredentialProviderConfig{TypeMeta: cfg.TypeMeta}
		for _, p := range cfg.Providers {
			out.Providers = append(out.Providers, kubeletconfigv1.CredentialProvider{
				Name: p.Name, MatchImages: p.MatchImages, DefaultCacheDuration: p.DefaultCacheDuration,
				APIVersion: p.APIVersion, Args: p.Args, Env: envV1(p.Env, func(e kubeletconfigv1alpha1.ExecEnvVar) (string, string) { return e.Name, e.Value }),
			})
		}
		return out, nil
	}
	return nil, fmt.Errorf("kind %s of apiVersion %s is not a CredentialProviderConfig", gvk.Kind, gvk.GroupVersion())
}

func envV1[T any](in []T, nameValue func(T) (string, string)) []kubeletconfigv1.ExecEnvVar {
	if in == nil {
		return nil
	}
	out := make([]kubeletconfigv1.ExecEnvVar, 0, len(in))
	for _, e := range in {
		n, v := nameValue(e)
		out = append(out, kubeletconfigv1.ExecEnvVar{Name: n, Value: v})
	}
	return out
}

// Validate checks cfg as the kubelet does before it registers the plugins,
// and that each provider's binary is an executable file in binDir. The
// error lists every problem with its field path, such as
// providers[1].defaultCacheDuration.
func Validate(cfg *kubeletconfigv1.CredentialProviderConfig, binDir string) error {
	if binDir == "" {
		return errors.New("credential provider bin dir is not set")
	}
	return validateConfig(cfg, binDir).ToAggregate()
}

func validateConfig(cfg *kubeletconfigv1.CredentialProviderConfig, binDir string) field.ErrorList {
	root := field.NewPath("providers")
	var errs field.ErrorList
	if len(cfg.Providers) == 0 {
		errs = append(errs, field.Required(root, "at least one provider is required"))
	}
	seen := sets.New[string]()
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		path := root.Index(i)
		nameErrs := validateName(path.Child("name"), p.Name)
		if seen.Has(p.Name) {
			nameErrs = append(nameErrs, field.Duplicate(path.Child("name"), p.Name))
		}
		seen.Insert(p.Name)
		if len(nameErrs) == 0 {
			nameErrs = validateBinary(path.Child("name"), binDir, p.Name)
		}
		errs = append(errs, nameErrs...)
		errs = append(errs, validateProvider(path, p)...)
	}
	return errs
}

// validateName requires a plain file name: the kubelet runs binDir/name.
func validateName(path *field.Path, name string) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "")}
	case strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator):
		return field.ErrorList{field.Invalid(path, name, "provider name cannot contain '/'")}
	case strings.Contains(name, " "):
		return field.ErrorList{field.Invalid(path, name, "provider name cannot contain spaces")}
	case name == "." || name == "..":
		return field.ErrorList{field.Invalid(path, name, "provider name cannot be '.' or '..'")}
	}
	return nil
}

// validateBinary requires binDir/name to be an executable file.
func validateBinary(path *field.Path, binDir, name string) field.ErrorList {
	bin := filepath.Join(binDir, name)
	info, err := os.Stat(bin)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("plugin binary %s: %v", bin, errors.Unwrap(err)))}
	case info.IsDir() || info.Mode().Perm()&0o111 == 0:
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("plugin binary %s is not an executable file", bin))}
	}
	return nil
}

// validateProvider checks everything but the name, as the kubelet does.
func validateProvider(path *field.Path, p *kubeletconfigv1.CredentialProvider) field.ErrorList {
	var errs field.ErrorList
	if p.APIVersion == "" {
		errs = append(errs, field.Required(path.Child("apiVersion"), ""))
	} else if _, ok := pluginAPIVersions[p.APIVersion]; !ok {
		errs = append(errs, field.NotSupported(path.Child("apiVersion"), p.APIVersion, sets.List(sets.KeySet(pluginAPIVersions))))
	}
	if len(p.MatchImages) == 0 {
		errs = append(errs, field.Required(path.Child("matchImages"), "at least one image pattern is required"))
	}
	for i, m := range p.MatchImages {
		if _, err := parseSchemeless(m); err != nil {
			errs = append(errs, field.Invalid(path.Child("matchImages").Index(i), m, fmt.Sprintf("match image is invalid: %v", errors.Unwrap(err))))
		}
	}
	switch {
	case p.DefaultCacheDuration == nil:
		errs = append(errs, field.Required(path.Child("defaultCacheDuration"), ""))
	case p.DefaultCacheDuration.Duration < 0:
		errs = append(errs, field.Invalid(path.Child("defaultCacheDuration"), p.DefaultCacheDuration.Duration.String(), "must be greater than or equal to 0"))
	}
	if p.TokenAttributes != nil {
		errs = append(errs, validateTokenAttributes(path.Child("tokenAttributes"), p.APIVersion, p.TokenAttributes)...)
	}
	return errs
}

func validateTokenAttributes(path *field.Path, apiVersion string, ta *kubeletconfigv1.ServiceAccountTokenAttributes) field.ErrorList {
	var errs field.ErrorList
	if ta.ServiceAccountTokenAudience == "" {
		errs = append(errs, field.Required(path.Child("serviceAccountTokenAudience"), ""))
	}
	if ta.RequireServiceAccount == nil {
		errs = append(errs, field.Required(path.Child("requireServiceAccount"), ""))
	}
	if v1 := credentialproviderv1.SchemeGroupVersion.String(); apiVersion != v1 {
		errs = append(errs, field.Forbidden(path, "tokenAttributes is only supported for "+v1+" API version"))
	}
	if ta.RequireServiceAccount != nil && !*ta.RequireServiceAccount && len(ta.RequiredServiceAccountAnnotationKeys) > 0 {
		errs = append(errs, field.Forbidden(path.Child("requiredServiceAccountAnnotationKeys"), "requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set"))
	}
	errs = append(errs, validateAnnotationKeys(path.Child("requiredServiceAccountAnnotationKeys"), ta.RequiredServiceAccountAnnotationKeys)...)
	errs = append(errs, validateAnnotationKeys(path.Child("optionalServiceAccountAnnotationKeys"), ta.OptionalServiceAccountAnnotationKeys)...)
	both := sets.New(ta.RequiredServiceAccountAnnotationKeys...).Intersection(sets.New(ta.OptionalServiceAccountAnnotationKeys...))
	if both.Len() > 0 {
		errs = append(errs, field.Invalid(path, sets.List(both), "annotation keys cannot be both required and optional"))
	}
	switch {
	case ta.CacheType == "":
		errs = append(errs, field.Required(path.Child("cacheType"), "cacheType is required when tokenAttributes is set; supported values: "+strings.Join(validCacheTypes, ", ")))
	case !slices.Contains(validCacheTypes, string(ta.CacheType)):
		errs = append(errs, field.NotSupported(path.Child("cacheType"), ta.CacheType, validCacheTypes))
	}
	return errs
}

// validateAnnotationKeys requires unique annotation keys, each a qualified
// name in any case, as the API server validates annotation keys.
func validateAnnotationKeys(path *field.Path, keys []string) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, k := range keys {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(path.Index(i), k, msg))
		}
		if seen.Has(k) {
			errs = append(errs, field.Duplicate(path.Index(i), k))
		}
		seen.Insert(k)
	}
	return errs
}
