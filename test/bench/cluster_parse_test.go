package bench

import (
	"testing"
	"time"
)

func TestDNSAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      bool
	}{
		{"answered", "Server:\t\t10.0.0.10\nAddress:\t10.0.0.10:53\n\nName:\tkubernetes.default.svc.cluster.local\nAddress: 10.0.0.1\n", true},
		{"only the server's address", "Server:\t\t10.0.0.1\nAddress:\t10.0.0.1:53\n\n** server can't find kubernetes.default.svc.cluster.local: NXDOMAIN\n", false},
		{"the server's address without a port", "Server:    10.0.0.1\nAddress:    10.0.0.1\n\n** server can't find kubernetes.default.svc.cluster.local: NXDOMAIN\n", false},
		{"another address", "Server:\t10.0.0.10\nAddress:\t10.0.0.10:53\n\nName:\tkubernetes.default.svc.cluster.local\nAddress: 10.0.0.11\n", false},
		{"timed out", ";; connection timed out; no servers could be reached\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dnsAnswer(tc.out, "10.0.0.1"); got != tc.want {
				t.Errorf("dnsAnswer = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseRTT(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []rttResult
		wantErr   bool
	}{
		{
			name: "two lines among others",
			out: "2026/11/25 listening\n" +
				"result addr=10.244.2.5:7000 mode=rr n=2000 p50_ns=81000 p90_ns=90000 p99_ns=120000 max_ns=900000\n" +
				"result addr=10.244.2.5:7000 mode=crr n=2000 p50_ns=300000 p90_ns=400000 p99_ns=800000 max_ns=9000000\n",
			want: []rttResult{
				{addr: "10.244.2.5:7000", mode: "rr", p50: 81 * time.Microsecond, p90: 90 * time.Microsecond, p99: 120 * time.Microsecond},
				{addr: "10.244.2.5:7000", mode: "crr", p50: 300 * time.Microsecond, p90: 400 * time.Microsecond, p99: 800 * time.Microsecond},
			},
		},
		{name: "no result", out: "rtt: dial tcp: connection refused\n", wantErr: true},
		{name: "bad number", out: "result addr=a:1 mode=rr p50_ns=x p90_ns=1 p99_ns=1\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRTT(tc.out)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("result %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
