//go:build !linux

package cli

// releaseStartPages is Linux's alone (startpages_linux.go).
func releaseStartPages() (advised, resident uint64) { return 0, 0 }
