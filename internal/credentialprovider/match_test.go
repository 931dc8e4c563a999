package credentialprovider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatchImage(t *testing.T) {
	for _, tc := range []struct {
		pattern, image string
		match          bool
		err            bool
	}{
		// literal hosts
		{"gcr.io", "gcr.io/project/app", true, false},
		{"gcr.io", "gcr.io", true, false},
		{"gcr.io", "us.gcr.io/project/app", false, false},
		{"123456789012.dkr.ecr.us-west-2.amazonaws.com", "123456789012.dkr.ecr.us-west-2.amazonaws.com/app", true, false},
		{"123456789012.dkr.ecr.us-west-2.amazonaws.com", "123456789012.dkr.ecr.us-east-1.amazonaws.com/app", false, false},
		{"GCR.io", "gcr.io/app", false, false}, // no case folding
		// a glob matches one whole label
		{"*.kubernetes.io", "prefix.kubernetes.io", true, false},
		{"prefix.*.io", "prefix.kubernetes.io", true, false},
		{"prefix.kubernetes.*", "prefix.kubernetes.io", true, false},
		{"*-good.kubernetes.io", "prefix-good.kubernetes.io", true, false},
		{"app*.k8s.io", "app1.k8s.io/x", true, false},
		{"*.azurecr.io", "myreg.azurecr.io/team/app", true, false},
		{"*.azurecr.io", "azurecr.io/app", false, false},
		{"*.io", "a.k8s.io/app", false, false},
		{"*.*.registry.io", "a.b.registry.io/app", true, false},
		{"*.*.registry.io", "a.registry.io/app", false, false},
		{"*.dkr.ecr.*.amazonaws.com", "123456789012.dkr.ecr.eu-west-1.amazonaws.com/app", true, false},
		{"*.dkr.ecr.*.amazonaws.com", "123456789012.dkr.ecr.eu-west-1.amazonaws.com.cn/app", false, false},
		// only '*' is of use: '?' starts the URL's query, '[' an IP literal
		{"registry-?.example.com", "registry-1.example.com/app", false, false},
		{"registry-[0-9].example.com", "registry-1.example.com/app", false, true},
		{"*.core.windows.net", "kubernetes.io", false, false},
		{"*.kubernetes.io", "prefix.kubernetes.io.foo", false, false},
		{"[.kubernetes.io", "a.kubernetes.io", false, true}, // bad glob
		// paths are character prefixes, never globs
		{"*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true, false},
		{"prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true, false},
		{"gcr.io/foo", "gcr.io/foobar", true, false},
		{"gcr.io/foo/", "gcr.io/foobar", false, false},
		{"*.kubernetes.io/foo", "prefix.kubernetes.io/bar", false, false},
		{"gcr.io/project", "gcr.io", false, false},
		{"gcr.io/*", "gcr.io/app", false, false},
		// ports must be equal
		{"registry.io:8080/path", "registry.io:8080/path/app", true, false},
		{"*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", true, false},
		{"*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", false, false},
		{"*.kubernetes.io/blah", "prefix.kubernetes.io:1111/blah", false, false},
		{"*.kubernetes.io:1111/blah", "prefix.kubernetes.io/blah", false, false},
		{"registry.io:*", "registry.io:5000/app", false, true},
		{"localhost:5000", "localhost:5000/app", true, false},
		{"[::1]:5000", "[::1]:5000/app", true, false},
		// a scheme in a pattern is read as a host, as the kubelet reads it
		{"https://gcr.io", "gcr.io/app", false, false},
		// one-label hosts are hosts, there is no default registry
		{"docker.io", "nginx", false, false},
		{"docker.io", "docker.io/library/nginx", true, false},
		// unparsable
		{"gcr.io:port", "gcr.io/app", false, true},
		{"gcr.io", "gcr.io:port/app", false, true},
	} {
		got, err := MatchImage(tc.pattern, tc.image)
		if got != tc.match || (err != nil) != tc.err {
			t.Errorf("MatchImage(%q, %q) = %v, %v; want %v, error %v", tc.pattern, tc.image, got, err, tc.match, tc.err)
		}
	}
}

func TestNormalizeAuthKey(t *testing.T) {
	for _, tc := range []struct {
		key, want string
	}{
		{"gcr.io", "gcr.io"},
		{"https://gcr.io", "gcr.io"},
		{"http://gcr.io/", "gcr.io"},
		{"https://index.docker.io/v1/", "index.docker.io"},
		{"registry.io/v2/", "registry.io"},
		{"registry.io/v2/team/app", "registry.io/team/app"},
		{"registry.io/v3/team", "registry.io/v3/team"},
		{"registry.io:5000/team/", "registry.io:5000/team/"},
		{"*.dkr.ecr.us-east-1.amazonaws.com", "*.dkr.ecr.us-east-1.amazonaws.com"},
	} {
		got, err := normalizeAuthKey(tc.key)
		if err != nil || got != tc.want {
			t.Errorf("normalizeAuthKey(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	if _, err := normalizeAuthKey("registry.io:port"); err == nil {
		t.Error("no error for an invalid port")
	}
}

func TestOnDockerHub(t *testing.T) {
	for image, want := range map[string]bool{
		"nginx":                   true,
		"library/nginx":           true,
		"docker.io/library/nginx": true,
		"index.docker.io/app/x":   true,
		"gcr.io/app":              false,
		"localhost:5000/app":      false,
		"/app":                    false,
	} {
		if got := onDockerHub(image); got != want {
			t.Errorf("onDockerHub(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestRegistryOf(t *testing.T) {
	for image, want := range map[string]string{
		"gcr.io/project/app":      "gcr.io",
		"registry.io:5000/app":    "registry.io:5000",
		"nginx":                   "nginx",
		"docker.io/library/nginx": "docker.io",
	} {
		if got := registryOf(image); got != want {
			t.Errorf("registryOf(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestCredentialsFor(t *testing.T) {
	entry := func(key, user string) authEntry { return authEntry{key: key, username: user, password: "pw-" + user} }
	type cred struct{ Provider, Registry, Username string }
	for _, tc := range []struct {
		name    string
		image   string
		answers []providerAuths
		want    []cred
	}{
		{
			name:  "only matching keys, most specific first",
			image: "quay.io/team/app",
			answers: []providerAuths{{provider: "a", auths: []authEntry{
				entry("gcr.io", "g"), entry("quay.io", "q"), entry("quay.io/team", "qt"), entry("quay.io/other", "qo"),
			}}},
			want: []cred{{"a", "quay.io/team", "qt"}, {"a", "quay.io", "q"}},
		},
		{
			name:  "equal keys in provider order, literal hosts before globs",
			image: "myreg.azurecr.io/app",
			answers: []providerAuths{
				{provider: "first", auths: []authEntry{entry("*.azurecr.io", "f-glob"), entry("myreg.azurecr.io", "f")}},
				{provider: "second", auths: []authEntry{entry("myreg.azurecr.io", "s")}},
			},
			want: []cred{{"first", "myreg.azurecr.io", "f"}, {"second", "myreg.azurecr.io", "s"}, {"first", "*.azurecr.io", "f-glob"}},
		},
		{
			name:    "Docker Hub falls back to index.docker.io",
			image:   "docker.io/library/nginx",
			answers: []providerAuths{{provider: "hub", auths: []authEntry{entry("index.docker.io", "h"), entry("gcr.io", "g")}}},
			want:    []cred{{"hub", "index.docker.io", "h"}},
		},
		{
			name:    "no fallback when a key matches",
			image:   "docker.io/library/nginx",
			answers: []providerAuths{{provider: "hub", auths: []authEntry{entry("index.docker.io", "h"), entry("docker.io", "d")}}},
			want:    []cred{{"hub", "docker.io", "d"}},
		},
		{
			name:    "no fallback off Docker Hub",
			image:   "gcr.io/app",
			answers: []providerAuths{{provider: "hub", auths: []authEntry{entry("index.docker.io", "h")}}},
		},
		{name: "no answers", image: "gcr.io/app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []cred
			for _, c := range credentialsFor(tc.image, tc.answers) {
				if c.Password != "pw-"+c.Username {
					t.Errorf("credential %s has password %q", c, c.Password)
				}
				got = append(got, cred{c.Provider, c.Registry, c.Username})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("credentials (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceAccountKeys(t *testing.T) {
	// Keys are length-prefixed, so that moving a character from one field to
	// the next changes the key.
	a := string(appendAnnotations(appendFields(nil, "ns", "sa", "uid"), map[string]string{"k": "v"}))
	for _, other := range []string{
		string(appendAnnotations(appendFields(nil, "ns", "sa", "uid2"), map[string]string{"k": "v"})),
		string(appendAnnotations(appendFields(nil, "n", "ssa", "uid"), map[string]string{"k": "v"})),
		string(appendAnnotations(appendFields(nil, "ns", "sa", "uid"), map[string]string{"k": "v2"})),
		string(appendAnnotations(appendFields(nil, "ns", "sa", "uid"), map[string]string{"k": "v", "l": ""})),
		string(appendAnnotations(appendFields(nil, "ns", "sa", "uid"), nil)),
	} {
		if other == a {
			t.Errorf("key %q is not unique", a)
		}
	}
	if b := string(appendAnnotations(appendFields(nil, "ns", "sa", "uid"), map[string]string{"k": "v"})); b != a {
		t.Errorf("key %q is not deterministic: %q", a, b)
	}
}
