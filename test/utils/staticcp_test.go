package utils

import (
	"slices"
	"testing"
)

func TestParseLdd(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want []string
	}{
		{
			name: "glibc binary",
			out: "\tlinux-vdso.so.1 (0x00007ffd)\n" +
				"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f77)\n" +
				"\t/lib64/ld-linux-x86-64.so.2 (0x00007f78)\n",
			want: []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"},
		},
		{
			name: "a library that is not found has no path",
			out:  "\tlibfoo.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n",
			want: []string{"/lib/libc.so.6"},
		},
		{name: "static binary", out: "\tnot a dynamic executable\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseLdd(tt.out); !slices.Equal(got, tt.want) {
				t.Errorf("parseLdd = %q, want %q", got, tt.want)
			}
		})
	}
}
