//go:build idembench

package runner

// WithoutHistory makes runs write no history row: the floor cmd/idem-bench
// measures history against. It exists only in a build with -tags
// idembench; the idem that ships has no such option.
func WithoutHistory() Option {
	return optionFunc(func(s *settings) error {
		s.skipHistory = true
		return nil
	})
}
