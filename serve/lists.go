package serve

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/rlctl/rlctl/engine"
)

// listRequest is the body of /v1/lists/add, /remove and /get: the list, and the request
// whose keys (one for each rule naming the list) go on it, come off it or are looked up.
type listRequest struct {
	List       string            `json:"list"`
	Attributes map[string]string `json:"attributes"`
}

// listMemberJSON is one rule's key as /v1/lists/* answer it: whether it is on the list
// after the call.
type listMemberJSON struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	Key    string `json:"key"`
	Member bool   `json:"member"`
}

// list serves /v1/lists/{op}: add and remove put a request's keys on a runtime list or
// take them off (engine.AddToList, engine.RemoveFromList) and need the admin right, each
// attempt logged at warn level; get reads their membership (engine.InList) with the read
// right every caller has.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	if op != "add" && op != "remove" && op != "get" {
		problem(w, http.StatusNotFound, "No such operation", "POST /v1/lists/add, /v1/lists/remove or /v1/lists/get")
		return
	}
	if op != "get" && (s.admin == nil || !s.admin(r)) {
		s.log.Warn("rlctl serve: list change refused: no admin right", "op", op, "remote", r.RemoteAddr)
		problem(w, http.StatusForbidden, "Forbidden", "changing a list needs the admin right: an Authorization: Bearer token listed as \"admin TOKEN\" in rlctl serve -auth-tokens")
		return
	}
	var body listRequest
	if err := readJSON(w, r, &body); err != nil {
		refuse(w, "Not a list request", err)
		return
	}
	if err := body.check(); err != nil {
		problem(w, http.StatusBadRequest, "Not a list request", err.Error())
		return
	}
	e, ctx, attrs := s.Engine(), r.Context(), engine.Attrs(body.Attributes)
	var members []engine.ListMember
	var err error
	switch op {
	case "add":
		members, err = e.AddToList(ctx, body.List, attrs)
	case "remove":
		members, err = e.RemoveFromList(ctx, body.List, attrs)
	case "get":
		members, err = e.InList(ctx, body.List, attrs)
	}
	if op != "get" {
		s.log.Warn("rlctl serve: list "+op, "remote", r.RemoteAddr, "list", body.List, "attributes", body.Attributes, "ok", err == nil)
	}
	switch {
	case errors.Is(err, engine.ErrNoList):
		problem(w, http.StatusBadRequest, "No such list", err.Error())
	case errors.Is(err, engine.ErrRequest):
		problem(w, http.StatusBadRequest, "The policies cannot evaluate this request", err.Error())
	case err != nil:
		problem(w, http.StatusServiceUnavailable, "The backend failed", err.Error())
	default:
		out := make([]listMemberJSON, len(members))
		for i, m := range members {
			out[i] = listMemberJSON{Policy: m.Policy, Rule: m.Rule, Key: m.Key, Member: m.Member}
		}
		writeJSON(w, http.StatusOK, map[string]any{"members": out})
	}
}

// check reports what makes the body no list request.
func (b *listRequest) check() error {
	if b.List == "" || b.Attributes == nil {
		return fmt.Errorf(`the body must be {"list": "...", "attributes": {...}}: the list a rule names (exempt or deny = list("...")), and the request whose keys it is about`)
	}
	if len(b.List) > MaxNameBytes {
		return fmt.Errorf("a list's name is at most %d bytes (MaxNameBytes)", MaxNameBytes)
	}
	return checkAttributes(b.Attributes)
}
