package registrar

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestHealth(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "reg.sock")
	plain := filepath.Join(dir, "file")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tests := []struct {
		name    string
		serving string
		want    int
	}{
		{name: "name not known", want: http.StatusServiceUnavailable},
		{name: "socket served", serving: socket, want: http.StatusOK},
		{name: "socket missing", serving: filepath.Join(dir, "gone.sock"), want: http.StatusServiceUnavailable},
		{name: "not a socket", serving: plain, want: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Health
			if tt.serving != "" {
				h.Serving(tt.serving)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", http.NoBody))
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d (%s)", rec.Code, tt.want, rec.Body)
			}
		})
	}
}
