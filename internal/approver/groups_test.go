package approver

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidBootstrapGroupIsTheAPIServersPattern checks the hand-written
// check against the API server's pattern for bootstrap token groups.
func TestValidBootstrapGroupIsTheAPIServersPattern(t *testing.T) {
	pattern := regexp.MustCompile(`\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z`)
	cases := []string{
		"",
		"system:bootstrappers:",
		"system:bootstrappers:a",
		"system:bootstrappers:0",
		"system:bootstrappers:-",
		"system:bootstrappers::",
		"system:bootstrappers:a-",
		"system:bootstrappers:a:",
		"system:bootstrappers:-a",
		"system:bootstrappers::a",
		"system:bootstrappers:nodelet:node:worker-1",
		"system:bootstrappers:nodelet:node:Worker-1",
		"system:bootstrappers:nodelet:node:worker.1",
		"system:bootstrappers:nodelet:node:worker_1",
		"system:bootstrappers:nodelet:node:wörker",
		"system:bootstrappers:a\n",
		"System:bootstrappers:a",
		"system:bootstrapper:a",
		"xsystem:bootstrappers:a",
		"system:bootstrappers:" + strings.Repeat("a", 255),
		"system:bootstrappers:" + strings.Repeat("a", 256),
		"system:bootstrappers:" + strings.Repeat("a", 257),
		"system:bootstrappers:" + strings.Repeat("-", 255) + "a",
		"system:bootstrappers:" + strings.Repeat(":", 256) + "a",
	}
	for _, g := range cases {
		if got, want := validBootstrapGroup(g), pattern.MatchString(g); got != want {
			t.Errorf("validBootstrapGroup(%q) = %v, the API server's pattern says %v", g, got, want)
		}
	}
}
