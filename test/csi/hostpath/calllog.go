package hostpath

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// CallRecord is one line of the call log: a CSI call the driver served.
type CallRecord struct {
	// Method is the short name of the RPC, e.g. "NodePublishVolume".
	Method   string `json:"method"`
	VolumeID string `json:"volume_id,omitempty"`
	// TargetPath is the publish target, or the volume path of
	// NodeGetVolumeStats.
	TargetPath        string `json:"target_path,omitempty"`
	StagingTargetPath string `json:"staging_target_path,omitempty"`
	// VolumeContext is what the caller passed: on NodePublishVolume it
	// carries the pod information (csi.storage.k8s.io/pod.name, ...) and
	// service account tokens when the CSIDriver asks for them.
	VolumeContext  map[string]string `json:"volume_context,omitempty"`
	PublishContext map[string]string `json:"publish_context,omitempty"`
	// SecretKeys are the names of the secrets the caller passed, sorted;
	// their values are not recorded.
	SecretKeys []string `json:"secret_keys,omitempty"`
	// Parameters are CreateVolume's: the StorageClass's, and the PVC's
	// and PV's names with external-provisioner's --extra-create-metadata.
	Parameters map[string]string `json:"parameters,omitempty"`
	NodeID     string            `json:"node_id,omitempty"`
	Readonly   bool              `json:"readonly,omitempty"`
	// Code is the gRPC status code of the answer ("OK" on success).
	Code string    `json:"code"`
	Time time.Time `json:"time"`
}

// callLog appends CallRecords to a file; a nil *callLog records nothing.
type callLog struct {
	mu   sync.Mutex
	file *os.File
}

func openCallLog(name string) (*callLog, error) {
	if name == "" {
		return nil, nil
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the call log: %w", err)
	}
	return &callLog{file: f}, nil
}

func (l *callLog) write(rec CallRecord) error {
	if l == nil {
		return nil
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding a call record: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("writing the call log: %w", err)
	}
	return nil
}

func (l *callLog) close() error {
	if l == nil {
		return nil
	}
	return l.file.Close()
}

// interceptor records every unary call after it has been served.
func (l *callLog) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if l == nil {
		return resp, err
	}
	rec := recordOf(path.Base(info.FullMethod), req)
	rec.Code = status.Code(err).String()
	rec.Time = time.Now().UTC()
	if werr := l.write(rec); werr != nil {
		klog.ErrorS(werr, "Writing the call log failed", "method", rec.Method)
	}
	return resp, err
}

// recordOf picks the fields a CallRecord keeps out of any CSI request.
func recordOf(method string, req any) CallRecord {
	rec := CallRecord{Method: method}
	if r, ok := req.(interface{ GetVolumeId() string }); ok {
		rec.VolumeID = r.GetVolumeId()
	}
	if r, ok := req.(interface{ GetTargetPath() string }); ok {
		rec.TargetPath = r.GetTargetPath()
	}
	if r, ok := req.(interface{ GetVolumePath() string }); ok {
		rec.TargetPath = r.GetVolumePath()
	}
	if r, ok := req.(interface{ GetStagingTargetPath() string }); ok {
		rec.StagingTargetPath = r.GetStagingTargetPath()
	}
	if r, ok := req.(interface{ GetVolumeContext() map[string]string }); ok {
		rec.VolumeContext = r.GetVolumeContext()
	}
	if r, ok := req.(interface{ GetPublishContext() map[string]string }); ok {
		rec.PublishContext = r.GetPublishContext()
	}
	if r, ok := req.(interface{ GetSecrets() map[string]string }); ok && len(r.GetSecrets()) > 0 {
		rec.SecretKeys = slices.Sorted(maps.Keys(r.GetSecrets()))
	}
	if r, ok := req.(interface{ GetParameters() map[string]string }); ok {
		rec.Parameters = r.GetParameters()
	}
	if r, ok := req.(interface{ GetNodeId() string }); ok {
		rec.NodeID = r.GetNodeId()
	}
	if r, ok := req.(interface{ GetReadonly() bool }); ok {
		rec.Readonly = r.GetReadonly()
	}
	return rec
}

// ReadCallLog reads the records of a call log; a missing file holds none.
// A last line still being written is skipped.
func ReadCallLog(name string) ([]CallRecord, error) {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the call log: %w", err)
	}
	defer func() { _ = f.Close() }()
	var recs []CallRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var rec CallRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			continue
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the call log: %w", err)
	}
	return recs, nil
}
