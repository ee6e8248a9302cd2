package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
)

// AdminGuard keeps browsers out of the admin listener: what a web page
// could make a browser send there, it refuses with a 403 before any of the
// listener's handlers runs. A page on another origin could otherwise POST
// /-/reload, start CPU profiles, and — through DNS rebinding, a name of
// the attacker's that is made to resolve to the listener's address, so
// that the page counts as the listener's own origin — read /metrics and
// /debug/pprof/*. Two checks, in order:
//
//   - Host: a request whose Host is not an IP address, localhost, this
//     machine's host name, the host of the listener's address, or a name
//     the operator allowed (serve --admin-allowed-hosts) is refused. A
//     rebinding page's requests carry its own name as Host, which only the
//     operator could have allowed. A request without Host (HTTP/1.0, no
//     browser) passes.
//   - Origin: a cross-origin browser request is refused, whatever its
//     method (reads too: on this listener a response is worth stealing
//     and a profile costs CPU), except a top-level navigation with GET or
//     HEAD (an operator following a link to /metrics; the linking page
//     cannot read what the tab shows). A frame's navigation is refused. The test is
//     net/http.CrossOriginProtection's: Sec-Fetch-Site same-origin or none
//     passes, any other value is refused; without it, an Origin whose host
//     differs from Host is refused. A request with neither header (curl,
//     Prometheus, svcgw config reload) is no browser's and passes.
//
// The guard is the outermost layer of the admin listener's handler: it
// needs no credential, so it runs before any authentication.
type AdminGuard struct {
	log     *slog.Logger
	any     bool            // "*": every Host passes
	names   map[string]bool // allowed host names, lower case, no trailing dot
	suffix  []string        // ".example.com" of an allowed "*.example.com"
	origins *http.CrossOriginProtection
}

// NewAdminGuard returns the guard of an admin listener that listens on
// addr (serve --admin-addr) and answers, besides IP addresses, localhost
// and this machine's host name, the Host names in allowed: each a name
// ("svcgw.internal"), "*.example.com" for every name under example.com
// (not example.com itself), or "*" for any Host at all, which turns the
// DNS-rebinding defence off. An entry with a port, a scheme or a path is
// an error: the port of Host is not compared.
func NewAdminGuard(log *slog.Logger, addr string, allowed []string) (*AdminGuard, error) {
	g := &AdminGuard{log: log, names: map[string]bool{"localhost": true}, origins: http.NewCrossOriginProtection()}
	for _, h := range allowed {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "":
			continue
		case h == "*":
			g.any = true
		case strings.HasPrefix(h, "*.") && validHostName(h[2:]):
			g.suffix = append(g.suffix, strings.TrimSuffix(h[1:], "."))
		case validHostName(h):
			g.names[strings.TrimSuffix(h, ".")] = true
		default:
			return nil, fmt.Errorf("--admin-allowed-hosts %q: want a host name (svcgw.internal), *.example.com or *, without scheme, port or path", h)
		}
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && validHostName(host) {
		g.names[strings.ToLower(strings.TrimSuffix(host, "."))] = true
	}
	if host, err := os.Hostname(); err == nil && validHostName(host) {
		g.names[strings.ToLower(strings.TrimSuffix(host, "."))] = true
	}
	return g, nil
}

// Handler returns next behind the guard.
func (g *AdminGuard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			g.refuse(w, r, "forbidden_host", "Host "+r.Host+" is not allowed on the admin listener: "+
				"use its IP address or localhost, or allow the name with svcgw serve --admin-allowed-hosts")
			return
		}
		if err := g.originCheck(r); err != nil {
			g.refuse(w, r, "forbidden_origin", "cross-origin requests are refused on the admin listener")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originCheck is net/http.CrossOriginProtection's check, applied to the
// safe methods too, but for a GET or HEAD navigation of a tab.
func (g *AdminGuard) originCheck(r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		// A tab opened on the listener: what it shows, the page that
		// linked cannot read. A frame is refused: a page could load
		// profiles in frames of its own, unseen.
		if r.Method != http.MethodOptions && r.Header.Get("Sec-Fetch-Mode") == "navigate" &&
			(r.Header.Get("Sec-Fetch-Dest") == "document" || r.Header.Get("Sec-Fetch-Dest") == "") {
			return nil
		}
		// CrossOriginProtection lets every safe method through; ask it
		// about the same request as if it were a POST.
		probe := r.WithContext(r.Context())
		probe.Method = http.MethodPost
		return g.origins.Check(probe)
	}
	return g.origins.Check(r)
}

// hostAllowed reports whether a request with this Host passes.
func (g *AdminGuard) hostAllowed(hostport string) bool {
	if g.any || hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if g.names[host] {
		return true
	}
	for _, s := range g.suffix {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func (g *AdminGuard) refuse(w http.ResponseWriter, r *http.Request, code, msg string) {
	g.log.Warn("admin listener refused a request", "reason", code, "method", r.Method, "path", r.URL.Path,
		"host", r.Host, "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
	writeAdminJSON(w, http.StatusForbidden, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// validHostName reports whether s is a DNS name (letters, digits, '-',
// '_' and dots, no empty label), not an address or a pattern.
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
