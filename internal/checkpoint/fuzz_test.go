package checkpoint

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// FuzzUnmarshalCheckpoint feeds arbitrary bytes to the decode path. It must
// never panic; every error must say whether the input is corrupt or of an
// unsupported version (never both); whatever it accepts must verify and
// survive a marshal and unmarshal unchanged. Seeds live in
// testdata/fuzz/FuzzUnmarshalCheckpoint.
func FuzzUnmarshalCheckpoint(f *testing.F) {
	for _, v := range []podState{{}, {Attempt: 1, Phase: "Running", Restarts: map[string]int{"app": 3}}} {
		b, err := (&Data[podState]{Schema: schemaV2, Value: v}).MarshalCheckpoint()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := &Data[podState]{Schema: schemaV2}
		err := d.UnmarshalCheckpoint(b)
		if err != nil {
			corrupt, unsupported := errors.Is(err, ErrCorruptCheckpoint), errors.Is(err, ErrUnsupportedVersion)
			if corrupt == unsupported {
				t.Fatalf("error %v: corrupt %v, unsupported version %v; want exactly one", err, corrupt, unsupported)
			}
			if !reflect.DeepEqual(d.Value, podState{}) {
				t.Fatalf("Value = %+v after error %v, want the zero value", d.Value, err)
			}
			if d.VerifyChecksum() == nil {
				t.Fatalf("VerifyChecksum succeeds after error %v", err)
			}
			return
		}
		if err := d.VerifyChecksum(); err != nil {
			t.Fatalf("VerifyChecksum after a successful unmarshal: %v", err)
		}
		if canonical, err := canonicalJSON(d.canonical); err != nil || !bytes.Equal(canonical, d.canonical) {
			t.Fatalf("canonical form %s is not stable: %s, %v", d.canonical, canonical, err)
		}
		again, err := d.MarshalCheckpoint()
		if err != nil {
			t.Fatalf("MarshalCheckpoint of an accepted value: %v", err)
		}
		d2 := &Data[podState]{Schema: schemaV2}
		if err := d2.UnmarshalCheckpoint(again); err != nil {
			t.Fatalf("UnmarshalCheckpoint(%s) of a re-marshaled value: %v", again, err)
		}
		if d2.MigratedFrom() != 0 {
			t.Fatalf("re-marshaled value migrated again from %d", d2.MigratedFrom())
		}
		third, err := d2.MarshalCheckpoint()
		if err != nil || !bytes.Equal(third, again) {
			t.Fatalf("marshal is not stable:\n%s\n%s (%v)", again, third, err)
		}
	})
}

// FuzzValidateKey checks that an accepted key always names a file directly in
// the store's directory that is neither a temporary nor a quarantined file.
func FuzzValidateKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateKey(key)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
			}
			return
		}
		const dir = "/var/lib/nodelet/checkpoints"
		p := filepath.Join(dir, key)
		if filepath.Dir(p) != dir || filepath.Base(p) != key {
			t.Fatalf("key %q resolves to %s, outside %s or renamed", key, p, dir)
		}
		if atomicfile.IsTemp(key) || strings.Contains(key, quarantineMarker) || len(key) > MaxKeyLength {
			t.Fatalf("key %q is accepted but looks like a temporary or quarantined file or is too long", key)
		}
	})
}
