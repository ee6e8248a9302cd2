package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Certificate is a TLS key pair read from a PEM certificate file (the
// leaf first, then its chain) and a PEM key file, served to every new
// handshake. Reload re-reads both files and swaps the pair in at once:
// connections already open keep the session they negotiated, new ones get
// the renewed certificate, and nothing is dropped. A pair that does not
// load is refused and the one in force stays.
type Certificate struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// LoadCertificate reads the key pair from certFile and keyFile.
func LoadCertificate(certFile, keyFile string) (*Certificate, error) {
	c := &Certificate{certFile: certFile, keyFile: keyFile}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload re-reads the files; on an error the certificate in force stays.
func (c *Certificate) Reload() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("TLS key pair %s, %s: %w", c.certFile, c.keyFile, err)
	}
	if pair.Leaf == nil { // LoadX509KeyPair parses it; be sure
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("TLS certificate %s: %w", c.certFile, err)
		}
	}
	c.cur.Store(&pair)
	return nil
}

// Leaf is the certificate in force.
func (c *Certificate) Leaf() *x509.Certificate { return c.cur.Load().Leaf }

// LogAttrs describe the certificate in force for a log line: its file,
// subject, names and expiry.
func (c *Certificate) LogAttrs() []any {
	l := c.Leaf()
	return []any{"cert", c.certFile, "subject", l.Subject.String(), "dns_names", l.DNSNames,
		"not_after", l.NotAfter.UTC().Format(time.RFC3339)}
}

// Files are the certificate and key files it reads.
func (c *Certificate) Files() (certFile, keyFile string) { return c.certFile, c.keyFile }

// ErrCertificateExpired reports a certificate past its NotAfter.
var ErrCertificateExpired = errors.New("the certificate has expired")

// Check reports a certificate in force that is not valid at now: clients
// would refuse every handshake.
func (c *Certificate) Check(now time.Time) error {
	l := c.Leaf()
	switch {
	case now.After(l.NotAfter):
		return fmt.Errorf("%s: %w (not after %s)", c.certFile, ErrCertificateExpired, l.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(l.NotBefore):
		return fmt.Errorf("%s: the certificate is not valid before %s", c.certFile, l.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// TLSConfig is the configuration of a listener serving c: TLS 1.2 or
// later, the certificate of the moment for each handshake. Serve adds
// HTTP/2 to what it offers. A nil Certificate has none: plain HTTP.
func (c *Certificate) TLSConfig() *tls.Config {
	if c == nil {
		return nil
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}
