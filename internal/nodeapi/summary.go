package nodeapi

import (
	"net/http"
	"strconv"
)

func (s *Server) serveSummary(w http.ResponseWriter, r *http.Request) {
	only, _ := strconv.ParseBool(r.URL.Query().Get("only_cpu_and_memory"))
	sum, err := s.opts.Stats.Summary(r.Context(), only)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, sum)
}
