# envoyproxy/ratelimit's domain "edge" (ratelimit.yaml), translated rule by rule: each
# descriptor leaf with a rate_limit is a rule whose when names the descriptor's keys (and
# the values the config fixes) and whose key is the values the config leaves open
# (Envoy sends no empty value; saying so keeps rlctl validate from warning). The
# three rules are one policy, so the descriptors of one Envoy request are charged
# together or not at all.
policy "edge" {
  match = request.domain == "edge"

  rule "remote_address" {
    algorithm = "fixed_window"
    when      = request.descriptor == "remote_address" && request.remote_address != ""
    key       = request.remote_address
    limit     = 3
    window    = "1m"
  }

  rule "api_path" {
    algorithm = "fixed_window"
    when      = request.descriptor == "generic_key.path" && request.generic_key == "api" && request.path != ""
    key       = request.path
    limit     = 10
    window    = "1m"
  }

  rule "tenant" {
    algorithm = "fixed_window"
    when      = request.descriptor == "tenant" && request.tenant != ""
    key       = request.tenant
    limit     = 5
    window    = "1h"
    shadow    = true
  }
}
