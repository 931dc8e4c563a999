// Command web is the long-running server of the nodelet.test/web image: a
// small HTTP server that needs no command or arguments, so that
// `kubectl create deployment web --image=nodelet.test/web:1.0` gives
// Running, Ready pods. It listens on $PORT (8080 by default), answers every
// path with the pod's host name and the path, /healthz with "ok", logs one
// line per request on standard output, and exits on SIGTERM or SIGINT after
// finishing the requests in flight.
//
// It is built statically (CGO_ENABLED=0) by test/utils and is the only file
// of the image.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := serve(); err != nil {
		log.Printf("serving: %v", err)
		os.Exit(1)
	}
	log.Printf("stopped")
}

func serve() error {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("request method=%s path=%s remote=%s", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "hello from %s, you asked for %s\n", host, r.URL.Path)
	})
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("listening addr=:%s host=%s", port, host)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
