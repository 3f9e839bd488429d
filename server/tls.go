package server

import (
	"crypto/tls"
	"fmt"
)

// LoadTLS reads a PEM certificate (its chain may follow it in the file)
// and its PEM private key, for Options.TLS: server.tls_cert and
// server.tls_key. Clients need TLS 1.2 or later.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
