package main

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr bool
		nodes   int
	}{
		{"defaults", []string{"--kubeconfig", "k"}, false, 10},
		{"nodes", []string{"--kubeconfig", "k", "--nodes", "500"}, false, 500},
		{"no kubeconfig", []string{"--nodes", "5"}, true, 0},
		{"a CA without its key", []string{"--kubeconfig", "k", "--client-ca-cert", "c"}, true, 0},
		{"a CA with its key", []string{"--kubeconfig", "k", "--client-ca-cert", "c", "--client-ca-key", "k"}, false, 10},
		{"no nodes", []string{"--kubeconfig", "k", "--nodes", "0"}, true, 0},
		{"too many pods", []string{"--kubeconfig", "k", "--max-pods", "3000000000"}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parse(%v) error = %v, want an error: %v", tc.args, err, tc.wantErr)
			}
			if err == nil && o.nodes != tc.nodes {
				t.Errorf("nodes = %d, want %d", o.nodes, tc.nodes)
			}
		})
	}
}
