package controller

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShortened(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456789… (shortened)"},
		// A cut inside a rune moves back to its start.
		{"abcdefghé", 9, "abcdefgh… (shortened)"},
	}
	for _, tc := range tests {
		if got := shortened(tc.in, tc.n); got != tc.want {
			t.Errorf("shortened(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	long := strings.Repeat("é", 1000)
	if got := shortened(long, maxManifestErrorInEvent); !utf8.ValidString(got) || len(got) > maxManifestErrorInEvent+len("… (shortened)") {
		t.Errorf("shortened a long text to %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}
