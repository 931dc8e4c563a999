package credentialprovider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
)

const (
	// execTimeout bounds one run of a plugin: the kubelet's catch-all
	// minute, room for a plugin to retry a failed request.
	execTimeout = time.Minute
	// execWaitDelay is how long a killed plugin's children may keep its
	// output open before the run gives up on them.
	execWaitDelay = 5 * time.Second
	// maxStderr is how much of a failed plugin's stderr its error quotes.
	maxStderr = 4 << 10

	responseKind = "CredentialProviderResponse"
)

// execPlugin runs one provider's binary.
type execPlugin struct {
	name    string
	path    string
	args    []string
	env     []string // NAME=VALUE, from the config
	gv      schema.GroupVersion
	encoder runtime.Encoder
	timeout time.Duration
	environ func() []string
}

func newExecPlugin(binDir string, p *kubeletconfigv1.CredentialProvider) (*execPlugin, error) {
	gv, ok := pluginAPIVersions[p.APIVersion]
	if !ok {
		return nil, fmt.Errorf("unsupported apiVersion %q", p.APIVersion)
	}
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, errors.New("no JSON serializer")
	}
	env := make([]string, 0, len(p.Env))
	for _, e := range p.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	return &execPlugin{
		name:    p.Name,
		path:    filepath.Join(binDir, p.Name),
		args:    slices.Clone(p.Args),
		env:     env,
		gv:      gv,
		encoder: codecs.EncoderForVersion(info.Serializer, gv),
		timeout: execTimeout,
		environ: os.Environ,
	}, nil
}

// run execs the plugin with req, encoded in the provider's apiVersion, on
// its stdin and decodes the response on its stdout. The plugin gets
// nodelet's environment with the config's env appended, so the config's
// values win. Errors never quote the request or the response.
func (e *execPlugin) run(ctx context.Context, req *credentialproviderapi.CredentialProviderRequest) (*credentialproviderapi.CredentialProviderResponse, error) {
	data, err := runtime.Encode(e.encoder, req)
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.path, e.args...)
	cmd.Env = slices.Concat(e.environ(), e.env)
	cmd.Stdin = bytes.NewReader(data)
	var stdout bytes.Buffer
	stderr := &cappedBuffer{max: maxStderr}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	cmd.WaitDelay = execWaitDelay
	err = cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("running plugin %s: timed out after %s%s", e.path, e.timeout, stderr.quote())
	}
	if err != nil {
		return nil, fmt.Errorf("running plugin %s: %w%s", e.path, err, stderr.quote())
	}
	return e.decode(stdout.Bytes())
}

// decode checks the response's apiVersion and kind and decodes it
// strictly. Decoding errors are not wrapped: they may quote the credentials.
func (e *execPlugin) decode(data []byte) (*credentialproviderapi.CredentialProviderResponse, error) {
	gvk, err := json.DefaultMetaFactory.Interpret(data)
	if err != nil {
		return nil, errors.New("the plugin's stdout is not a JSON object")
	}
	if got := gvk.GroupVersion(); got != e.gv {
		return nil, fmt.Errorf("the response's apiVersion %q is not the request's %q", got.String(), e.gv.String())
	}
	if gvk.Kind != responseKind {
		return nil, fmt.Errorf("the response's kind %q is not %s", gvk.Kind, responseKind)
	}
	obj, _, err := codecs.UniversalDecoder().Decode(data, nil, nil)
	switch {
	case runtime.IsStrictDecodingError(err):
		return nil, errors.New("the response has unknown or duplicate fields")
	case err != nil:
		return nil, errors.New("the response does not decode as a " + responseKind)
	}
	resp, ok := obj.(*credentialproviderapi.CredentialProviderResponse)
	if !ok {
		return nil, fmt.Errorf("the response decoded to %T", obj)
	}
	return resp, nil
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	max       int
	buf       bytes.Buffer
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		b.truncated = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

// quote returns ": stderr: ..." for an error message, or "" when the plugin
// wrote nothing.
func (b *cappedBuffer) quote() string {
	s := strings.TrimSpace(b.buf.String())
	if s == "" {
		return ""
	}
	if b.truncated {
		s += " (truncated)"
	}
	return ": stderr: " + s
}
