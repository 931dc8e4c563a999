package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// podState stands for what the pod reconciler keeps.
type podState struct {
	Attempt  int            `json:"attempt"`
	Phase    string         `json:"phase"`
	Restarts map[string]int `json:"restarts,omitempty"`
}

// podStateV2 is podState after a field was added in a later release.
type podStateV2 struct {
	Attempt    int            `json:"attempt"`
	Phase      string         `json:"phase"`
	Restarts   map[string]int `json:"restarts,omitempty"`
	Terminated bool           `json:"terminated,omitempty"`
}

func marshal(t *testing.T, c Checkpoint) []byte {
	t.Helper()
	b, err := c.MarshalCheckpoint()
	if err != nil {
		t.Fatalf("MarshalCheckpoint: %v", err)
	}
	return b
}

func TestDataRoundTrip(t *testing.T) {
	in := NewData(podState{Attempt: 2, Phase: "Running", Restarts: map[string]int{"app": 1, "sidecar": 4}})
	b := marshal(t, in)
	if err := in.VerifyChecksum(); err != nil {
		t.Errorf("VerifyChecksum after marshal: %v", err)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("envelope is not JSON: %v", err)
	}
	if got := len(env); got != 3 || env["version"] == nil || env["data"] == nil || env["checksum"] == nil {
		t.Errorf("envelope = %s, want exactly version, data and checksum", b)
	}

	out := &Data[podState]{}
	if err := out.UnmarshalCheckpoint(b); err != nil {
		t.Fatalf("UnmarshalCheckpoint: %v", err)
	}
	if err := out.VerifyChecksum(); err != nil {
		t.Errorf("VerifyChecksum: %v", err)
	}
	if !reflect.DeepEqual(out.Value, in.Value) {
		t.Errorf("Value = %+v, want %+v", out.Value, in.Value)
	}
	if out.Version() != 1 || out.MigratedFrom() != 0 {
		t.Errorf("Version, MigratedFrom = %d, %d; want 1, 0", out.Version(), out.MigratedFrom())
	}
}

// The checksum covers the JSON document, not its layout or the Go type: a file
// written by hand or by an older struct still verifies.
func TestDataChecksumIsCanonical(t *testing.T) {
	golden, err := os.ReadFile("testdata/v1-pretty.json")
	if err != nil {
		t.Fatal(err)
	}
	want := podStateV2{Attempt: 3, Phase: "Running", Restarts: map[string]int{"app": 2}}

	t.Run("pretty-printed, unsorted golden file", func(t *testing.T) {
		d := &Data[podStateV2]{}
		if err := d.UnmarshalCheckpoint(golden); err != nil {
			t.Fatalf("UnmarshalCheckpoint: %v", err)
		}
		if !reflect.DeepEqual(d.Value, want) {
			t.Errorf("Value = %+v, want %+v", d.Value, want)
		}
	})
	t.Run("written by the old struct, read by the new one", func(t *testing.T) {
		b := marshal(t, NewData(podState{Attempt: 3, Phase: "Running", Restarts: map[string]int{"app": 2}}))
		d := &Data[podStateV2]{}
		if err := d.UnmarshalCheckpoint(b); err != nil {
			t.Fatalf("UnmarshalCheckpoint: %v", err)
		}
		if !reflect.DeepEqual(d.Value, want) {
			t.Errorf("Value = %+v, want %+v", d.Value, want)
		}
	})
	t.Run("written by the new struct, read by the old one", func(t *testing.T) {
		b := marshal(t, NewData(podStateV2{Attempt: 3, Terminated: true}))
		d := &Data[podState]{}
		if err := d.UnmarshalCheckpoint(b); err != nil {
			t.Fatalf("UnmarshalCheckpoint: %v", err)
		}
		if d.Value.Attempt != 3 {
			t.Errorf("Attempt = %d, want 3", d.Value.Attempt)
		}
	})
	t.Run("same value, same bytes", func(t *testing.T) {
		v := podState{Attempt: 1, Restarts: map[string]int{"z": 1, "a": 2, "m": 3}}
		a, b := marshal(t, NewData(v)), marshal(t, NewData(v))
		if !bytes.Equal(a, b) {
			t.Errorf("two marshals differ:\n%s\n%s", a, b)
		}
	})
}

func TestDataReuseResetsValue(t *testing.T) {
	d := NewData(podState{Attempt: 9, Phase: "Old", Restarts: map[string]int{"x": 1}})
	if err := d.UnmarshalCheckpoint(marshal(t, NewData(podState{Attempt: 1}))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Value, podState{Attempt: 1}) {
		t.Errorf("Value = %+v, want only what was stored", d.Value)
	}
	if err := d.UnmarshalCheckpoint([]byte("garbage")); err == nil {
		t.Fatal("UnmarshalCheckpoint(garbage) succeeded")
	}
	if !reflect.DeepEqual(d.Value, podState{}) {
		t.Errorf("Value after a failed unmarshal = %+v, want the zero value", d.Value)
	}
	if err := d.VerifyChecksum(); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("VerifyChecksum after a failed unmarshal = %v, want ErrCorruptCheckpoint", err)
	}
}

func TestDataVerifyChecksumWithoutEnvelope(t *testing.T) {
	if err := NewData(1).VerifyChecksum(); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("VerifyChecksum of a fresh Data = %v, want ErrCorruptCheckpoint", err)
	}
}

// envelopeBytes builds an envelope by hand, with a correct checksum unless sum
// is given.
func envelopeBytes(version int, data string, sum ...string) []byte {
	s := ""
	if len(sum) > 0 {
		s = sum[0]
	} else {
		canonical, err := canonicalJSON([]byte(data))
		if err != nil {
			panic(err)
		}
		s = checksum(version, canonical)
	}
	return fmt.Appendf(nil, `{"version":%d,"data":%s,"checksum":%q}`, version, data, s)
}

var (
	schemaV2 = &Schema{Version: 2, Migrations: map[int]MigrateFunc{
		// Version 1 counted attempts from 0.
		1: func(data json.RawMessage) (json.RawMessage, error) {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				return nil, err
			}
			n, ok := m["attempt"].(float64)
			if !ok {
				return nil, errors.New("attempt is not a number")
			}
			m["attempt"] = n + 1
			return json.Marshal(m)
		},
	}}
	// schemaV3 has lost the migration from version 1.
	schemaV3 = &Schema{Version: 3, Migrations: map[int]MigrateFunc{
		2: func(data json.RawMessage) (json.RawMessage, error) { return data, nil },
	}}
)

func TestDataUnmarshalErrors(t *testing.T) {
	valid := string(envelopeBytes(1, `{"attempt":1}`))
	tests := []struct {
		name    string
		schema  *Schema
		in      []byte
		wantErr error // nil: success
		want    podState
		from    int // MigratedFrom on success
	}{
		{name: "valid", in: []byte(valid), want: podState{Attempt: 1}},
		{name: "empty", in: nil, wantErr: ErrCorruptCheckpoint},
		{name: "white space", in: []byte(" \n"), wantErr: ErrCorruptCheckpoint},
		{name: "not JSON", in: []byte("{not json"), wantErr: ErrCorruptCheckpoint},
		{name: "truncated", in: []byte(valid[:len(valid)/2]), wantErr: ErrCorruptCheckpoint},
		{name: "truncated by one byte", in: []byte(valid[:len(valid)-1]), wantErr: ErrCorruptCheckpoint},
		{name: "JSON array", in: []byte(`[1,2]`), wantErr: ErrCorruptCheckpoint},
		{name: "JSON null", in: []byte(`null`), wantErr: ErrCorruptCheckpoint},
		{name: "trailing data", in: []byte(valid + `{}`), wantErr: ErrCorruptCheckpoint},
		{name: "two envelopes", in: []byte(valid + valid), wantErr: ErrCorruptCheckpoint},
		{name: "no version", in: []byte(`{"data":{},"checksum":"` + strings.Repeat("0", 64) + `"}`), wantErr: ErrCorruptCheckpoint},
		{name: "version zero", in: envelopeBytes(0, `{}`), wantErr: ErrCorruptCheckpoint},
		{name: "negative version", in: envelopeBytes(-1, `{}`), wantErr: ErrCorruptCheckpoint},
		{name: "version not a number", in: []byte(`{"version":"1","data":{},"checksum":"x"}`), wantErr: ErrCorruptCheckpoint},
		{name: "no data", in: []byte(`{"version":1,"checksum":"` + strings.Repeat("0", 64) + `"}`), wantErr: ErrCorruptCheckpoint},
		{name: "no checksum", in: []byte(`{"version":1,"data":{}}`), wantErr: ErrCorruptCheckpoint},
		{name: "short checksum", in: envelopeBytes(1, `{}`, "abcd"), wantErr: ErrCorruptCheckpoint},
		{name: "checksum mismatch", in: envelopeBytes(1, `{"attempt":1}`, checksum(1, []byte(`{"attempt":2}`))), wantErr: ErrCorruptCheckpoint},
		{name: "upper-case checksum", in: envelopeBytes(1, `{}`, strings.ToUpper(checksum(1, []byte(`{}`)))), wantErr: ErrCorruptCheckpoint},
		{name: "data edited", in: []byte(strings.Replace(valid, `"attempt":1`, `"attempt":7`, 1)), wantErr: ErrCorruptCheckpoint},
		{
			// A version-2 file whose version was altered to 1 must not be
			// migrated as if it were version 1: the checksum covers it.
			name: "version edited", schema: schemaV2,
			in:      bytes.Replace(envelopeBytes(2, `{"attempt":5}`), []byte(`"version":2`), []byte(`"version":1`), 1),
			wantErr: ErrCorruptCheckpoint,
		},
		{name: "data of the wrong type", in: envelopeBytes(1, `{"attempt":"one"}`), wantErr: ErrCorruptCheckpoint},
		{name: "data not an object", in: envelopeBytes(1, `[1]`), wantErr: ErrCorruptCheckpoint},
		{name: "data null", in: envelopeBytes(1, `null`), want: podState{}},
		{name: "future version", in: envelopeBytes(2, `{"attempt":1}`), wantErr: ErrUnsupportedVersion},
		{name: "future version with a bad checksum", in: envelopeBytes(9, `{}`, strings.Repeat("0", 64)), wantErr: ErrUnsupportedVersion},
		{name: "older version migrated", schema: schemaV2, in: envelopeBytes(1, `{"attempt":1}`), want: podState{Attempt: 2}, from: 1},
		{name: "current version not migrated", schema: schemaV2, in: envelopeBytes(2, `{"attempt":1}`), want: podState{Attempt: 1}},
		{name: "older version with no migration", schema: schemaV3, in: envelopeBytes(1, `{"attempt":1}`), wantErr: ErrUnsupportedVersion},
		{name: "older version migrated through the chain", schema: schemaV3, in: envelopeBytes(2, `{"attempt":4}`), want: podState{Attempt: 4}, from: 2},
		{name: "older version with a bad checksum", schema: schemaV2, in: envelopeBytes(1, `{"attempt":1}`, strings.Repeat("0", 64)), wantErr: ErrCorruptCheckpoint},
		{name: "migration fails", schema: schemaV2, in: envelopeBytes(1, `{"attempt":"x"}`), wantErr: ErrCorruptCheckpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Data[podState]{Schema: tt.schema}
			err := d.UnmarshalCheckpoint(tt.in)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("UnmarshalCheckpoint(%s) = %v, want success", tt.in, err)
				}
				if err := d.VerifyChecksum(); err != nil {
					t.Errorf("VerifyChecksum: %v", err)
				}
				if !reflect.DeepEqual(d.Value, tt.want) {
					t.Errorf("Value = %+v, want %+v", d.Value, tt.want)
				}
				if d.MigratedFrom() != tt.from || d.Version() != tt.schema.version() {
					t.Errorf("MigratedFrom, Version = %d, %d; want %d, %d", d.MigratedFrom(), d.Version(), tt.from, tt.schema.version())
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("UnmarshalCheckpoint(%q) = %v, want %v", tt.in, err, tt.wantErr)
			}
			if errors.Is(tt.wantErr, ErrUnsupportedVersion) && errors.Is(err, ErrCorruptCheckpoint) {
				t.Errorf("error %v matches ErrCorruptCheckpoint too; an unsupported version is not corrupt", err)
			}
		})
	}
}

// A migrated checkpoint, once stored again, is read without migrating.
func TestDataMigratedRewrite(t *testing.T) {
	d := &Data[podState]{Schema: schemaV2}
	if err := d.UnmarshalCheckpoint(envelopeBytes(1, `{"attempt":1}`)); err != nil {
		t.Fatal(err)
	}
	b := marshal(t, d)
	again := &Data[podState]{Schema: schemaV2}
	if err := again.UnmarshalCheckpoint(b); err != nil {
		t.Fatal(err)
	}
	if again.MigratedFrom() != 0 || again.Value.Attempt != 2 {
		t.Errorf("MigratedFrom, Attempt = %d, %d; want 0, 2", again.MigratedFrom(), again.Value.Attempt)
	}
}

func TestDataMarshalErrors(t *testing.T) {
	if _, err := (&Data[podState]{Schema: &Schema{Version: -1}}).MarshalCheckpoint(); err == nil {
		t.Error("MarshalCheckpoint with a negative schema version succeeded")
	}
	if _, err := NewData(func() {}).MarshalCheckpoint(); err == nil {
		t.Error("MarshalCheckpoint of a func succeeded")
	}
}
