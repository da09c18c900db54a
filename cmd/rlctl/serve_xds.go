package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rlctl/rlctl/serve"
)

// xdsConfig is serve's -xds flags: a management server to take envoyproxy/ratelimit
// configurations from (serve.XDS), as envoyproxy/ratelimit's CONFIG_TYPE=GRPC_XDS_SOTW.
type xdsConfig struct {
	addr         string // -xds host:port; "" for none
	node         string // -xds-node
	tlsCA        string // -xds-tls-ca
	tlsCert      string // -xds-tls-cert
	tlsKey       string // -xds-tls-key
	mergeDomains bool   // -merge-domains
}

// source returns the serve.XDS of c, nil without -xds, and the connection to close when
// the service stops; wait ends the wait for a first configuration.
func (c xdsConfig) source(wait context.Context, log *slog.Logger) (*serve.XDS, *grpc.ClientConn, error) {
	if c.addr == "" {
		if c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" {
			return nil, nil, flagMisuse("-xds-tls-ca, -xds-tls-cert and -xds-tls-key need -xds")
		}
		return nil, nil, nil
	}
	if c.node == "" {
		return nil, nil, flagMisuse("-xds-node is empty: the management server answers by node id")
	}
	conf, err := clientTLS("-xds-tls", c.tlsCA, c.tlsCert, c.tlsKey)
	if err != nil {
		return nil, nil, err
	}
	creds := insecure.NewCredentials()
	if conf != nil {
		creds = credentials.NewTLS(conf)
	} else if !loopbackAddr(c.addr) {
		log.Warn("rlctl serve: the xDS connection is in the clear; -xds-tls-ca (with the system's CAs: any PEM file of them) encrypts it", "xds", c.addr)
	}
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, fmt.Errorf("-xds %s: %v", c.addr, err)
	}
	return &serve.XDS{Conn: conn, Node: &corev3.Node{Id: c.node}, MergeDomains: c.mergeDomains, Wait: wait}, conn, nil
}

// loopbackAddr reports whether host:port names this machine only: localhost or a
// loopback address.
func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
