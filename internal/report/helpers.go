package report

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// NonNil returns s, or an empty slice for nil: JSON writes [] rather than null.
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Thousands formats n with a comma between groups of three digits: 1,204.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// VersionText names the versions a snapshot or job runs: "transform vN,
// schema vM"; for a model (whose columns are its SELECT's) "model vN", or,
// for a model written as one file (transform version 0), "model sha256
// <12 hex> (its text)" from its transform part's sha256.
func VersionText(transformVersion, schemaVersion int, transformSHA string, model bool) string {
	switch {
	case !model:
		return fmt.Sprintf("transform v%d, schema v%d", transformVersion, schemaVersion)
	case transformVersion != 0:
		return fmt.Sprintf("model v%d", transformVersion)
	}
	return "model sha256 " + Short(transformSHA) + " (its text)"
}

// Short is the first 12 characters of a sha256, for messages.
func Short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
