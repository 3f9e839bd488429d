package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// TLSOptions are the files of server.tls_cert, server.tls_key and
// server.tls_client_ca, and how often the first two are checked for a
// change.
type TLSOptions struct {
	Cert, Key string // PEM certificate (its chain may follow it) and private key
	// ClientCA, when set, is a PEM file of the CAs that sign client
	// certificates: every client must show one (mutual TLS).
	ClientCA string
	// CheckEvery is how often, at most, a handshake looks whether the
	// certificate or the key file changed; 0 is a second, negative every
	// handshake.
	CheckEvery time.Duration
	// Logger receives reloads and their failures; nil discards them.
	Logger *slog.Logger
}

// Certs serves the certificate of TLSOptions to TLS handshakes and reads
// it again when its files change or on Reload (SIGHUP), so a renewed
// certificate needs no restart. A reload that fails (a half-written file,
// a key that does not match) keeps the certificate in use and logs why.
type Certs struct {
	opts TLSOptions
	log  *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     [2]fileStamp // of Cert and Key when cert was read
	checked   time.Time
	reloads   int64
	lastError error
}

// fileStamp is what tells a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// NewTLS reads the certificate, the key and the client CAs, and returns
// the tls.Config of Options.Conn.TLS (and of the HTTP side), whose handshakes
// take the certificate from the returned Certs. Clients need TLS 1.2 or
// later.
func NewTLS(opts TLSOptions) (*tls.Config, *Certs, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CheckEvery == 0 {
		opts.CheckEvery = time.Second
	}
	c := &Certs{opts: opts, log: opts.Logger}
	if err := c.Reload(); err != nil {
		return nil, nil, err
	}
	conf := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.current(), nil
		},
	}
	if opts.ClientCA != "" {
		pem, err := os.ReadFile(opts.ClientCA)
		if err != nil {
			return nil, nil, fmt.Errorf("read client CA %s: %w", opts.ClientCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("client CA %s: no PEM certificate in it", opts.ClientCA)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, c, nil
}

// LoadTLS reads a PEM certificate and its key for Options.Conn.TLS, as NewTLS
// with no client certificates.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	conf, _, err := NewTLS(TLSOptions{Cert: certFile, Key: keyFile})
	return conf, err
}

// Reload reads the certificate and the key again now.
func (c *Certs) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loadLocked()
}

// Reloads is how many times the certificate was read since the first.
func (c *Certs) Reloads() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reloads
}

func (c *Certs) loadLocked() error {
	stamp := [2]fileStamp{stampOf(c.opts.Cert), stampOf(c.opts.Key)}
	cert, err := tls.LoadX509KeyPair(c.opts.Cert, c.opts.Key)
	if err != nil {
		err = fmt.Errorf("load TLS certificate %s and key %s: %w", c.opts.Cert, c.opts.Key, err)
		if c.cert != nil {
			c.log.Warn("TLS certificate not reloaded; the one in use stays", "err", err)
		}
		c.lastError = err
		c.stamp = stamp // tried: not again until the files change again
		return err
	}
	if c.cert != nil {
		c.reloads++
		c.log.Info("TLS certificate reloaded", "cert", c.opts.Cert)
	}
	c.cert, c.stamp, c.lastError = &cert, stamp, nil
	return nil
}

// current is the certificate for a handshake, read again first when its
// files changed since (looked at most every CheckEvery).
func (c *Certs) current() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); c.opts.CheckEvery < 0 || now.Sub(c.checked) >= c.opts.CheckEvery {
		c.checked = now
		if [2]fileStamp{stampOf(c.opts.Cert), stampOf(c.opts.Key)} != c.stamp {
			_ = c.loadLocked()
		}
	}
	return c.cert
}

// stampOf is a file's modification time and size; zero when it cannot be
// read (a rename in progress).
func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}
}
