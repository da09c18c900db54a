// Package listen gives rlctl serve's listeners what a service that strangers can reach
// needs: timeouts and limits on every connection (Defaults, HTTPServer, GRPCOptions), a
// cap on open connections per listener (Limit), TLS certificates and bearer tokens read
// from files and reloaded when the files change (LoadTLS, LoadTokens, Watch), and a
// gRPC health service whose Watch streams end when the service starts to drain (Health).
//
// Nothing here knows about rate limiting: the values are the service's contract, stated
// in docs/serve.md's "Security" section, and cmd/rlctl wires them to its flags.
package listen
