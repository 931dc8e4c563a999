package controller

import (
	"strings"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestResolve(t *testing.T) {
	noop := func(ctrl.Manager, *Deps) error { return nil }
	reg := Registry{"pod": noop, "node": noop, "configmap": noop, "secret": noop}
	cases := []struct {
		spec    string
		want    string
		wantErr string
	}{
		{spec: "*", want: "configmap,node,pod,secret"},
		{spec: "*,-secret", want: "configmap,node,pod"},
		{spec: "node", want: "node"},
		{spec: "node,pod", want: "node,pod"},
		{spec: "-node", want: ""},
		{spec: "*,-node,node", want: "configmap,node,pod,secret"},
		{spec: " pod , node ", want: "node,pod"},
		{spec: "*,-nosuch", wantErr: `unknown controller "-nosuch" in --controllers (known: configmap, node, pod, secret)`},
		{spec: "nosuch", wantErr: `unknown controller "nosuch"`},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := reg.Resolve(strings.Split(tc.spec, ","))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != tc.want {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
}
