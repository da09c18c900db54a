package httplimit

import (
	"net/http"

	"github.com/rlctl/rlctl/engine"
)

// SetHeaders exposes the header writer to the fuzz target: it writes d's fields to h as
// the middleware configured by opts would, and returns the Retry-After set (-1: none).
func SetHeaders(h http.Header, d *engine.Decision, opts ...Option) int64 {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	return c.setHeaders(h, d)
}
