package main

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	ca := []string{"--kubeconfig", "k", "--client-ca-cert", "c", "--client-ca-key", "k"}
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // a part of the error; empty for none
		nodes   int
		shared  bool
	}{
		{name: "a CA with its key", args: ca, nodes: 10},
		{name: "nodes", args: append([]string{"--nodes", "500"}, ca...), nodes: 500},
		{name: "shared credentials", args: []string{"--kubeconfig", "k", "--shared-credentials"}, nodes: 10, shared: true},
		{name: "no CA and no shared credentials", args: []string{"--kubeconfig", "k"}, wantErr: "--client-ca-cert"},
		{name: "no kubeconfig", args: []string{"--nodes", "5", "--shared-credentials"}, wantErr: "--kubeconfig"},
		{name: "a CA without its key", args: []string{"--kubeconfig", "k", "--client-ca-cert", "c"}, wantErr: "--client-ca-key"},
		{name: "a key without its CA", args: []string{"--kubeconfig", "k", "--client-ca-key", "k", "--shared-credentials"}, wantErr: "--client-ca-cert"},
		{name: "no nodes", args: append([]string{"--nodes", "0"}, ca...), wantErr: "--nodes"},
		{name: "too many pods", args: append([]string{"--max-pods", "3000000000"}, ca...), wantErr: "--max-pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parse(%v) error = %v, want one naming %s", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%v): %v", tc.args, err)
			}
			if o.nodes != tc.nodes || o.shared != tc.shared {
				t.Errorf("nodes = %d, shared = %v, want %d, %v", o.nodes, o.shared, tc.nodes, tc.shared)
			}
		})
	}
}
