package podspec

import "testing"

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"A": "x", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "x"},
		{"a-$(A)-b", "a-x-b"},
		{"$(EMPTY)", ""},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$x"},
		{"$$", "$"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"end$", "end$"},
		{"$(A)$(A)", "xx"},
	}
	for _, tt := range tests {
		if got := ExpandVars(tt.in, lookup); got != tt.want {
			t.Errorf("ExpandVars(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
