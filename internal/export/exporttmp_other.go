//go:build !linux

package export

// exchangePaths reports that this system has no atomic exchange: the swap
// falls back to two renames.
func exchangePaths(a, b string) error { return errNoExchange }
