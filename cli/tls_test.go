//go:build unix

package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// testCA is a certificate authority a test makes, and the pool that
// trusts it.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string // the CA certificate's file
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "svcgw test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, pem: filepath.Join(t.TempDir(), "ca.pem"), pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	writePEM(t, ca.pem, "CERTIFICATE", der)
	return ca
}

// issue writes a server certificate for 127.0.0.1 and localhost with the
// given serial number, and its key, to certFile and keyFile (replacing
// them, as a renewal does).
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "svcgw"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	writePEM(t, certFile, "CERTIFICATE", der)
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	// Written aside and renamed, as certbot and Kubernetes secrets do:
	// a reload never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// servedSerial is the serial number of the certificate a new TLS
// connection to addr is given, and the protocol ALPN chose.
func servedSerial(t *testing.T, ca *testCA, addr string) (int64, string) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	st := conn.ConnectionState()
	return st.PeerCertificates[0].SerialNumber.Int64(), st.NegotiatedProtocol
}

// serialRecorder is a transport that remembers the certificate serial of
// every response it carried.
type serialRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []int64
}

func (r *serialRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil && resp.TLS != nil {
		r.mu.Lock()
		r.seen = append(r.seen, resp.TLS.PeerCertificates[0].SerialNumber.Int64())
		r.mu.Unlock()
	}
	return resp, err
}

func (r *serialRecorder) serials() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seen...)
}

func TestServe_TLSWithRenewalWhileAStreamIsOpen(t *testing.T) {
	is := is.New(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("this test drives curl as one of its TLS clients; install curl")
	}
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	adminCert, adminKey := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	ca.issue(t, 100, certFile, keyFile)
	ca.issue(t, 200, adminCert, adminKey)

	db := newDB(t)
	code, key, _ := run(t, db, "keys", "create", "--account", "acme")
	is.Equal(code, 0) // keys create
	key = strings.TrimSpace(key)
	code, _, _ = run(t, db, "credits", "add", "--account", "acme", "100")
	is.Equal(code, 0) // credits add
	admin := freeAddr(t)
	adminToken := newAdminToken(t, db, false)
	// A slow fixture keeps a stream open across the renewal (about five
	// seconds for its reply).
	srv := startServer(t, db, "--tls-cert", certFile, "--tls-key", keyFile,
		"--admin-addr", admin, "--admin-tls-cert", adminCert, "--admin-tls-key", adminKey,
		"--fixture-tps", "8")

	// Go's client: HTTP/2 over TLS, with the certificate the test made.
	rec := &serialRecorder{base: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.pool},
		ForceAttemptHTTP2: true,
	}}
	client := &http.Client{Transport: rec, Timeout: 30 * time.Second}
	resp, err := client.Get("https://" + srv.addr + "/healthz")
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)
	is.Equal(resp.Proto, "HTTP/2.0") // callers get HTTP/2 over TLS

	// Plain HTTP on the TLS port is refused, not served.
	resp, err = http.Get("http://" + srv.addr + "/healthz")
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusBadRequest)

	// The admin listener has its own certificate.
	serial, _ := servedSerial(t, ca, admin)
	is.Equal(serial, int64(200))
	req, _ := http.NewRequest(http.MethodGet, "https://"+admin+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err = client.Do(req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)

	// curl, over HTTP/2, trusting only the test's CA.
	curlGet := func(url string) string {
		t.Helper()
		out, err := exec.Command(curl, "-sS", "--fail", "--http2", "--cacert", ca.pem,
			"-o", "/dev/null", "-w", "%{http_version} %{http_code}", url).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %s: %v: %s", url, err, out)
		}
		return string(out)
	}
	is.Equal(curlGet("https://"+srv.addr+"/healthz"), "2 200")
	is.Equal(curlGet("https://localhost:"+srv.addr[strings.LastIndex(srv.addr, ":")+1:]+"/healthz"), "2 200")

	// The official OpenAI SDK: a call, then a stream left open.
	sdk := openai.NewClient(option.WithBaseURL("https://"+srv.addr+"/svc/v1"), option.WithAPIKey(key),
		option.WithHTTPClient(client), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello over TLS")},
	}
	ctx := context.Background()
	done, err := sdk.Chat.Completions.New(ctx, params)
	is.NoErr(err)
	is.True(done.Usage.CompletionTokens > 0)

	params.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := sdk.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	is.True(stream.Next()) // the stream is open
	var text strings.Builder
	text.WriteString(firstContent(stream.Current()))

	// Renewal while it is open: new files, SIGHUP, and new connections
	// get the new certificate.
	ca.issue(t, 101, certFile, keyFile)
	ca.issue(t, 201, adminCert, adminKey)
	is.NoErr(srv.cmd.Process.Signal(syscall.SIGHUP))
	deadline := time.Now().Add(10 * time.Second)
	for {
		serial, proto := servedSerial(t, ca, srv.addr)
		is.Equal(proto, "h2")
		if serial == 101 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new connections still get certificate %d after the renewal: %s", serial, srv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	serial, _ = servedSerial(t, ca, admin)
	is.Equal(serial, int64(201)) // the admin listener's renewed too
	is.Equal(curlGet("https://"+srv.addr+"/healthz"), "2 200")

	// The stream opened before goes on to its end on its connection.
	var usage int64
	for stream.Next() {
		c := stream.Current()
		text.WriteString(firstContent(c))
		if c.Usage.CompletionTokens > 0 {
			usage = c.Usage.CompletionTokens
		}
	}
	is.NoErr(stream.Err())
	is.True(strings.Contains(text.String(), "hello over TLS")) // the whole reply came
	is.True(usage > 0)                                         // and its usage, so it was metered
	seen := rec.serials()
	is.Equal(seen[len(seen)-1], int64(100)) // the stream's connection kept the first certificate

	// A fresh client's call is served with the renewed certificate.
	fresh := &serialRecorder{base: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}, ForceAttemptHTTP2: true}}
	sdk = openai.NewClient(option.WithBaseURL("https://"+srv.addr+"/svc/v1"), option.WithAPIKey(key),
		option.WithHTTPClient(&http.Client{Transport: fresh, Timeout: 30 * time.Second}), option.WithMaxRetries(0))
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	_, err = sdk.Chat.Completions.New(ctx, params)
	is.NoErr(err)
	is.Equal(fresh.serials(), []int64{101})

	// A broken renewal is refused; the certificate in force stays.
	is.NoErr(os.WriteFile(certFile, []byte("not a certificate\n"), 0o600))
	is.NoErr(srv.cmd.Process.Signal(syscall.SIGHUP))
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.stderr.String(), "TLS certificate reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal in the log: %s", srv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	serial, _ = servedSerial(t, ca, srv.addr)
	is.Equal(serial, int64(101))
}

func firstContent(c openai.ChatCompletionChunk) string {
	if len(c.Choices) == 0 {
		return ""
	}
	return c.Choices[0].Delta.Content
}

func TestServe_TLSFlagsGoInPairs(t *testing.T) {
	is := is.New(t)
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, 7, certFile, keyFile)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", certFile}, "--tls-cert and --tls-key go together"},
		{[]string{"--admin-addr", "127.0.0.1:0", "--admin-tls-key", keyFile}, "--admin-tls-cert and --admin-tls-key go together"},
		{[]string{"--admin-tls-cert", certFile, "--admin-tls-key", keyFile}, "--admin-tls-cert needs --admin-addr"},
		{[]string{"--tls-cert", certFile, "--tls-key", certFile}, "--tls-cert: TLS key pair"}, // no key in the file
	} {
		db := filepath.Join(t.TempDir(), "svcgw.db")
		code, _, stderr := run(t, db, append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...)...)
		is.Equal(code, 1)
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("serve %v: %q, want it to say %q", tc.args, stderr, tc.want)
		}
		_, err := os.Stat(db)
		is.True(os.IsNotExist(err)) // refused before any database was made
	}
}

// TestServe_TLSBootstrapNamesHTTPS: the first start's example command
// uses the scheme the listener serves.
func TestServe_TLSBootstrapNamesHTTPS(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, 9, certFile, keyFile)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	srv := startServer(t, db, "--tls-cert", certFile, "--tls-key", keyFile)
	want := fmt.Sprintf("https://%s/svc/v1/credits", srv.addr)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(srv.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the first start does not show %s: %s", want, srv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// config reload reaches an admin listener that serves HTTPS, trusting
// the CA it is given; and a serve whose only reloadable files are its
// certificates is reloaded by SIGHUP too.
func TestConfigReload_AdminOverTLS(t *testing.T) {
	is := is.New(t)
	ca := newTestCA(t)
	dir := t.TempDir()
	adminCert, adminKey := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	ca.issue(t, 300, adminCert, adminKey)
	db := newDB(t)
	admin := freeAddr(t)
	startServer(t, db, "--admin-addr", admin, "--admin-tls-cert", adminCert, "--admin-tls-key", adminKey)
	token := newAdminToken(t, db, false)

	code, out, stderr := run(t, db, "config", "reload", "--admin-addr", admin, "--admin-ca", ca.pem, "--admin-token", token)
	is.Equal(code, 0) // reloaded over HTTPS
	is.Equal(strings.TrimSpace(out), "reloaded")
	is.Equal(stderr, "")

	code, _, _ = run(t, db, "config", "reload", "--admin-addr", admin, "--admin-token", token)
	is.Equal(code, 1) // plain HTTP to the HTTPS listener is no reload

	code, out, _ = run(t, db, "config", "reload")
	is.Equal(code, 0)                             // the certificates are what there is to reload
	is.True(strings.Contains(out, "sent SIGHUP")) // so it is signalled
}
