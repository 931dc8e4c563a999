package nodeapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fake "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/cri"
)

// checkpointingRuntime writes an archive where it is asked to, as a
// runtime with CRIU does, and keeps the requests.
type checkpointingRuntime struct {
	*recordingRuntime
	requests []*runtimeapi.CheckpointContainerRequest
}

func (r *checkpointingRuntime) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) error {
	if err := r.FakeRuntimeService.CheckpointContainer(ctx, req); err != nil {
		return err
	}
	r.requests = append(r.requests, req)
	return os.WriteFile(req.Location, []byte("archive"), 0o644)
}

func TestCheckpointFileNameIsTheKubelets(t *testing.T) {
	got := CheckpointFileName("ns", "web", "app", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if want := "checkpoint-web_ns-app-2026-01-02T03:04:05Z.tar"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseCheckpointTimeout(t *testing.T) {
	for _, tc := range []struct {
		values  []string
		want    time.Duration
		wantErr bool
	}{
		{values: nil, want: 0},
		{values: []string{"30"}, want: 30 * time.Second},
		{values: []string{"5", "7"}, want: 7 * time.Second},
		{values: []string{"soon"}, wantErr: true},
		{values: []string{"-1"}, wantErr: true},
		{values: []string{"99999999999999"}, wantErr: true},
	} {
		got, err := ParseCheckpointTimeout(tc.values)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%q: got %v, %v; want %v, error %v", tc.values, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestCheckpoint(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	rs := &checkpointingRuntime{recordingRuntime: f.rs}
	rt, err := cri.New(rs, fake.NewFakeImageService(), cri.Options{NodeName: apiNode})
	g.Expect(err).NotTo(HaveOccurred())
	f.opts.Runtime = rt
	dir := filepath.Join(t.TempDir(), "checkpoints")
	f.opts.CheckpointDir = dir

	// a running container: the runtime writes the archive in a 0700 directory, the answer names it.
	w := f.do(http.MethodPost, "/checkpoint/ns/web/app?timeout=20")
	g.Expect(w.Code).To(Equal(http.StatusOK), "body: %s", w.Body.String())
	var resp struct{ Items []string }
	g.Expect(json.Unmarshal(w.Body.Bytes(), &resp)).To(Succeed())
	want := filepath.Join(dir, "checkpoint-web_ns-app-2026-01-02T03:04:05Z.tar")
	g.Expect(resp.Items).To(Equal([]string{want}))
	g.Expect(rs.requests).To(HaveLen(1))
	g.Expect(rs.requests[0].GetContainerId()).To(Equal(f.ids["app"]))
	g.Expect(rs.requests[0].GetLocation()).To(Equal(want))
	g.Expect(rs.requests[0].GetTimeout()).To(BeEquivalentTo(20))
	st, err := os.Stat(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o700)))
	st, err = os.Stat(want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)), "a checkpoint holds the container's memory")

	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{http.MethodGet, "/checkpoint/ns/web/app", http.StatusMethodNotAllowed, ""},
		{http.MethodPost, "/checkpoint/ns/nope/app", http.StatusNotFound, `pod "ns/nope"`},
		{http.MethodPost, "/checkpoint/ns/elsewhere/app", http.StatusNotFound, `pod "ns/elsewhere"`},
		{http.MethodPost, "/checkpoint/ns/web/nope", http.StatusNotFound, `container "nope"`},
		{http.MethodPost, "/checkpoint/ns/web/app?timeout=soon", http.StatusNotFound, "cannot parse value of timeout parameter"},
		{http.MethodPost, "/checkpoint/ns/web/init", http.StatusInternalServerError, "checkpointing of ns/web/init failed"},
	} {
		w := f.do(tc.method, tc.path)
		g.Expect(w.Code).To(Equal(tc.code), "%s %s: %s", tc.method, tc.path, w.Body.String())
		g.Expect(w.Body.String()).To(ContainSubstring(tc.body), "%s %s", tc.method, tc.path)
	}
	g.Expect(rs.requests).To(HaveLen(1), "only the running container was checkpointed")

	// the runtime's failure (no CRIU) is a 500 that says so.
	rs.InjectError("CheckpointContainer", errors.New("CRIU binary not found"))
	w = f.do(http.MethodPost, "/checkpoint/ns/web/app")
	g.Expect(w.Code).To(Equal(http.StatusInternalServerError))
	g.Expect(w.Body.String()).To(And(ContainSubstring("checkpointing of ns/web/app failed"), ContainSubstring("CRIU binary not found")))

	// off (the ContainerCheckpoint gate), not served.
	f.opts.CheckpointDir = ""
	g.Expect(f.do(http.MethodPost, "/checkpoint/ns/web/app").Code).To(Equal(http.StatusNotFound))
}
