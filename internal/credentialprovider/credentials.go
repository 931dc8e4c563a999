package credentialprovider

import (
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// dockerHubKey is the key under which credentials serve Docker Hub images
// that no other key matches.
const dockerHubKey = "index.docker.io"

// Credential is a registry credential a provider returned for an image.
// String and MarshalLog leave the secret out, so a Credential can be logged.
type Credential struct {
	// Provider is the name of the provider that returned it.
	Provider string
	// Registry is the auth key it was returned under, as matched against the
	// image: host[:port][/path], the host possibly globbed
	// ("*.dkr.ecr.us-east-1.amazonaws.com"), without scheme or /v1/, /v2/.
	Registry string
	Username string
	Password string
	// ServiceAccount is the pod's service account whose token the provider
	// was given for this credential; nil when it was given none, which
	// makes the credential the node's, open to every pod on it.
	ServiceAccount *ServiceAccountRef
}

// ServiceAccountRef names a service account.
type ServiceAccountRef struct {
	Namespace, Name string
	UID             types.UID
}

// String names the credential without its secret.
func (c Credential) String() string {
	return c.Registry + " from credential provider " + c.Provider
}

// MarshalLog is what logr loggers log for a Credential: no secret.
func (c Credential) MarshalLog() any {
	return struct{ Provider, Registry string }{c.Provider, c.Registry}
}

// providerAuths are the auth entries one provider returned.
type providerAuths struct {
	provider       string
	auths          []authEntry
	serviceAccount *ServiceAccountRef
}

// credentialsFor picks the credentials for image as the kubelet's keyring
// picks them from its providers' answers: every entry whose key matches
// image, keys in reverse order (so that "quay.io/team" comes before
// "quay.io"), equal keys in provider order; when none matches and image is
// on Docker Hub, the entries for index.docker.io.
func credentialsFor(image string, answers []providerAuths) []Credential {
	var all []Credential
	for _, a := range answers {
		for _, e := range a.auths {
			all = append(all, Credential{Provider: a.provider, Registry: e.key, Username: e.username, Password: e.password, ServiceAccount: a.serviceAccount})
		}
	}
	slices.SortStableFunc(all, func(a, b Credential) int { return strings.Compare(b.Registry, a.Registry) })
	var out []Credential
	for _, c := range all {
		if ok, _ := MatchImage(c.Registry, image); ok {
			out = append(out, c)
		}
	}
	if len(out) == 0 && onDockerHub(image) {
		for _, c := range all {
			if c.Registry == dockerHubKey {
				out = append(out, c)
			}
		}
	}
	return out
}

// normalizeAuthKey reads an auth key as docker clients and the kubelet's
// keyring read config keys: a scheme is dropped, and so is a leading /v1 or
// /v2 path segment, which names the registry API rather than a repository.
func normalizeAuthKey(key string) (string, error) {
	s := key
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	path := u.Path
	if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v2/") {
		path = path[len("/v1"):]
	}
	if path == "" || path == "/" {
		return u.Host, nil
	}
	return u.Host + path, nil
}

// onDockerHub reports whether image is pulled from Docker Hub: its first
// part names Docker Hub, or is no host (has no '.' or ':'), or there is only
// one part.
func onDockerHub(image string) bool {
	first, _, found := strings.Cut(image, "/")
	switch {
	case first == "":
		return false
	case !found:
		return true
	case first == "docker.io" || first == dockerHubKey:
		return true
	}
	return !strings.ContainsAny(first, ".:")
}
