package credentialprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const (
	password   = "secret-password"
	pluginName = "test-plugin"
)

var (
	buildDir   string
	buildOnce  sync.Once
	builtPath  string
	buildError error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "credentialprovider-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// pluginBinary builds testdata/plugin once and returns its path.
func pluginBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtPath = filepath.Join(buildDir, "plugin")
		out, err := exec.Command("go", "build", "-o", builtPath, "./testdata/plugin").CombinedOutput()
		if err != nil {
			buildError = fmt.Errorf("building the test plugin: %w: %s", err, out)
		}
	})
	if buildError != nil {
		t.Fatal(buildError)
	}
	return builtPath
}

// testEnv is a bin dir holding the test plugin under several names, a
// fake clock and a directory for the plugins' files.
type testEnv struct {
	t      *testing.T
	binDir string
	dir    string
	clock  *testingclock.FakeClock
}

func newTestEnv(t *testing.T, names ...string) *testEnv {
	t.Helper()
	bin := pluginBinary(t)
	e := &testEnv{t: t, binDir: t.TempDir(), dir: t.TempDir(), clock: testingclock.NewFakeClock(time.Now())}
	for _, n := range append(names, pluginName) {
		if err := os.Symlink(bin, filepath.Join(e.binDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// provider returns a provider config running the test plugin as name with
// env, counting its runs in a file of its own.
func (e *testEnv) provider(name string, matchImages []string, env map[string]string) kubeletconfigv1.CredentialProvider {
	p := kubeletconfigv1.CredentialProvider{
		Name:                 name,
		MatchImages:          matchImages,
		DefaultCacheDuration: &metav1.Duration{Duration: time.Hour},
		APIVersion:           "credentialprovider.kubelet.k8s.io/v1",
		Env:                  []kubeletconfigv1.ExecEnvVar{{Name: "PLUGIN_COUNT_FILE", Value: e.file(name + ".count")}},
	}
	for k, v := range env {
		p.Env = append(p.Env, kubeletconfigv1.ExecEnvVar{Name: k, Value: v})
	}
	return p
}

func (e *testEnv) file(name string) string { return filepath.Join(e.dir, name) }

// runs is how often the provider name's plugin ran.
func (e *testEnv) runs(name string) int {
	data, err := os.ReadFile(e.file(name + ".count"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return len(data)
}

// providers writes a config of ps and sets it up.
func (e *testEnv) providers(opts Options, ps ...kubeletconfigv1.CredentialProvider) *Providers {
	e.t.Helper()
	cfg := kubeletconfigv1.CredentialProviderConfig{Providers: ps}
	cfg.APIVersion, cfg.Kind = "kubelet.config.k8s.io/v1", "CredentialProviderConfig"
	data, err := json.Marshal(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	opts.ConfigPath = e.file("config.json")
	opts.BinDir = e.binDir
	if err := os.WriteFile(opts.ConfigPath, data, 0o600); err != nil {
		e.t.Fatal(err)
	}
	providers, err := newProviders(opts, e.clock)
	if err != nil {
		e.t.Fatal(err)
	}
	return providers
}

func mustCredentials(t *testing.T, ps *Providers, image string, pod *corev1.Pod) []Credential {
	t.Helper()
	creds, err := ps.Credentials(context.Background(), image, pod)
	if err != nil {
		t.Fatalf("credentials for %s: %v", image, err)
	}
	return creds
}

func TestCredentialsForMatchingImage(t *testing.T) {
	e := newTestEnv(t)
	ps := e.providers(Options{}, e.provider(pluginName, []string{"*.registry.test", "other.test:5000/team"}, nil))

	want := []Credential{{Provider: pluginName, Registry: "a.registry.test", Username: "a.registry.test/team/app", Password: password}}
	if diff := cmp.Diff(want, mustCredentials(t, ps, "a.registry.test/team/app", nil)); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	for _, image := range []string{"registry.test/app", "a.b.registry.test/app", "other.test/team/app", "other.test:5000/app"} {
		if creds := mustCredentials(t, ps, image, nil); len(creds) != 0 {
			t.Errorf("credentials for non-matching image %s: %v", image, creds)
		}
	}
	if got := e.runs(pluginName); got != 1 {
		t.Errorf("plugin ran %d times, want 1", got)
	}
}

func TestCredentialsOlderAPIVersions(t *testing.T) {
	for _, version := range []string{"credentialprovider.kubelet.k8s.io/v1beta1", "credentialprovider.kubelet.k8s.io/v1alpha1"} {
		t.Run(version, func(t *testing.T) {
			e := newTestEnv(t)
			p := e.provider(pluginName, []string{"*.registry.test"}, map[string]string{"PLUGIN_REQUEST_FILE": e.file("request")})
			p.APIVersion = version
			ps := e.providers(Options{}, p)
			if creds := mustCredentials(t, ps, "a.registry.test/app", nil); len(creds) != 1 || creds[0].Password != password {
				t.Errorf("credentials %v", creds)
			}
			data, err := os.ReadFile(e.file("request"))
			if err != nil {
				t.Fatal(err)
			}
			if want := `"apiVersion":"` + version + `"`; !strings.Contains(string(data), want) {
				t.Errorf("request %s lacks %s", data, want)
			}
		})
	}
}

func TestCredentialsOnlyForMatchingAuthKeys(t *testing.T) {
	e := newTestEnv(t)
	ps := e.providers(Options{}, e.provider(pluginName, []string{"*.registry.test"}, map[string]string{
		"PLUGIN_AUTH_KEYS": "https://a.registry.test/v2/,a.registry.test/team,a.registry.test/other,*.registry.test,b.registry.test",
	}))
	var got []string
	for _, c := range mustCredentials(t, ps, "a.registry.test/team/app", nil) {
		got = append(got, c.Registry)
	}
	if diff := cmp.Diff([]string{"a.registry.test/team", "a.registry.test", "*.registry.test"}, got); diff != "" {
		t.Errorf("registries (-want +got):\n%s", diff)
	}
}

func TestCredentialsOfSeveralProviders(t *testing.T) {
	e := newTestEnv(t, "first", "second", "third")
	ps := e.providers(Options{},
		e.provider("first", []string{"*.registry.test"}, map[string]string{"PLUGIN_PASSWORD": "first-password"}),
		e.provider("second", []string{"other.test"}, nil),
		e.provider("third", []string{"a.registry.test"}, map[string]string{"PLUGIN_PASSWORD": "third-password"}),
	)
	var got []string
	for _, c := range mustCredentials(t, ps, "a.registry.test/app", nil) {
		got = append(got, c.Provider+"="+c.Password)
	}
	if diff := cmp.Diff([]string{"first=first-password", "third=third-password"}, got); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	if n := e.runs("second"); n != 0 {
		t.Errorf("provider second ran %d times for an image it does not match", n)
	}
}

func TestCredentialsCache(t *testing.T) {
	const ttl = time.Hour // the providers' defaultCacheDuration
	for _, tc := range []struct {
		name string
		env  map[string]string
		// images asked for in turn, and after each how often the plugin
		// has run; a "+" prefix first moves the clock past the ttl.
		images []string
		runs   []int
	}{
		{
			name:   "Image key",
			env:    map[string]string{"PLUGIN_CACHE_KEY_TYPE": "Image"},
			images: []string{"a.registry.test/x", "a.registry.test/x", "a.registry.test/y", "a.registry.test/y", "+a.registry.test/x"},
			runs:   []int{1, 1, 2, 2, 3},
		},
		{
			name:   "Registry key",
			env:    map[string]string{"PLUGIN_CACHE_KEY_TYPE": "Registry"},
			images: []string{"a.registry.test/x", "a.registry.test/y", "b.registry.test/x", "b.registry.test/z", "+a.registry.test/y"},
			runs:   []int{1, 1, 2, 2, 3},
		},
		{
			name:   "Global key",
			env:    map[string]string{"PLUGIN_CACHE_KEY_TYPE": "Global", "PLUGIN_AUTH_KEYS": "*.registry.test"},
			images: []string{"a.registry.test/x", "b.registry.test/y", "+c.registry.test/z", "a.registry.test/x"},
			runs:   []int{1, 1, 2, 2},
		},
		{
			name:   "response cacheDuration 0 is not cached",
			env:    map[string]string{"PLUGIN_CACHE_DURATION": "0s"},
			images: []string{"a.registry.test/x", "a.registry.test/x", "a.registry.test/x"},
			runs:   []int{1, 2, 3},
		},
		{
			name:   "response cacheDuration wins over the default",
			env:    map[string]string{"PLUGIN_CACHE_DURATION": "2h"},
			images: []string{"a.registry.test/x", "+a.registry.test/x", "+a.registry.test/x"},
			runs:   []int{1, 1, 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			ps := e.providers(Options{}, e.provider(pluginName, []string{"*.registry.test"}, tc.env))
			for i, image := range tc.images {
				if rest, ok := strings.CutPrefix(image, "+"); ok {
					e.clock.Step(ttl + time.Second)
					image = rest
				}
				if creds := mustCredentials(t, ps, image, nil); len(creds) != 1 || creds[0].Password != password {
					t.Fatalf("credentials for %s: %v", image, creds)
				}
				if got := e.runs(pluginName); got != tc.runs[i] {
					t.Fatalf("after %s the plugin ran %d times, want %d", tc.images[i], got, tc.runs[i])
				}
			}
		})
	}
}

func TestCredentialsDefaultCacheDurationZero(t *testing.T) {
	e := newTestEnv(t)
	p := e.provider(pluginName, []string{"*.registry.test"}, nil)
	p.DefaultCacheDuration = &metav1.Duration{}
	ps := e.providers(Options{}, p)
	mustCredentials(t, ps, "a.registry.test/x", nil)
	mustCredentials(t, ps, "a.registry.test/x", nil)
	if got := e.runs(pluginName); got != 2 {
		t.Errorf("plugin ran %d times, want 2", got)
	}
}

func TestCredentialsPluginFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "exit status", env: map[string]string{"PLUGIN_MODE": "fail"}, want: "exit status 1: stderr: the registry refused image a.registry.test/app"},
		{name: "bad JSON", env: map[string]string{"PLUGIN_MODE": "badjson"}, want: "the plugin's stdout is not a JSON object"},
		{
			name: "wrong apiVersion",
			env:  map[string]string{"PLUGIN_MODE": "wrongversion"},
			want: `the response's apiVersion "credentialprovider.kubelet.k8s.io/v1alpha1" is not the request's "credentialprovider.kubelet.k8s.io/v1"`,
		},
		{name: "unknown apiVersion", env: map[string]string{"PLUGIN_API_VERSION": "credentialprovider.kubelet.k8s.io/v9"}, want: `apiVersion "credentialprovider.kubelet.k8s.io/v9"`},
		{name: "unknown field", env: map[string]string{"PLUGIN_MODE": "extrafield"}, want: "the response has unknown or duplicate fields"},
		{name: "unknown cacheKeyType", env: map[string]string{"PLUGIN_CACHE_KEY_TYPE": "Pod"}, want: `cacheKeyType "Pod", not Image, Registry or Global`},
		{name: "bad cacheDuration", env: map[string]string{"PLUGIN_CACHE_DURATION": "soon"}, want: "does not decode as a CredentialProviderResponse"},
		{name: "timeout", env: map[string]string{"PLUGIN_MODE": "hang"}, want: "timed out after 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, "good")
			ps := e.providers(Options{},
				e.provider(pluginName, []string{"*.registry.test"}, tc.env),
				e.provider("good", []string{"*.registry.test"}, map[string]string{"PLUGIN_PASSWORD": "good-password"}),
			)
			ps.providers[0].plugin.timeout = 300 * time.Millisecond
			creds, err := ps.Credentials(context.Background(), "a.registry.test/app", nil)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{"credential provider " + pluginName, "image a.registry.test/app", tc.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			if strings.Contains(msg, password) || strings.Contains(msg, "good-password") {
				t.Errorf("error %q holds a password", msg)
			}
			if len(creds) != 1 || creds[0].Provider != "good" {
				t.Errorf("credentials %v, want only those of provider good", creds)
			}
		})
	}
}

func TestCredentialsStderrTruncated(t *testing.T) {
	b := &cappedBuffer{max: 8}
	for _, s := range []string{"0123", "456789", "abc"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got, want := b.quote(), ": stderr: 01234567 (truncated)"; got != want {
		t.Errorf("quote() = %q, want %q", got, want)
	}
	if got := (&cappedBuffer{max: 8}).quote(); got != "" {
		t.Errorf("quote() of nothing = %q", got)
	}
}

func TestCredentialsEnvAndArgs(t *testing.T) {
	t.Setenv("PLUGIN_PASSWORD", "from-nodelet")
	t.Setenv("PLUGIN_CACHE_KEY_TYPE", "Registry")
	e := newTestEnv(t)
	p := e.provider(pluginName, []string{"*.registry.test"}, map[string]string{
		"PLUGIN_PASSWORD":  "from-config",
		"PLUGIN_ARGS_FILE": e.file("args"),
	})
	p.Args = []string{"get-credentials", "--verbose"}
	ps := e.providers(Options{}, p)
	creds := mustCredentials(t, ps, "a.registry.test/x", nil)
	if len(creds) != 1 || creds[0].Password != "from-config" {
		t.Errorf("credentials %v, want the password of the config's env", creds)
	}
	// nodelet's environment reaches the plugin: Registry, so one run.
	mustCredentials(t, ps, "a.registry.test/y", nil)
	if got := e.runs(pluginName); got != 1 {
		t.Errorf("plugin ran %d times, want 1", got)
	}
	args, err := os.ReadFile(e.file("args"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(args); got != "get-credentials\n--verbose" {
		t.Errorf("plugin args %q", got)
	}
}

func TestCredentialsConcurrentRequestsShareOneRun(t *testing.T) {
	const callers = 8
	const image = "a.registry.test/app"
	e := newTestEnv(t)
	gate := e.file("gate")
	ps := e.providers(Options{}, e.provider(pluginName, []string{"*.registry.test"}, map[string]string{
		"PLUGIN_GATE_FILE": gate, "PLUGIN_CACHE_DURATION": "0s",
	}))
	results := make(chan []Credential, callers)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			creds, err := ps.Credentials(context.Background(), image, nil)
			results <- creds
			errs <- err
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for ps.providers[0].flight.waiting(image) < callers-1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d callers joined the running plugin", ps.providers[0].flight.waiting(image))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
		if creds := <-results; len(creds) != 1 || creds[0].Password != password {
			t.Errorf("credentials %v", creds)
		}
	}
	if got := e.runs(pluginName); got != 1 {
		t.Errorf("plugin ran %d times for %d concurrent callers, want 1", got, callers)
	}
}

func TestCredentialsWaiterCancelled(t *testing.T) {
	e := newTestEnv(t)
	gate := e.file("gate")
	ps := e.providers(Options{}, e.provider(pluginName, []string{"*.registry.test"}, map[string]string{"PLUGIN_GATE_FILE": gate}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ps.Credentials(ctx, "a.registry.test/app", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	// The run goes on, and its answer is cached when it ends.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, cached := ps.providers[0].cache.get("a.registry.test/app", ""); cached {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the answer of the plugin was never cached")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if creds := mustCredentials(t, ps, "a.registry.test/app", nil); len(creds) != 1 {
		t.Errorf("credentials %v", creds)
	}
	if got := e.runs(pluginName); got != 1 {
		t.Errorf("plugin ran %d times, want 1", got)
	}
}

// fakeCluster serves service accounts and tokens.
type fakeCluster struct {
	mu       sync.Mutex
	accounts map[string]*corev1.ServiceAccount // by namespace/name
	requests []TokenRequest
	tokenErr error
}

func (f *fakeCluster) serviceAccount(_ context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	sa, ok := f.accounts[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("serviceaccounts %q not found", name)
	}
	return sa, nil
}

func (f *fakeCluster) token(_ context.Context, req TokenRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.tokenErr != nil {
		return "", f.tokenErr
	}
	return "token-for-" + string(req.PodUID), nil
}

func (f *fakeCluster) options() Options {
	return Options{ServiceAccountToken: f.token, ServiceAccount: f.serviceAccount}
}

func podWith(name, serviceAccount string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{ServiceAccountName: serviceAccount},
	}
}

func account(name string, uid types.UID, annotations map[string]string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: uid, Annotations: annotations}}
}

// tokenProvider is a provider with tokenAttributes.
func (e *testEnv) tokenProvider(cacheType kubeletconfigv1.ServiceAccountTokenCacheType, env map[string]string) kubeletconfigv1.CredentialProvider {
	p := e.provider(pluginName, []string{"*.registry.test"}, env)
	p.TokenAttributes = &kubeletconfigv1.ServiceAccountTokenAttributes{
		ServiceAccountTokenAudience:          "registry.test",
		CacheType:                            cacheType,
		RequireServiceAccount:                ptr.To(true),
		RequiredServiceAccountAnnotationKeys: []string{"registry.test/role"},
		OptionalServiceAccountAnnotationKeys: []string{"registry.test/region", "registry.test/absent"},
	}
	return p
}

func TestCredentialsServiceAccountToken(t *testing.T) {
	e := newTestEnv(t)
	cluster := &fakeCluster{accounts: map[string]*corev1.ServiceAccount{
		"team/puller": account("puller", "sa-uid", map[string]string{
			"registry.test/role": "reader", "registry.test/region": "eu", "unrelated": "x",
		}),
	}}
	ps := e.providers(cluster.options(), e.tokenProvider(kubeletconfigv1.ServiceAccountServiceAccountTokenCacheType, map[string]string{
		"PLUGIN_REQUEST_FILE": e.file("request"),
	}))
	creds := mustCredentials(t, ps, "a.registry.test/app", podWith("web-1", "puller"))
	if len(creds) != 1 || creds[0].Password != password {
		t.Fatalf("credentials %v", creds)
	}

	wantRequests := []TokenRequest{{
		Namespace: "team", ServiceAccountName: "puller", ServiceAccountUID: "sa-uid",
		Audience: "registry.test", PodName: "web-1", PodUID: "web-1-uid",
	}}
	if diff := cmp.Diff(wantRequests, cluster.requests); diff != "" {
		t.Errorf("token requests (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(e.file("request"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion":          "credentialprovider.kubelet.k8s.io/v1",
		"kind":                "CredentialProviderRequest",
		"image":               "a.registry.test/app",
		"serviceAccountToken": "token-for-web-1-uid",
		"serviceAccountAnnotations": map[string]any{
			"registry.test/role": "reader", "registry.test/region": "eu",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request on stdin (-want +got):\n%s", diff)
	}
}

func TestCredentialsServiceAccountCacheKeys(t *testing.T) {
	accounts := map[string]*corev1.ServiceAccount{
		"team/puller": account("puller", "sa-uid", map[string]string{"registry.test/role": "reader"}),
		"team/other":  account("other", "other-uid", map[string]string{"registry.test/role": "reader"}),
	}
	for _, tc := range []struct {
		name      string
		cacheType kubeletconfigv1.ServiceAccountTokenCacheType
		// mutate changes the cluster between the first and second pull.
		mutate func(accounts map[string]*corev1.ServiceAccount)
		pod    *corev1.Pod // of the second pull; the first is web-1 of puller
		runs   int
	}{
		{name: "ServiceAccount: same account, another pod", cacheType: "ServiceAccount", pod: podWith("web-2", "puller"), runs: 1},
		{name: "ServiceAccount: another account", cacheType: "ServiceAccount", pod: podWith("web-2", "other"), runs: 2},
		{
			name: "ServiceAccount: account recreated", cacheType: "ServiceAccount", pod: podWith("web-1", "puller"), runs: 2,
			mutate: func(a map[string]*corev1.ServiceAccount) {
				a["team/puller"] = account("puller", "new-uid", a["team/puller"].Annotations)
			},
		},
		{
			name: "ServiceAccount: annotation changed", cacheType: "ServiceAccount", pod: podWith("web-1", "puller"), runs: 2,
			mutate: func(a map[string]*corev1.ServiceAccount) {
				a["team/puller"] = account("puller", "sa-uid", map[string]string{"registry.test/role": "writer"})
			},
		},
		{
			name: "ServiceAccount: unrelated annotation changed", cacheType: "ServiceAccount", pod: podWith("web-1", "puller"), runs: 1,
			mutate: func(a map[string]*corev1.ServiceAccount) {
				a["team/puller"] = account("puller", "sa-uid", map[string]string{"registry.test/role": "reader", "x": "y"})
			},
		},
		{name: "Token: same pod, same token", cacheType: "Token", pod: podWith("web-1", "puller"), runs: 1},
		{name: "Token: another pod, another token", cacheType: "Token", pod: podWith("web-2", "puller"), runs: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			cluster := &fakeCluster{accounts: map[string]*corev1.ServiceAccount{}}
			for k, v := range accounts {
				cluster.accounts[k] = v
			}
			ps := e.providers(cluster.options(), e.tokenProvider(tc.cacheType, map[string]string{"PLUGIN_CACHE_KEY_TYPE": "Registry"}))
			mustCredentials(t, ps, "a.registry.test/app", podWith("web-1", "puller"))
			if tc.mutate != nil {
				tc.mutate(cluster.accounts)
			}
			if creds := mustCredentials(t, ps, "a.registry.test/other", tc.pod); len(creds) != 1 {
				t.Fatalf("credentials %v", creds)
			}
			if got := e.runs(pluginName); got != tc.runs {
				t.Errorf("plugin ran %d times, want %d", got, tc.runs)
			}
		})
	}
}

func TestCredentialsServiceAccountSkipsAndErrors(t *testing.T) {
	accounts := map[string]*corev1.ServiceAccount{
		"team/puller":     account("puller", "sa-uid", map[string]string{"registry.test/role": "reader"}),
		"team/unmarked":   account("unmarked", "u-uid", map[string]string{"registry.test/region": "eu"}),
		"team/echo-token": account("echo-token", "e-uid", map[string]string{"registry.test/role": "reader"}),
	}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		require   bool
		cacheType kubeletconfigv1.ServiceAccountTokenCacheType
		env       map[string]string
		tokenErr  error
		creds     int
		err       string
		runs      int
		tokens    int
	}{
		{name: "no service account, required", pod: podWith("static", ""), require: true},
		{name: "no pod, required", require: true},
		{name: "no service account, not required", pod: podWith("static", ""), creds: 1, runs: 1},
		{name: "required annotation missing", pod: podWith("web", "unmarked"), require: true},
		{name: "service account missing", pod: podWith("web", "gone"), require: true, err: `getting service account team/gone: serviceaccounts "gone" not found`},
		{
			name: "token request fails", pod: podWith("web", "puller"), require: true, tokenErr: errors.New("forbidden"), tokens: 1,
			err: "requesting a token of service account team/puller for audience registry.test: forbidden",
		},
		{
			name: "token echoed as password with cacheType ServiceAccount", pod: podWith("web", "echo-token"), require: true,
			env: map[string]string{"PLUGIN_MODE": "echotoken"}, runs: 1, tokens: 1,
			err: "the plugin returned the service account token as a password, which only cacheType Token allows",
		},
		{
			name: "token echoed as password with cacheType Token", pod: podWith("web", "echo-token"), require: true, cacheType: "Token",
			env: map[string]string{"PLUGIN_MODE": "echotoken"}, creds: 1, runs: 1, tokens: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			cluster := &fakeCluster{accounts: accounts, tokenErr: tc.tokenErr}
			p := e.tokenProvider(kubeletconfigv1.ServiceAccountServiceAccountTokenCacheType, tc.env)
			if tc.cacheType != "" {
				p.TokenAttributes.CacheType = tc.cacheType
			}
			p.TokenAttributes.RequireServiceAccount = ptr.To(tc.require)
			if !tc.require {
				p.TokenAttributes.RequiredServiceAccountAnnotationKeys = nil
			}
			ps := e.providers(cluster.options(), p)
			creds, err := ps.Credentials(context.Background(), "a.registry.test/app", tc.pod)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", err, tc.err)
			case err != nil && strings.Contains(err.Error(), "token-for-"):
				t.Errorf("error %q holds the token", err)
			}
			if len(creds) != tc.creds {
				t.Errorf("%d credentials, want %d", len(creds), tc.creds)
			}
			if got := e.runs(pluginName); got != tc.runs {
				t.Errorf("plugin ran %d times, want %d", got, tc.runs)
			}
			if len(cluster.requests) != tc.tokens {
				t.Errorf("%d token requests, want %d", len(cluster.requests), tc.tokens)
			}
		})
	}
}

func TestNew(t *testing.T) {
	e := newTestEnv(t)
	write := func(ps ...kubeletconfigv1.CredentialProvider) string {
		cfg := kubeletconfigv1.CredentialProviderConfig{Providers: ps}
		cfg.APIVersion, cfg.Kind = "kubelet.config.k8s.io/v1", "CredentialProviderConfig"
		data, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write(e.provider(pluginName, []string{"*.registry.test"}, nil))
	invalid := e.provider(pluginName, []string{"*.registry.test"}, nil)
	invalid.DefaultCacheDuration = nil
	for _, tc := range []struct {
		name string
		opts Options
		err  string
	}{
		{name: "valid", opts: Options{ConfigPath: good, BinDir: e.binDir}},
		{name: "no bin dir", opts: Options{ConfigPath: good}, err: "credential provider bin dir is not set"},
		{name: "missing bin dir", opts: Options{ConfigPath: good, BinDir: filepath.Join(e.dir, "nope")}, err: "reading credential provider bin dir"},
		{name: "missing config", opts: Options{ConfigPath: filepath.Join(e.dir, "nope"), BinDir: e.binDir}, err: "no such file or directory"},
		{name: "invalid config", opts: Options{ConfigPath: write(invalid), BinDir: e.binDir}, err: "providers[0].defaultCacheDuration: Required value"},
		{
			name: "token attributes without service accounts",
			opts: Options{ConfigPath: write(e.tokenProvider("Token", nil)), BinDir: e.binDir},
			err:  "setting up credential provider " + pluginName + ": tokenAttributes is set but",
		},
		{
			name: "token attributes with service accounts",
			opts: Options{ConfigPath: write(e.tokenProvider("Token", nil)), BinDir: e.binDir, ServiceAccountToken: (&fakeCluster{}).token, ServiceAccount: (&fakeCluster{}).serviceAccount},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := New(tc.opts)
			if tc.err == "" {
				if err != nil || ps == nil {
					t.Fatalf("New: %v, %v", ps, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestNilProviders(t *testing.T) {
	var ps *Providers
	if creds, err := ps.Credentials(context.Background(), "gcr.io/app", nil); creds != nil || err != nil {
		t.Errorf("Credentials of nil Providers = %v, %v", creds, err)
	}
}

func TestCredentialHidesSecret(t *testing.T) {
	c := Credential{Provider: "ecr", Registry: "*.dkr.ecr.us-east-1.amazonaws.com", Username: "AWS", Password: password}
	for _, s := range []string{c.String(), fmt.Sprintf("%v %+v %s", c, c, c), fmt.Sprint(c.MarshalLog())} {
		if strings.Contains(s, password) {
			t.Errorf("%q holds the password", s)
		}
	}
}
