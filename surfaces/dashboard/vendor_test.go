package dashboard_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/surfaces/dashboard"
)

// TestVendoredUPlot pins the vendored chart library: its version and the
// exact files taken from the npm package (static/vendor/uplot/README.md
// says how to update them, and these figures with them).
func TestVendoredUPlot(t *testing.T) {
	is := is.New(t)
	srv, _ := serve(t)
	const version = "1.6.32"
	for name, want := range map[string]string{
		"vendor/uplot/uPlot.iife.min.js": "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
		"vendor/uplot/uPlot.min.css":     "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
		"vendor/uplot/LICENSE":           "8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd",
	} {
		_, body := get(t, srv.URL+dashboard.AssetPrefix+name)
		sum := sha256.Sum256(body)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: sha256 %s, want %s (uplot %s as published)", name, got, want, version)
		}
		if strings.HasSuffix(name, ".js") {
			is.True(bytes.HasPrefix(body, []byte("/*! https://github.com/leeoniya/uPlot (v"+version+") */")))
		}
	}
}
