package serve

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rlctl/rlctl/engine"
)

// overrideRequest is the body of /v1/overrides/set, /clear and /get: the request whose
// key the override is for (its attributes), the policy and rule, and for set the figures
// (parameter name to value, as a policy writes them) and an optional end (RFC 3339).
type overrideRequest struct {
	Attributes map[string]string `json:"attributes"`
	Policy     string            `json:"policy"`
	Rule       string            `json:"rule"`
	Set        map[string]string `json:"set,omitempty"`
	Until      string            `json:"until,omitempty"`
}

// overrideJSON is an override in force, as /v1/overrides/get answers it.
type overrideJSON struct {
	Policy  string `json:"policy"`
	Rule    string `json:"rule"`
	Key     string `json:"key"`
	Figures string `json:"figures"`
	Own     string `json:"own"`
	Limit   string `json:"limit"`
	Until   string `json:"until,omitempty"`
}

// MaxOverrideFigures bounds the figures one override sets: an algorithm has a few
// parameters.
const MaxOverrideFigures = 8

// override serves /v1/overrides/{op}: set and clear change a key's override
// (engine.SetOverride, engine.ClearOverride) and need the admin right, each attempt logged
// at warn level; get reads it (engine.Override) with the read right every caller has.
func (s *Server) override(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	if op != "set" && op != "clear" && op != "get" {
		problem(w, http.StatusNotFound, "No such operation", "POST /v1/overrides/set, /v1/overrides/clear or /v1/overrides/get")
		return
	}
	if op != "get" && (s.admin == nil || !s.admin(r)) {
		s.log.Warn("rlctl serve: override refused: no admin right", "op", op, "remote", r.RemoteAddr)
		problem(w, http.StatusForbidden, "Forbidden", "changing an override needs the admin right: an Authorization: Bearer token listed as \"admin TOKEN\" in rlctl serve -auth-tokens")
		return
	}
	var body overrideRequest
	if err := readJSON(w, r, &body); err != nil {
		refuse(w, "Not an override request", err)
		return
	}
	if err := body.check(op); err != nil {
		problem(w, http.StatusBadRequest, "Not an override request", err.Error())
		return
	}
	e, ctx, attrs := s.Engine(), r.Context(), engine.Attrs(body.Attributes)
	var err error
	switch op {
	case "get":
		var o *engine.Override
		if o, err = e.Override(ctx, attrs, body.Policy, body.Rule); err == nil {
			var out *overrideJSON
			if o != nil {
				out = &overrideJSON{Policy: o.Policy, Rule: o.Rule, Key: o.Key, Figures: o.Figures, Own: o.Own, Limit: o.Limit}
				if !o.Until.IsZero() {
					out.Until = o.Until.UTC().Format(time.RFC3339Nano)
				}
			}
			writeJSON(w, http.StatusOK, map[string]any{"override": out})
			return
		}
	case "set":
		var until time.Time
		if body.Until != "" {
			until, _ = time.Parse(time.RFC3339Nano, body.Until) // checked
		}
		err = e.SetOverride(ctx, attrs, body.Policy, body.Rule, body.Set, until)
	case "clear":
		err = e.ClearOverride(ctx, attrs, body.Policy, body.Rule)
	}
	if op != "get" {
		s.log.Warn("rlctl serve: override "+op, "remote", r.RemoteAddr, "policy", body.Policy, "rule", body.Rule, "attributes", body.Attributes, "set", body.Set, "until", body.Until, "ok", err == nil)
	}
	switch {
	case errors.Is(err, engine.ErrNotOverridable), errors.Is(err, engine.ErrRequest):
		problem(w, http.StatusBadRequest, "The override cannot be made", err.Error())
	case err != nil:
		problem(w, http.StatusServiceUnavailable, "The backend failed", err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]bool{op: true})
	}
}

// check reports what makes the body no override request for op.
func (b *overrideRequest) check(op string) error {
	if b.Attributes == nil || b.Policy == "" || b.Rule == "" {
		return fmt.Errorf(`the body must be {"attributes": {...}, "policy": "...", "rule": "..."}: the request whose key the override is for, and the rule`)
	}
	if err := checkAttributes(b.Attributes); err != nil {
		return err
	}
	if len(b.Policy) > MaxNameBytes || len(b.Rule) > MaxNameBytes {
		return fmt.Errorf("policy and rule names are at most %d bytes", MaxNameBytes)
	}
	if op != "set" {
		if b.Set != nil || b.Until != "" {
			return fmt.Errorf("set and until belong to /v1/overrides/set")
		}
		return nil
	}
	if len(b.Set) == 0 || len(b.Set) > MaxOverrideFigures {
		return fmt.Errorf(`set must name 1 to %d of the rule's parameters with their values as a policy writes them, such as {"rate": "100/s", "burst": "200"}`, MaxOverrideFigures)
	}
	for k, v := range b.Set {
		if len(k) > MaxNameBytes || len(v) > MaxValueBytes {
			return fmt.Errorf("a parameter name is at most %d bytes and a value at most %d", MaxNameBytes, MaxValueBytes)
		}
	}
	if b.Until != "" {
		if _, err := time.Parse(time.RFC3339Nano, b.Until); err != nil {
			return fmt.Errorf("until %q is not an RFC 3339 time, such as 2026-12-31T23:59:59Z", b.Until)
		}
	}
	return nil
}
