package images

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// dockerHubHost is how Docker Hub is named for matching; config files name
// it index.docker.io, image references docker.io.
const dockerHubHost = "docker.io"

// Credential is one registry credential from an image pull secret. Only
// the registry key and the secret it came from are exported, so a
// Credential can be logged without leaking the secret itself.
type Credential struct {
	// Registry is the normalized config key it was stored under:
	// host[:port][/path], where host may hold glob patterns.
	Registry string
	// Source is the namespace/name of the Secret.
	Source string

	auth *runtimeapi.AuthConfig
	// secret is where a pull secret's credential came from, with the
	// credential's hash; serviceAccount is whose token a credential
	// provider plugin took for it. Neither: a credential of the node's.
	secret         *kubeletv1beta1.ImagePullSecret
	serviceAccount *kubeletv1beta1.ImagePullServiceAccount
}

// AuthConfig returns the credential in the CRI's form, a new copy each call.
func (c Credential) AuthConfig() *runtimeapi.AuthConfig {
	return proto.Clone(c.auth).(*runtimeapi.AuthConfig)
}

// Keyring holds the credentials of a pod's image pull secrets, in the order
// the pod lists them.
type Keyring struct {
	entries []keyEntry
}

type keyEntry struct {
	pattern registryPattern
	cred    Credential
}

// registryPattern is a parsed config key.
type registryPattern struct {
	host string // lower case, may hold filepath.Match patterns per dot-separated part
	port string
	path string // repository path prefix, without leading or trailing slash
}

func (p registryPattern) String() string {
	s := p.host
	if p.port != "" {
		s += ":" + p.port
	}
	if p.path != "" {
		s += "/" + p.path
	}
	return s
}

// NewKeyring reads the credentials of kubernetes.io/dockerconfigjson and
// legacy kubernetes.io/dockercfg secrets; secrets of other types are
// ignored. A secret or entry that does not parse is left out and reported in
// the returned error, which never holds credentials; the Keyring holds
// everything that did parse.
func NewKeyring(secrets []*corev1.Secret) (*Keyring, error) {
	k := &Keyring{}
	var errs []error
	for _, s := range secrets {
		if s == nil {
			continue
		}
		source := s.Namespace + "/" + s.Name
		cfg, err := dockerConfigOf(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading image pull secret %s: %w", source, err))
			continue
		}
		entries, err := entriesOf(cfg, source)
		errs = append(errs, err)
		for i := range entries {
			entries[i].cred.secret = &kubeletv1beta1.ImagePullSecret{
				UID: string(s.UID), Namespace: s.Namespace, Name: s.Name,
				CredentialHash: credentialHash(entries[i].cred.auth),
			}
		}
		k.entries = append(k.entries, entries...)
	}
	return k, errors.Join(errs...)
}

// dockerConfigEntry is one registry's entry in a docker config file.
type dockerConfigEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// dockerConfigOf returns the registry entries of a pull secret by config
// key; nil for a secret of another type.
func dockerConfigOf(s *corev1.Secret) (map[string]dockerConfigEntry, error) {
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			return nil, errors.New("key " + corev1.DockerConfigJsonKey + " is not a docker config JSON document")
		}
		return cfg.Auths, nil
	case corev1.SecretTypeDockercfg:
		var cfg map[string]dockerConfigEntry
		if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &cfg); err != nil {
			return nil, errors.New("key " + corev1.DockerConfigKey + " is not a docker config JSON document")
		}
		return cfg, nil
	}
	return nil, nil
}

// entriesOf turns one secret's config into keyring entries, most specific
// key first.
func entriesOf(cfg map[string]dockerConfigEntry, source string) ([]keyEntry, error) {
	var entries []keyEntry
	var errs []error
	for key, e := range cfg {
		p, err := parseRegistryKey(key)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading image pull secret %s: %w", source, err))
			continue
		}
		auth, err := authConfigOf(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading image pull secret %s, registry %s: %w", source, p, err))
			continue
		}
		entries = append(entries, keyEntry{pattern: p, cred: Credential{Registry: p.String(), Source: source, auth: auth}})
	}
	slices.SortFunc(entries, func(a, b keyEntry) int { return moreSpecific(a.pattern, b.pattern) })
	return entries, errors.Join(errs...)
}

// moreSpecific orders patterns with a longer repository path first, then
// literal hosts before globbed ones, then by text for a stable order.
func moreSpecific(a, b registryPattern) int {
	return cmp.Or(
		-cmp.Compare(strings.Count(a.path, "/")+len(a.path), strings.Count(b.path, "/")+len(b.path)),
		cmp.Compare(hasGlob(a.host), hasGlob(b.host)),
		strings.Compare(a.String(), b.String()),
	)
}

func hasGlob(host string) int {
	if strings.ContainsAny(host, `*?[\`) {
		return 1
	}
	return 0
}

// authConfigOf decodes an entry; "auth" (base64 of user:password) wins
// over separate username and password fields.
func authConfigOf(e dockerConfigEntry) (*runtimeapi.AuthConfig, error) {
	a := &runtimeapi.AuthConfig{
		Username:      e.Username,
		Password:      e.Password,
		IdentityToken: e.IdentityToken,
		RegistryToken: e.RegistryToken,
	}
	if e.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return nil, errors.New("field auth is not base64")
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, errors.New("field auth does not decode to user:password")
		}
		a.Username, a.Password = user, pass
	}
	if a.Username == "" && a.Password == "" && a.IdentityToken == "" && a.RegistryToken == "" {
		return nil, errors.New("entry holds no credentials")
	}
	return a, nil
}

// parseRegistryKey parses a config key the way docker clients write them:
// "https://index.docker.io/v1/", "registry.example.com",
// "registry.example.com:5000/team", "*.example.com". A scheme is ignored,
// and so is a leading /v1 or /v2 path segment, which names the registry API
// rather than a repository.
func parseRegistryKey(key string) (registryPattern, error) {
	s := strings.TrimSpace(key)
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	hostPort, path, _ := strings.Cut(s, "/")
	path = strings.Trim(path, "/")
	for _, api := range []string{"v1", "v2"} {
		if path == api || strings.HasPrefix(path, api+"/") {
			path = strings.TrimPrefix(strings.TrimPrefix(path, api), "/")
		}
	}
	host, port := splitPort(strings.ToLower(hostPort))
	if host == "" {
		return registryPattern{}, fmt.Errorf("registry key %q has no host", key)
	}
	if _, err := filepath.Match(host, ""); err != nil {
		return registryPattern{}, fmt.Errorf("registry key %q has a malformed host pattern", key)
	}
	if host == "index.docker.io" {
		host = dockerHubHost
	}
	return registryPattern{host: host, port: port, path: path}, nil
}

// splitPort splits "host:port"; a host without a port returns "".
func splitPort(hostPort string) (host, port string) {
	i := strings.LastIndex(hostPort, ":")
	if i < 0 || strings.Contains(hostPort[i:], "]") {
		return hostPort, ""
	}
	return hostPort[:i], hostPort[i+1:]
}

// Lookup returns the credentials whose keys match image's registry and
// repository, in order: secrets as the pod lists them, within a secret the
// most specific key first. It fails when image does not parse.
func (k *Keyring) Lookup(image string) ([]Credential, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("parsing image name %q: %w", image, err)
	}
	return k.lookup(targetOf(ref.Context())), nil
}

func (k *Keyring) lookup(target registryPattern) []Credential {
	var out []Credential
	for _, e := range k.entries {
		if e.pattern.matches(target) {
			out = append(out, e.cred)
		}
	}
	return out
}

// targetOf returns the registry and repository of repo in the form keys
// are matched against.
func targetOf(repo name.Repository) registryPattern {
	host, port := splitPort(strings.ToLower(repo.RegistryStr()))
	if host == "index.docker.io" {
		host = dockerHubHost
	}
	return registryPattern{host: host, port: port, path: repo.RepositoryStr()}
}

// matches reports whether target's registry and repository fall under p:
// the same port, the same number of host parts each matching its pattern,
// and a repository path equal to or below p's path.
func (p registryPattern) matches(target registryPattern) bool {
	if p.port != target.port {
		return false
	}
	globs, parts := strings.Split(p.host, "."), strings.Split(target.host, ".")
	if len(globs) != len(parts) {
		return false
	}
	for i := range globs {
		if ok, _ := filepath.Match(globs[i], parts[i]); !ok {
			return false
		}
	}
	return p.path == "" || target.path == p.path || strings.HasPrefix(target.path, p.path+"/")
}
