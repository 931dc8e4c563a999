package options

import (
	"os"
	"strings"
	"testing"
)

// kubeletFieldRow is a field's row in docs/kubeadm.md.
func kubeletFieldRow(f kubeletField) string {
	accepted := ""
	if f.support == refused {
		accepted = "unset, empty or zero"
		for _, a := range f.accepted {
			accepted += ", `" + strings.Trim(a, `"`) + "`"
		}
	}
	return "| `" + f.name + "` | " + f.support.String() + " | " + accepted + " | " + f.note + " |"
}

// TestKubeadmDocListsFields keeps docs/kubeadm.md's table equal to
// kubeletFields. NODELET_PRINT_KUBELET_FIELDS=1 prints the table.
func TestKubeadmDocListsFields(t *testing.T) {
	var rows []string
	for _, f := range kubeletFields {
		rows = append(rows, kubeletFieldRow(f))
	}
	if os.Getenv("NODELET_PRINT_KUBELET_FIELDS") != "" {
		t.Log("\n" + strings.Join(rows, "\n"))
	}
	doc, err := os.ReadFile("../../docs/kubeadm.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if !strings.Contains(string(doc), row+"\n") {
			t.Errorf("docs/kubeadm.md lacks the row\n%s", row)
		}
	}
}
