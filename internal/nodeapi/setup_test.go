package nodeapi

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

func TestClientCAWarning(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   v1alpha1.ServerConfig
		warn bool
		kv   []any
	}{
		{name: "client CA set", sc: v1alpha1.ServerConfig{ClientCAFile: "/etc/nodelet/pki/ca.crt"}},
		{
			name: "no client CA, webhook by default", sc: v1alpha1.ServerConfig{}, warn: true,
			kv: []any{"field", "server.clientCAFile", "webhookTokens", true, "anonymous", false},
		},
		{
			name: "no client CA, webhook off, anonymous on",
			sc: v1alpha1.ServerConfig{
				Webhook:   v1alpha1.WebhookAuthentication{Enabled: ptr.To(false)},
				Anonymous: v1alpha1.AnonymousAuthentication{Enabled: true},
			},
			warn: true, kv: []any{"field", "server.clientCAFile", "webhookTokens", false, "anonymous", true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			warn, kv := clientCAWarning(tc.sc)
			g.Expect(warn).To(Equal(tc.warn))
			g.Expect(kv).To(Equal(tc.kv))
		})
	}
}
