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

// WalkJSON calls f on every object in a decoded JSON tree.
func WalkJSON(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(x)
		for _, k := range SortedKeys(x) {
			WalkJSON(x[k], f)
		}
	case []any:
		for _, e := range x {
			WalkJSON(e, f)
		}
	}
}
