package main

import "testing"

func TestNodesCount(t *testing.T) {
	tests := []struct {
		env     string
		want    int
		wantErr bool
	}{
		{env: "", want: 1},
		{env: "1", want: 1},
		{env: "3", want: 3},
		{env: "0", wantErr: true},
		{env: "-2", wantErr: true},
		{env: "two", wantErr: true},
	}
	for _, tt := range tests {
		t.Run("NODES="+tt.env, func(t *testing.T) {
			t.Setenv("NODES", tt.env)
			got, err := nodesCount()
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("nodesCount() = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
