package registrar

import (
	"net/http"
	"os"
	"sync/atomic"
)

// Health answers node-driver-registrar's /healthz: 200 once the
// registration socket is being served, 503 before (the driver's name is
// not known yet) and after it is gone.
type Health struct {
	socket atomic.Pointer[string]
}

// Serving records the registration socket's path.
func (h *Health) Serving(socket string) { h.socket.Store(&socket) }

// ServeHTTP answers a health check.
func (h *Health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p := h.socket.Load()
	if p == nil {
		http.Error(w, "the CSI driver's name is not known yet", http.StatusServiceUnavailable)
		return
	}
	if fi, err := os.Stat(*p); err != nil || fi.Mode()&os.ModeSocket == 0 {
		http.Error(w, "the registration socket "+*p+" is missing", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}
