package job

// NonNil returns s, or an empty slice for nil: JSON writes [] rather than null.
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Short is the first 12 characters of a sha256, for messages.
func Short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
