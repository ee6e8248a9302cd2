// Command svcgw is a self-hosted model inference gateway. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/svcgw/svcgw/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop() // os.Exit skips defers
	os.Exit(code)
}
