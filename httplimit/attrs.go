package httplimit

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/rlctl/rlctl/dsl"
)

// request is the dsl.Request view of an *http.Request: attributes are computed when a
// policy reads them, the client address and the identity at most once.
type request struct {
	r     *http.Request
	c     *config
	ip    string
	id    dsl.Request
	hasIP bool
	hasID bool
}

// Attr implements dsl.Request.
func (q *request) Attr(name string) string {
	if len(q.c.attrs) > 0 {
		if f, ok := q.c.attrs[name]; ok {
			return f(q.r)
		}
	}
	switch name {
	case "ip":
		if !q.hasIP {
			q.ip, q.hasIP = q.c.proxies.clientIP(q.r), true
		}
		return q.ip
	case "method":
		return q.r.Method
	case "path":
		return q.r.URL.Path
	case "host":
		return hostOnly(q.r.Host)
	case "content_length":
		if q.r.ContentLength < 0 {
			return ""
		}
		return strconv.FormatInt(q.r.ContentLength, 10)
	}
	if q.c.identity == nil {
		return ""
	}
	if !q.hasID {
		q.id, q.hasID = q.c.identity(q.r), true
	}
	if q.id == nil {
		return ""
	}
	return q.id.Attr(name)
}

// hostOnly strips the port from a Host header value and lowers its case.
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && i > strings.LastIndexByte(h, ']') {
		h = h[:i]
	}
	return strings.ToLower(h)
}
