// Command embedup is the recording upstream scripts/clients/verify.sh runs
// the Node embeddings clients against: internal/embedrecorder's OpenAI-
// and Gemini-protocol embeddings endpoints over real HTTP, and recording
// proxies to put in front of svcgw, which keep every byte svcgw sends a
// client and name any backend string found in them.
//
//	embedup -secrets NAME,NAME… [-addr 127.0.0.1:0]
//
// It prints "upstream http://ADDR" once listening. Beside the vendors'
// paths, the same listener answers
//
//	GET  /_rec/upstream          the requests the upstream received since the last call, with its replies
//	POST /_rec/proxy?target=URL  a new recording proxy to URL: {"url": "http://ADDR"}
//	GET  /_rec/responses         the exchanges every proxy carried since the last call
//	POST /_rec/tokens            svcgw's count of {"texts": […], "title": ""}, what it charges when an upstream reports none
//
// A backend string is any of -secrets, the upstream's own address and its
// reply markers, compared case-insensitively with the reply's status line,
// headers and body.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"github.com/svcgw/svcgw/internal/embedrecorder"
	"github.com/svcgw/svcgw/llm"
)

// exchange is one call a proxy carried: what the client sent, and every
// byte of what it received.
type exchange struct {
	Method      string      `json:"method"`
	Path        string      `json:"path"`
	RequestBody string      `json:"request_body"`
	Status      int         `json:"status"`
	Header      http.Header `json:"header"`
	Body        string      `json:"body"`
	Leaks       []string    `json:"leaks"` // the backend strings found in the reply
}

type state struct {
	rec     embedrecorder.Recorder
	secrets []string

	mu        sync.Mutex
	exchanges []exchange
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	secrets := flag.String("secrets", "", "comma-separated backend strings no reply to a client may hold (upstream names, backend models)")
	promptTokens := flag.Int("prompt-tokens", 17, "the usage.prompt_tokens the OpenAI protocol reports")
	model := flag.String("openai-model", "", "the model the OpenAI protocol names in its reply (default: the request's)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	st := &state{rec: embedrecorder.Recorder{PromptTokens: *promptTokens, OpenAIModel: *model}}
	for _, s := range strings.Split(*secrets, ",") {
		if s = strings.TrimSpace(s); s != "" {
			st.secrets = append(st.secrets, s)
		}
	}
	st.secrets = append(st.secrets, ln.Addr().String(), embedrecorder.Marker, embedrecorder.MarkerHeader)
	if *model != "" {
		st.secrets = append(st.secrets, *model)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /_rec/upstream", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, st.rec.Take()) })
	mux.HandleFunc("GET /_rec/responses", func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		ex := st.exchanges
		st.exchanges = nil
		st.mu.Unlock()
		writeJSON(w, ex)
	})
	mux.HandleFunc("POST /_rec/proxy", st.newProxy)
	mux.HandleFunc("POST /_rec/tokens", func(w http.ResponseWriter, r *http.Request) {
		var q struct {
			Texts []string `json:"texts"`
			Title string   `json:"title"`
		}
		if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := llm.EmbedRequest{Title: q.Title}
		for _, t := range q.Texts {
			req.Inputs = append(req.Inputs, llm.EmbedInput{Text: t})
		}
		writeJSON(w, map[string]int{"tokens": req.CountInputTokens()})
	})
	mux.Handle("/", &st.rec)
	fmt.Printf("upstream http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// newProxy starts a recording reverse proxy to the query's target.
func (st *state) newProxy(w http.ResponseWriter, r *http.Request) {
	target, err := url.Parse(r.URL.Query().Get("target"))
	if err != nil || target.Host == "" {
		http.Error(w, "target: an http URL is required", http.StatusBadRequest)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var reqBody string
		if b, ok := resp.Request.Context().Value(reqBodyKey{}).([]byte); ok {
			reqBody = string(b)
		}
		st.record(resp, reqBody, body)
		return nil
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		rp.ServeHTTP(w, r.WithContext(contextWith(r, b)))
	})}
	go func() { _ = srv.Serve(ln) }()
	writeJSON(w, map[string]string{"url": "http://" + ln.Addr().String()})
}

func (st *state) record(resp *http.Response, reqBody string, body []byte) {
	plain := body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
			if b, err := io.ReadAll(zr); err == nil {
				plain = b
			}
		}
	}
	var all strings.Builder
	all.WriteString(resp.Status + "\n")
	for k, vs := range resp.Header {
		all.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
	}
	all.Write(plain)
	seen := strings.ToLower(all.String())
	ex := exchange{Method: resp.Request.Method, Path: resp.Request.URL.RequestURI(), RequestBody: reqBody,
		Status: resp.StatusCode, Header: resp.Header.Clone(), Body: string(plain), Leaks: []string{}}
	for _, s := range st.secrets {
		if strings.Contains(seen, strings.ToLower(s)) {
			ex.Leaks = append(ex.Leaks, s)
		}
	}
	st.mu.Lock()
	st.exchanges = append(st.exchanges, ex)
	st.mu.Unlock()
}

// reqBodyKey carries the client's request body to ModifyResponse.
type reqBodyKey struct{}

func contextWith(r *http.Request, body []byte) context.Context {
	return context.WithValue(r.Context(), reqBodyKey{}, body)
}
