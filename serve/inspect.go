package serve

import (
	"errors"
	"net/http"
	"time"

	"github.com/rlctl/rlctl/engine"
)

// inspectRequest is the body of /v1/inspect: the request to inspect.
type inspectRequest struct {
	Attributes map[string]string `json:"attributes"`
}

// inspectRuleJSON is one rule as /v1/inspect answers it (engine.Inspection): the verdict
// of a peek, in /v1/decide's units, and what the rule keeps beside the key.
type inspectRuleJSON struct {
	Policy       string `json:"policy"`
	Rule         string `json:"rule"`
	Algorithm    string `json:"algorithm"`
	Key          string `json:"key"`
	Shadow       bool   `json:"shadow"`
	Allowed      bool   `json:"allowed"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
	// BlockedUntil is the end of the penalty box's block running (RFC 3339); omitted when
	// none.
	BlockedUntil string               `json:"blocked_until,omitempty"`
	Override     *inspectOverrideJSON `json:"override,omitempty"`
	Lists        []listStateJSON      `json:"lists,omitempty"`
}

// inspectOverrideJSON is the override in force for a rule's key, as /v1/inspect answers
// it: overrideJSON less what the rule says already.
type inspectOverrideJSON struct {
	Figures string `json:"figures"`
	Own     string `json:"own"`
	Limit   string `json:"limit"`
	Until   string `json:"until,omitempty"`
}

// listStateJSON is whether a rule's key is on one of its lists (engine.ListState).
type listStateJSON struct {
	List   string `json:"list"`
	Deny   bool   `json:"deny"`
	Member bool   `json:"member"`
}

// inspect serves /v1/inspect: what every rule that applies to a request sees of it
// (engine.Inspect), charging nothing, with the read right every caller has. Each
// inspection is logged at info level with the caller's address and the request.
func (s *Server) inspect(w http.ResponseWriter, r *http.Request) {
	var body inspectRequest
	if err := readJSON(w, r, &body); err != nil {
		refuse(w, "Not an inspect request", err)
		return
	}
	if body.Attributes == nil {
		problem(w, http.StatusBadRequest, "Not an inspect request", `the body must be {"attributes": {...}}: the request to inspect`)
		return
	}
	if err := checkAttributes(body.Attributes); err != nil {
		problem(w, http.StatusBadRequest, "Not an inspect request", err.Error())
		return
	}
	in, err := s.Engine().Inspect(r.Context(), engine.Attrs(body.Attributes))
	s.log.Info("rlctl serve: inspect", "remote", r.RemoteAddr, "attributes", body.Attributes, "ok", err == nil)
	switch {
	case errors.Is(err, engine.ErrRequest):
		problem(w, http.StatusBadRequest, "The policies cannot evaluate this request", err.Error())
	case err != nil:
		problem(w, http.StatusServiceUnavailable, "The backend failed", err.Error())
	default:
		out := make([]inspectRuleJSON, len(in))
		for i, x := range in {
			out[i] = inspectRuleJSON{
				Policy: x.Policy, Rule: x.Rule, Algorithm: x.Algorithm, Key: x.Key, Shadow: x.Shadow, Allowed: x.Allowed,
				Limit: x.Limit, Remaining: x.Remaining, RetryAfterMs: ms(x.RetryAfter), ResetAfterMs: ms(x.ResetAfter),
			}
			if !x.BlockedUntil.IsZero() {
				out[i].BlockedUntil = x.BlockedUntil.UTC().Format(time.RFC3339Nano)
			}
			if o := x.Override; o != nil {
				out[i].Override = &inspectOverrideJSON{Figures: o.Figures, Own: o.Own, Limit: o.Limit}
				if !o.Until.IsZero() {
					out[i].Override.Until = o.Until.UTC().Format(time.RFC3339Nano)
				}
			}
			for _, l := range x.Lists {
				out[i].Lists = append(out[i].Lists, listStateJSON{List: l.List, Deny: l.Deny, Member: l.Member})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"rules": out})
	}
}
