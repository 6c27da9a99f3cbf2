package job

// NonNil returns s, or an empty slice for nil: JSON writes [] rather than null.
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
