package cli

import (
	"errors"
	"fmt"
	"sort"

	"github.com/svcgw/svcgw/config"
)

type configCmd struct {
	Check configCheckCmd `cmd:"" help:"Validate a configuration file; errors name their line."`
}

type configCheckCmd struct {
	File string `arg:"" optional:"" type:"path" env:"SVCGW_CONFIG" help:"The YAML configuration file (default: SVCGW_CONFIG, as serve --config reads it)."`
}

func (c *configCheckCmd) Run(e *env) error {
	if c.File == "" {
		return errors.New("which file? give it (svcgw config check svcgw.yaml) or set SVCGW_CONFIG")
	}
	cfg, err := config.LoadFile(c.File)
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, ce := range errs {
			fmt.Fprintln(e.stderr, ce) // file:line: message
		}
		fmt.Fprintf(e.stderr, "%s: %d error(s)\n", c.File, len(errs))
		return exitError{code: 1}
	}
	if err != nil {
		return err
	}
	names := make([]string, 0, len(cfg.Upstreams))
	for name := range cfg.Upstreams {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(e.stdout, "%s: ok\n", c.File)
	for _, name := range names {
		u := cfg.Upstreams[name]
		fmt.Fprintf(e.stdout, "  upstream %s: %s, %d model(s)\n", name, u.Protocol, len(u.Models))
	}
	return nil
}
