package config

import "time"

// Limits are request-limit defaults. Zero fields keep the server's
// defaults.
type Limits struct {
	MaxBodyBytes        int64 // request body bytes (413 above)
	RPM, TPM            int   // per key, unless the key sets its own; 0: unlimited
	FreeBytesPerMinute  int64 // request bytes per key a minute on the free endpoints (token counts)
	MaxMessages         int   // turns per request
	MaxParts            int   // parts per message, system prompt or tool result
	MaxTools            int   // tool definitions per request
	MaxSchemaBytes      int   // bytes per JSON Schema
	ReserveOutputTokens int   // output tokens a call's reservation covers
	BudgetRefresh       time.Duration
	// Connections and slow callers (see server.Options and
	// server.ServeOptions): the longest pause in a request body and its
	// minimum average rate in bytes per second after that, the header and
	// keep-alive idle timeouts, and the cap on open connections.
	BodyTimeout    time.Duration
	BodyMinRate    int64
	HeaderTimeout  time.Duration
	IdleTimeout    time.Duration
	MaxConnections int
}

// fileLimits is the limits section as written.
type fileLimits struct {
	MaxBodyBytes        int64  `yaml:"max_body_bytes"`
	RPM                 int    `yaml:"rpm"`
	TPM                 int    `yaml:"tpm"`
	FreeBytesPerMinute  int64  `yaml:"free_bytes_per_minute"`
	MaxMessages         int    `yaml:"max_messages"`
	MaxParts            int    `yaml:"max_parts"`
	MaxTools            int    `yaml:"max_tools"`
	MaxSchemaBytes      int    `yaml:"max_schema_bytes"`
	ReserveOutputTokens int    `yaml:"reserve_output_tokens"`
	BudgetRefresh       string `yaml:"budget_refresh"`
	BodyTimeout         string `yaml:"body_timeout"`
	BodyMinRate         int64  `yaml:"body_min_rate"`
	HeaderTimeout       string `yaml:"header_timeout"`
	IdleTimeout         string `yaml:"idle_timeout"`
	MaxConnections      int    `yaml:"max_connections"`
}

// loadLimits validates the limits section: fl as decoded, sec for the
// lines its errors point at.
func loadLimits(fl fileLimits, sec entry) (Limits, Errors) {
	var errs Errors
	l := Limits{
		MaxBodyBytes: fl.MaxBodyBytes, RPM: fl.RPM, TPM: fl.TPM, FreeBytesPerMinute: fl.FreeBytesPerMinute,
		MaxMessages: fl.MaxMessages, MaxParts: fl.MaxParts, MaxTools: fl.MaxTools, MaxSchemaBytes: fl.MaxSchemaBytes,
		ReserveOutputTokens: fl.ReserveOutputTokens,
		BodyMinRate:         fl.BodyMinRate, MaxConnections: fl.MaxConnections,
	}
	for _, f := range []struct {
		key string
		v   int64
	}{
		{"max_body_bytes", fl.MaxBodyBytes}, {"rpm", int64(fl.RPM)}, {"tpm", int64(fl.TPM)},
		{"free_bytes_per_minute", fl.FreeBytesPerMinute}, {"max_messages", int64(fl.MaxMessages)},
		{"max_parts", int64(fl.MaxParts)}, {"max_tools", int64(fl.MaxTools)},
		{"max_schema_bytes", int64(fl.MaxSchemaBytes)}, {"reserve_output_tokens", int64(fl.ReserveOutputTokens)},
	} {
		if f.v < 0 {
			errs.addf(sec.get(f.key).line(), "limits.%s must not be negative (0 keeps the default)", f.key)
		}
	}
	if fl.BodyMinRate < 0 {
		errs.addf(sec.get("body_min_rate").line(), "limits.body_min_rate must not be negative (bytes per second; 0 keeps the default)")
	}
	if fl.MaxConnections < 0 {
		errs.addf(sec.get("max_connections").line(), "limits.max_connections must not be negative (0 derives it from the file-descriptor limit)")
	}
	for _, f := range []struct {
		key, v string
		dst    *time.Duration
	}{
		{"budget_refresh", fl.BudgetRefresh, &l.BudgetRefresh},
		{"body_timeout", fl.BodyTimeout, &l.BodyTimeout},
		{"header_timeout", fl.HeaderTimeout, &l.HeaderTimeout},
		{"idle_timeout", fl.IdleTimeout, &l.IdleTimeout},
	} {
		if f.v == "" {
			continue
		}
		d, err := time.ParseDuration(f.v)
		if err != nil || d <= 0 {
			errs.addf(sec.get(f.key).line(), "limits.%s must be a positive duration such as 10s", f.key)
			continue
		}
		*f.dst = d
	}
	return l, errs
}
