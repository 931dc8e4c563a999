package images

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// configJSONSecret returns a kubernetes.io/dockerconfigjson secret with one
// entry per key, whose user is the key itself and password "pw-"+key.
func configJSONSecret(name string, keys ...string) *corev1.Secret {
	auths := map[string]any{}
	for _, k := range keys {
		auths[k] = map[string]string{"username": k, "password": "pw-" + k}
	}
	data, _ := json.Marshal(map[string]any{"auths": auths})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
}

func users(creds []Credential) []string {
	out := []string{}
	for _, c := range creds {
		out = append(out, c.AuthConfig().Username)
	}
	return out
}

func TestKeyringMatching(t *testing.T) {
	for _, tc := range []struct {
		key, image string
		match      bool
	}{
		// host
		{"registry.example.com", "registry.example.com/app:1", true},
		{"registry.example.com", "registry.example.com/team/app@sha256:" + sixtyFour, true},
		{"registry.example.com", "other.example.com/app", false},
		{"Registry.Example.com", "registry.example.com/app", true},
		// host:port
		{"registry.example.com:5000", "registry.example.com:5000/app", true},
		{"registry.example.com", "registry.example.com:5000/app", false},
		{"registry.example.com:5000", "registry.example.com/app", false},
		{"registry.example.com:5000", "registry.example.com:5001/app", false},
		{"localhost:5000", "localhost:5000/app:1", true},
		// globs, one per dot-separated part
		{"*.example.com", "a.example.com/app", true},
		{"*.example.com", "example.com/app", false},
		{"*.example.com", "a.b.example.com/app", false},
		{"*.*.example.com", "a.b.example.com/app", true},
		{"registry-?.example.com", "registry-1.example.com/app", true},
		{"*.example.com:5000", "a.example.com:5000/app", true},
		// repository path prefix
		{"registry.example.com/team", "registry.example.com/team/app", true},
		{"registry.example.com/team", "registry.example.com/team", true},
		{"registry.example.com/team/", "registry.example.com/team/sub/app", true},
		{"registry.example.com/team", "registry.example.com/teamx/app", false},
		{"registry.example.com/team/app", "registry.example.com/team/other", false},
		// schemes and API suffixes
		{"https://registry.example.com", "registry.example.com/app", true},
		{"http://registry.example.com:5000", "registry.example.com:5000/app", true},
		{"https://registry.example.com/v1/", "registry.example.com/app", true},
		{"https://registry.example.com/v2/", "registry.example.com/app", true},
		{"https://registry.example.com/v2/team", "registry.example.com/team/app", true},
		{"https://registry.example.com/v2/team", "registry.example.com/app", false},
		// Docker Hub under its several names
		{"https://index.docker.io/v1/", "nginx", true},
		{"https://index.docker.io/v1/", "nginx:1.27", true},
		{"https://index.docker.io/v1/", "docker.io/library/nginx", true},
		{"https://index.docker.io/v1/", "index.docker.io/user/app", true},
		{"https://index.docker.io/v1/", "quay.io/user/app", false},
		{"docker.io", "user/app", true},
		{"docker.io/user", "user/app", true},
		{"docker.io/user", "other/app", false},
		{"index.docker.io", "library/busybox", true},
	} {
		t.Run(fmt.Sprintf("%s matches %s", tc.key, tc.image), func(t *testing.T) {
			g := NewWithT(t)
			k, err := NewKeyring([]*corev1.Secret{configJSONSecret("s", tc.key)})
			g.Expect(err).NotTo(HaveOccurred())
			creds, err := k.Lookup(tc.image)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.match {
				g.Expect(users(creds)).To(Equal([]string{tc.key}))
			} else {
				g.Expect(creds).To(BeEmpty())
			}
		})
	}
}

const sixtyFour = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestKeyringOrderIsSecretOrderThenMostSpecificKey(t *testing.T) {
	g := NewWithT(t)
	k, err := NewKeyring([]*corev1.Secret{
		configJSONSecret("first", "*.example.com", "registry.example.com", "registry.example.com/team", "registry.example.com/team/app"),
		configJSONSecret("second", "registry.example.com"),
	})
	g.Expect(err).NotTo(HaveOccurred())
	creds, err := k.Lookup("registry.example.com/team/app:1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(users(creds)).To(Equal([]string{
		"registry.example.com/team/app", "registry.example.com/team", "registry.example.com", "*.example.com",
		"registry.example.com",
	}))
	g.Expect(creds[0].Source).To(Equal("ns/first"))
	g.Expect(creds[4].Source).To(Equal("ns/second"))
}

func TestKeyringReadsEveryEntryForm(t *testing.T) {
	g := NewWithT(t)
	legacy, _ := json.Marshal(map[string]any{
		"https://legacy.example.com": map[string]string{"username": "old", "password": "old-pw", "email": "a@b"},
	})
	fields, _ := json.Marshal(map[string]any{"auths": map[string]any{
		"fields.example.com": map[string]string{"username": "u", "password": "p"},
		"token.example.com":  map[string]string{"identitytoken": "id-token"},
		"both.example.com":   map[string]string{"username": "ignored", "password": "ignored", "auth": b64("u2:p:with:colons")},
	}})
	k, err := NewKeyring([]*corev1.Secret{
		{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: legacy}},
		{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: fields}},
		{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{corev1.DockerConfigJsonKey: fields}},
		nil,
	})
	g.Expect(err).NotTo(HaveOccurred())

	lookup := func(image string) Credential {
		creds, err := k.Lookup(image)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(creds).To(HaveLen(1), image)
		return creds[0]
	}
	a := lookup("legacy.example.com/app").AuthConfig()
	g.Expect([]string{a.Username, a.Password}).To(Equal([]string{"old", "old-pw"}))
	a = lookup("fields.example.com/app").AuthConfig()
	g.Expect([]string{a.Username, a.Password}).To(Equal([]string{"u", "p"}))
	a = lookup("token.example.com/app").AuthConfig()
	g.Expect(a.IdentityToken).To(Equal("id-token"))
	a = lookup("both.example.com/app").AuthConfig()
	g.Expect([]string{a.Username, a.Password}).To(Equal([]string{"u2", "p:with:colons"}))
}

func TestKeyringKeepsWhatParsesAndNamesWhatDoesNot(t *testing.T) {
	g := NewWithT(t)
	bad, _ := json.Marshal(map[string]any{"auths": map[string]any{
		"good.example.com":  map[string]string{"auth": b64("u:p")},
		"nob64.example.com": map[string]string{"auth": "%%%secret%%%"},
		"nocolon.example":   map[string]string{"auth": b64("justuser")},
		"empty.example.com": map[string]string{},
		"[.example.com":     map[string]string{"auth": b64("u:p")},
	}})
	k, err := NewKeyring([]*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mixed"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: bad}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "garbage"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{not json")}},
	})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(And(ContainSubstring("ns/mixed"), ContainSubstring("ns/garbage"),
		ContainSubstring("nob64.example.com"), ContainSubstring("not base64"), ContainSubstring("holds no credentials")))
	g.Expect(err.Error()).NotTo(ContainSubstring("%%%secret%%%"))
	creds, lerr := k.Lookup("good.example.com/app")
	g.Expect(lerr).NotTo(HaveOccurred())
	g.Expect(creds).To(HaveLen(1))
}

func TestCredentialDoesNotRevealTheSecretWhenPrintedOrEncoded(t *testing.T) {
	g := NewWithT(t)
	k, err := NewKeyring([]*corev1.Secret{configJSONSecret("s", "registry.example.com")})
	g.Expect(err).NotTo(HaveOccurred())
	creds, _ := k.Lookup("registry.example.com/app")
	g.Expect(creds).To(HaveLen(1))
	printed := fmt.Sprintf("%v %+v %#v", creds[0], creds[0], creds)
	encoded, _ := json.Marshal(creds)
	for _, s := range []string{printed, string(encoded)} {
		g.Expect(s).NotTo(ContainSubstring("pw-registry.example.com"))
	}
}

func TestLookupRejectsUnparsableImages(t *testing.T) {
	g := NewWithT(t)
	k, _ := NewKeyring(nil)
	_, err := k.Lookup("UPPER/case")
	g.Expect(err).To(HaveOccurred())
}
