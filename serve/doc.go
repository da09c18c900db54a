// Package serve is rlctl serve as a library: a rate limit decision service for other
// processes, on one engine whose policies it reloads while serving.
//
// A [Server] ([New]) answers Envoy's rate limit protocol over gRPC ([Server.RegisterGRPC]:
// envoy.service.ratelimit.v3.RateLimitService, as envoyproxy/ratelimit does, with its
// configuration imported by [ImportEnvoy] or received over xDS) and a JSON API over HTTP
// ([Server.Handler]: decide, peek, release, reset, inspect, overrides and lists, described
// by the OpenAPI document it serves at GET /openapi.json). [Server.Reload] and
// [Server.Watch] swap the policies between decisions, never leaving fewer limits than
// intended; [NewEnvoyStats] keeps envoyproxy/ratelimit's statistics.
//
// The listeners, their TLS, tokens, timeouts and size limits are the caller's: cmd/rlctl
// (rlctl serve) sets them, and docs/serve.md says who may call each endpoint and what one
// request may cost.
package serve
