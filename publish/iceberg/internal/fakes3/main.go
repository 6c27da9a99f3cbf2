// Command fakes3 serves an in-memory S3 API (github.com/johannesboyne/gofakes3)
// on 127.0.0.1 for the publisher's object-store tests. It is a FAKE, not a
// real S3-compatible server: the tests start it as a separate process and
// reach it over HTTP as they would a real one. It prints its URL on stdout
// and serves until stdin closes, with the buckets named as arguments.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	backend := s3mem.New()
	for _, b := range os.Args[1:] {
		if err := backend.CreateBucket(b); err != nil {
			fmt.Fprintln(os.Stderr, "fakes3:", err)
			os.Exit(1)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakes3:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	if err := http.Serve(ln, gofakes3.New(backend).Server()); err != nil {
		fmt.Fprintln(os.Stderr, "fakes3:", err)
		os.Exit(1)
	}
}
