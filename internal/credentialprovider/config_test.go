package credentialprovider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/ptr"
)

const ecrConfigV1 = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: ecr-credential-provider
  matchImages:
  - "*.dkr.ecr.*.amazonaws.com"
  - "*.dkr.ecr.*.amazonaws.com.cn"
  defaultCacheDuration: 12h
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [get-credentials]
  env:
  - name: AWS_PROFILE
    value: node
`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func providerNamed(name string) string {
	return `- name: ` + name + `
  matchImages: ["` + name + `.example.com"]
  defaultCacheDuration: 1m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
`
}

func configOf(providers ...string) string {
	return "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n" + strings.Join(providers, "")
}

func names(cfg *kubeletconfigv1.CredentialProviderConfig) []string {
	var out []string
	for _, p := range cfg.Providers {
		out = append(out, p.Name)
	}
	return out
}

func TestLoadConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		path  string // under the files' directory; "" is the directory
		want  []string
		err   string
	}{
		{name: "v1 yaml file", files: map[string]string{"c.yaml": ecrConfigV1}, path: "c.yaml", want: []string{"ecr-credential-provider"}},
		{
			name: "v1 json file",
			files: map[string]string{"c.json": `{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[
				{"name":"acr-credential-provider","matchImages":["*.azurecr.io"],"defaultCacheDuration":"10m","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}`},
			path: "c.json", want: []string{"acr-credential-provider"},
		},
		{
			name:  "v1beta1 file",
			files: map[string]string{"c.yaml": strings.Replace(configOf(providerNamed("a")), "kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1", 1)},
			path:  "c.yaml", want: []string{"a"},
		},
		{
			name:  "v1alpha1 file",
			files: map[string]string{"c.yaml": strings.Replace(configOf(providerNamed("a")), "kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1alpha1", 1)},
			path:  "c.yaml", want: []string{"a"},
		},
		{
			name: "directory merged in name order, other files ignored",
			files: map[string]string{
				"20-b.yaml":      configOf(providerNamed("b"), providerNamed("c")),
				"10-a.json":      configOf(providerNamed("a")),
				"30-d.yml":       configOf(providerNamed("d")),
				"README.md":      "not a config",
				"sub/e.yaml":     configOf(providerNamed("e")),
				"40-f.yaml.save": configOf(providerNamed("f")),
			},
			want: []string{"a", "b", "c", "d"},
		},
		{
			name:  "duplicate name across files",
			files: map[string]string{"a.yaml": configOf(providerNamed("a")), "b.yaml": configOf(providerNamed("a"))},
			err:   `b.yaml: duplicate provider name "a", already in`,
		},
		{
			name:  "duplicate name in one file",
			files: map[string]string{"a.yaml": configOf(providerNamed("a"), providerNamed("a"))},
			path:  "a.yaml", err: `duplicate provider name "a"`,
		},
		{name: "empty directory", files: map[string]string{"README": "x"}, err: "holds no *.json, *.yaml or *.yml file"},
		{name: "missing file", files: map[string]string{}, path: "nope.yaml", err: "no such file or directory"},
		{
			name:  "unknown apiVersion",
			files: map[string]string{"c.yaml": strings.Replace(configOf(providerNamed("a")), "kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v2", 1)},
			path:  "c.yaml", err: `"kubelet.config.k8s.io/v2"`,
		},
		{
			name:  "unknown field",
			files: map[string]string{"c.yaml": configOf(providerNamed("a") + "  cacheSize: 3\n")},
			path:  "c.yaml", err: `unknown field "providers[0].cacheSize"`,
		},
		{
			name:  "tokenAttributes in v1beta1",
			files: map[string]string{"c.yaml": strings.Replace(configOf(providerNamed("a")+"  tokenAttributes: {serviceAccountTokenAudience: x}\n"), "kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1", 1)},
			path:  "c.yaml", err: `unknown field "providers[0].tokenAttributes"`,
		},
		{
			name:  "no kind, the file is not quoted",
			files: map[string]string{"c.yaml": "apiVersion: kubelet.config.k8s.io/v1\nproviders:\n- name: a\n  env: [{name: TOKEN, value: hunter2}]\n"},
			path:  "c.yaml", err: "c.yaml: kind is not set",
		},
		{
			name:  "no apiVersion",
			files: map[string]string{"c.yaml": "kind: CredentialProviderConfig\n"},
			path:  "c.yaml", err: "c.yaml: apiVersion is not set",
		},
		{
			name:  "another kind",
			files: map[string]string{"c.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"},
			path:  "c.yaml", err: "kind KubeletConfiguration of apiVersion kubelet.config.k8s.io/v1beta1 is not a CredentialProviderConfig",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			cfg, err := LoadConfig(filepath.Join(dir, tc.path))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error %q quotes an env value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, names(cfg)); diff != "" {
				t.Errorf("providers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfigFields(t *testing.T) {
	dir := writeFiles(t, map[string]string{"c.yaml": ecrConfigV1})
	cfg, err := LoadConfig(filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []kubeletconfigv1.CredentialProvider{{
		Name:                 "ecr-credential-provider",
		MatchImages:          []string{"*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn"},
		DefaultCacheDuration: &metav1.Duration{Duration: 12 * time.Hour},
		APIVersion:           "credentialprovider.kubelet.k8s.io/v1",
		Args:                 []string{"get-credentials"},
		Env:                  []kubeletconfigv1.ExecEnvVar{{Name: "AWS_PROFILE", Value: "node"}},
	}}
	if diff := cmp.Diff(want, cfg.Providers); diff != "" {
		t.Errorf("providers (-want +got):\n%s", diff)
	}
}

func TestLoadConfigEmptyPath(t *testing.T) {
	if _, err := LoadConfig(""); err == nil {
		t.Fatal("no error for an empty path")
	}
}

// validProvider returns a provider that passes validation in the bin dir of
// TestValidate.
func validProvider() kubeletconfigv1.CredentialProvider {
	return kubeletconfigv1.CredentialProvider{
		Name:                 "plugin",
		MatchImages:          []string{"*.registry.io", "registry.io:8080/path"},
		DefaultCacheDuration: &metav1.Duration{Duration: time.Minute},
		APIVersion:           "credentialprovider.kubelet.k8s.io/v1",
	}
}

func validTokenAttributes() *kubeletconfigv1.ServiceAccountTokenAttributes {
	return &kubeletconfigv1.ServiceAccountTokenAttributes{
		ServiceAccountTokenAudience:          "registry.io",
		CacheType:                            kubeletconfigv1.ServiceAccountServiceAccountTokenCacheType,
		RequireServiceAccount:                ptr.To(true),
		RequiredServiceAccountAnnotationKeys: []string{"example.com/role"},
		OptionalServiceAccountAnnotationKeys: []string{"example.com/region"},
	}
}

func TestValidate(t *testing.T) {
	binDir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"plugin": 0o755, "other": 0o700, "noexec": 0o644} {
		if err := os.WriteFile(filepath.Join(binDir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(binDir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	with := func(mod func(p *kubeletconfigv1.CredentialProvider)) []kubeletconfigv1.CredentialProvider {
		p := validProvider()
		mod(&p)
		return []kubeletconfigv1.CredentialProvider{p}
	}
	withTokens := func(mod func(ta *kubeletconfigv1.ServiceAccountTokenAttributes)) []kubeletconfigv1.CredentialProvider {
		return with(func(p *kubeletconfigv1.CredentialProvider) {
			p.TokenAttributes = validTokenAttributes()
			mod(p.TokenAttributes)
		})
	}
	for _, tc := range []struct {
		name      string
		providers []kubeletconfigv1.CredentialProvider
		errs      []string // each a substring of the error; none: valid
	}{
		{name: "valid", providers: with(func(*kubeletconfigv1.CredentialProvider) {})},
		{name: "valid with token attributes", providers: withTokens(func(*kubeletconfigv1.ServiceAccountTokenAttributes) {})},
		{
			name: "valid older apiVersions",
			providers: append(
				with(func(p *kubeletconfigv1.CredentialProvider) {
					p.APIVersion = "credentialprovider.kubelet.k8s.io/v1beta1"
				}),
				kubeletconfigv1.CredentialProvider{
					Name: "other", MatchImages: []string{"gcr.io"}, DefaultCacheDuration: &metav1.Duration{},
					APIVersion: "credentialprovider.kubelet.k8s.io/v1alpha1",
				}),
		},
		{name: "no providers", errs: []string{"providers: Required value"}},
		{name: "empty name", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.Name = "" }), errs: []string{"providers[0].name: Required value"}},
		{name: "name with slash", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.Name = "../plugin" }), errs: []string{`providers[0].name: Invalid value: "../plugin": provider name cannot contain '/'`}},
		{name: "name with space", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.Name = "my plugin" }), errs: []string{"provider name cannot contain spaces"}},
		{name: "name dot", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.Name = "." }), errs: []string{"provider name cannot be '.' or '..'"}},
		{name: "name dot dot", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.Name = ".." }), errs: []string{"provider name cannot be '.' or '..'"}},
		{name: "binary missing", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.Name = "missing" }), errs: []string{`providers[0].name: Invalid value: "missing": plugin binary ` + filepath.Join(binDir, "missing") + ": no such file or directory"}},
		{name: "binary not executable", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.Name = "noexec" }), errs: []string{"plugin binary " + filepath.Join(binDir, "noexec") + " is not an executable file"}},
		{name: "binary a directory", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.Name = "adir" }), errs: []string{"is not an executable file"}},
		{
			name:      "duplicate name",
			providers: append(with(func(*kubeletconfigv1.CredentialProvider) {}), validProvider()),
			errs:      []string{`providers[1].name: Duplicate value: "plugin"`},
		},
		{name: "no apiVersion", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.APIVersion = "" }), errs: []string{"providers[0].apiVersion: Required value"}},
		{
			name:      "unsupported apiVersion",
			providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.APIVersion = "credentialprovider.kubelet.k8s.io/v2" }),
			errs:      []string{`providers[0].apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v2": supported values: "credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1alpha1", "credentialprovider.kubelet.k8s.io/v1beta1"`},
		},
		{name: "no matchImages", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.MatchImages = nil }), errs: []string{"providers[0].matchImages: Required value"}},
		{
			name: "invalid matchImages",
			providers: with(func(p *kubeletconfigv1.CredentialProvider) {
				p.MatchImages = []string{"gcr.io", "%invalid", "registry.io:port"}
			}),
			errs: []string{`providers[0].matchImages[1]: Invalid value: "%invalid": match image is invalid: invalid URL escape`, `providers[0].matchImages[2]: Invalid value: "registry.io:port": match image is invalid: invalid port`},
		},
		{name: "no defaultCacheDuration", providers: with(func(p *kubeletconfigv1.CredentialProvider) { p.DefaultCacheDuration = nil }), errs: []string{"providers[0].defaultCacheDuration: Required value"}},
		{
			name: "negative defaultCacheDuration",
			providers: with(func(p *kubeletconfigv1.CredentialProvider) {
				p.DefaultCacheDuration = &metav1.Duration{Duration: -time.Second}
			}),
			errs: []string{`providers[0].defaultCacheDuration: Invalid value: "-1s": must be greater than or equal to 0`},
		},
		{
			name:      "token attributes without audience",
			providers: withTokens(func(ta *kubeletconfigv1.ServiceAccountTokenAttributes) { ta.ServiceAccountTokenAudience = "" }),
			errs:      []string{"providers[0].tokenAttributes.serviceAccountTokenAudience: Required value"},
		},
		{
			name:      "token attributes without requireServiceAccount",
			providers: withTokens(func(ta *kubeletconfigv1.ServiceAccountTokenAttributes) { ta.RequireServiceAccount = nil }),
			errs:      []string{"providers[0].tokenAttributes.requireServiceAccount: Required value"},
		},
		{
			name: "token attributes with apiVersion v1beta1",
			providers: with(func(p *kubeletconfigv1.CredentialProvider) {
				p.APIVersion = "credentialprovider.kubelet.k8s.io/v1beta1"
				p.TokenAttributes = validTokenAttributes()
			}),
			errs: []string{"providers[0].tokenAttributes: Forbidden: tokenAttributes is only supported for credentialprovider.kubelet.k8s.io/v1 API version"},
		},
		{
			name:      "required annotations without requireServiceAccount",
			providers: withTokens(func(ta *kubeletconfigv1.ServiceAccountTokenAttributes) { ta.RequireServiceAccount = ptr.To(false) }),
			errs:      []string{"providers[0].tokenAttributes.requiredServiceAccountAnnotationKeys: Forbidden: requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set"},
		},
		{
			name: "optional annotations without requireServiceAccount",
			providers: withTokens(func(ta *kubeletconfigv1.ServiceAccountTokenAttributes) {
				ta.RequireServiceAccount = ptr.To(false)
				ta.RequiredServiceAccountAnnotationKeys = nil
			}),
		},
		{
			name: "invalid and duplicate annotation keys",
			providers: withTokens(func(ta *kubeletconfigv1.ServiceAccountTokenAttributes) {
				ta.RequiredServiceAccountAnnotationKeys = []string{"Example.com/Role", "bad key", "Example.com/Role"}
				ta.OptionalServiceAccountAnnotationKeys = []string{"example.com/"}
			}),
			errs: []string{
				`providers[0].tokenAttributes.requiredServiceAccountAnnotationKeys[1]: Invalid value: "bad key"`,
				`providers[0].tokenAttributes.requiredServiceAccountAnnotationKeys[2]: Duplicate value: "Example.com/Role"`,
				`providers[0].tokenAttributes.optionalServiceAccountAnnotationKeys[0]: Invalid value: "example.com/"`,
			},
		},
		{
			name: "annotation key both required and optional",
			providers: withTokens(func(ta *kubeletconfigv1.ServiceAccountTokenAttributes) {
				ta.OptionalServiceAccountAnnotationKeys = []string{"example.com/role"}
			}),
			errs: []string{`providers[0].tokenAttributes: Invalid value: ["example.com/role"]: annotation keys cannot be both required and optional`},
		},
		{
			name:      "no cacheType",
			providers: withTokens(func(ta *kubeletconfigv1.ServiceAccountTokenAttributes) { ta.CacheType = "" }),
			errs:      []string{"providers[0].tokenAttributes.cacheType: Required value: cacheType is required when tokenAttributes is set; supported values: ServiceAccount, Token"},
		},
		{
			name:      "unsupported cacheType",
			providers: withTokens(func(ta *kubeletconfigv1.ServiceAccountTokenAttributes) { ta.CacheType = "Pod" }),
			errs:      []string{`providers[0].tokenAttributes.cacheType: Unsupported value: "Pod": supported values: "ServiceAccount", "Token"`},
		},
		{
			name: "every error of the second provider",
			providers: append(with(func(*kubeletconfigv1.CredentialProvider) {}), kubeletconfigv1.CredentialProvider{
				Name: "other", DefaultCacheDuration: &metav1.Duration{Duration: -time.Minute},
			}),
			errs: []string{"providers[1].apiVersion: Required value", "providers[1].matchImages: Required value", "providers[1].defaultCacheDuration: Invalid value"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(&kubeletconfigv1.CredentialProviderConfig{Providers: tc.providers}, binDir)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.errs)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestValidateNeedsBinDir(t *testing.T) {
	p := validProvider()
	if err := Validate(&kubeletconfigv1.CredentialProviderConfig{Providers: []kubeletconfigv1.CredentialProvider{p}}, ""); err == nil {
		t.Fatal("no error without a bin dir")
	}
}
