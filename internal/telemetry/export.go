package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // registers the gzip compressor
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// sender delivers one encoded ExportTraceServiceRequest to the
// collector, over OTLP/gRPC or OTLP/HTTP (protobuf). It retries what the
// OTLP specification says to retry (HTTP 429, 502, 503, 504; gRPC
// UNAVAILABLE, RESOURCE_EXHAUSTED and the like) until ctx ends. body is
// the exporting goroutine's buffer: a send that failed may leave it in
// the transport's hands, so the queue does not reuse it then.
type sender interface {
	send(ctx context.Context, body []byte) error
	shutdown(ctx context.Context) error
}

// exportPath is the OTLP trace service's gRPC method.
const exportPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

func newSender(o Options) (sender, error) {
	tlsConf, err := tlsConfig(o)
	if err != nil {
		return nil, err
	}
	gz := strings.EqualFold(o.Compression, "gzip")
	switch o.Protocol {
	case ProtocolHTTPProtobuf:
		u := o.TracesEndpoint
		if u == "" {
			u = strings.TrimSuffix(o.Endpoint, "/") + "/v1/traces"
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsConf
		return &httpSender{url: u, headers: o.Headers, gzip: gz, client: &http.Client{Transport: tr}}, nil
	default:
		endpoint := o.TracesEndpoint
		if endpoint == "" {
			endpoint = o.Endpoint
		}
		pu, err := url.Parse(endpoint)
		if err != nil {
			return nil, err
		}
		creds := insecure.NewCredentials()
		if pu.Scheme == "https" {
			creds = credentials.NewTLS(tlsConf)
		}
		conn, err := grpc.NewClient(pu.Host, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, err
		}
		s := &grpcSender{conn: conn, md: metadata.New(o.Headers)}
		s.opts = []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}
		if gz {
			s.opts = append(s.opts, grpc.UseCompressor("gzip"))
		}
		return s, nil
	}
}

// tlsConfig is the TLS client configuration OTEL_EXPORTER_OTLP_CERTIFICATE
// (a CA bundle) and OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _KEY (a
// client certificate) make; the system's roots without them.
func tlsConfig(o Options) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.Certificate != "" {
		pem, err := os.ReadFile(o.Certificate)
		if err != nil {
			return nil, fmt.Errorf("OTLP certificate: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTLP certificate %s: no PEM certificate in it", o.Certificate)
		}
	}
	if o.ClientCertificate != "" || o.ClientKey != "" {
		cert, err := tls.LoadX509KeyPair(o.ClientCertificate, o.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("OTLP client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// retry calls try until it succeeds, fails for good, or ctx ends, waiting
// 50 ms, then twice as long each time up to 2 s, between tries.
func retry(ctx context.Context, try func() (again bool, err error)) error {
	wait := 50 * time.Millisecond
	for {
		again, err := try()
		if err == nil || !again {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

type httpSender struct {
	url     string
	headers map[string]string
	gzip    bool
	client  *http.Client
	zbuf    bytes.Buffer
	zw      *gzip.Writer
}

func (h *httpSender) send(ctx context.Context, body []byte) error {
	if h.gzip {
		h.zbuf.Reset()
		if h.zw == nil {
			h.zw = gzip.NewWriter(&h.zbuf)
		} else {
			h.zw.Reset(&h.zbuf)
		}
		_, _ = h.zw.Write(body)
		_ = h.zw.Close()
		body = bytes.Clone(h.zbuf.Bytes()) // the transport may hold it past a failure
	}
	return retry(ctx, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		if h.gzip {
			req.Header.Set("Content-Encoding", "gzip")
		}
		for k, v := range h.headers {
			req.Header.Set(k, v)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			return ctx.Err() == nil, err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
			return false, nil
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true, fmt.Errorf("OTLP export to %s: %s", h.url, resp.Status)
		}
		return false, fmt.Errorf("OTLP export to %s: %s", h.url, resp.Status)
	})
}

func (h *httpSender) shutdown(context.Context) error {
	h.client.CloseIdleConnections()
	return nil
}

type grpcSender struct {
	conn *grpc.ClientConn
	md   metadata.MD
	opts []grpc.CallOption
}

func (g *grpcSender) send(ctx context.Context, body []byte) error {
	ctx = metadata.NewOutgoingContext(ctx, g.md)
	return retry(ctx, func() (bool, error) {
		err := g.conn.Invoke(ctx, exportPath, rawMessage(body), &discard{}, g.opts...)
		switch status.Code(err) {
		case codes.OK:
			return false, nil
		case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.OutOfRange, codes.DataLoss, codes.Canceled, codes.DeadlineExceeded:
			return ctx.Err() == nil, err
		}
		return false, err
	})
}

func (g *grpcSender) shutdown(context.Context) error { return g.conn.Close() }

// rawMessage is an encoded request, and discard the reply, which is not
// read (its partial_success says what the collector rejected; the
// counts of /metrics are of what was sent).
type (
	rawMessage []byte
	discard    struct{}
)

// rawCodec sends a rawMessage as it is.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(rawMessage)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(m)}, nil
}

func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }

// Name is the content subtype: application/grpc+proto, as the bytes are.
func (rawCodec) Name() string { return "proto" }
