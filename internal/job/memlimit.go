package job

import (
	"fmt"
	"regexp"
)

// memoryLimitSyntax is the part of DuckDB's memory_limit syntax idem
// accepts (measured on 1.5.6): a number, an optional space and a unit of
// 1000^i bytes (B, KB, MB, GB, TB, their one-letter and spelled-out forms)
// or 1024^i bytes (KiB, MiB, GiB, TiB), any case; CheckMemoryLimit also
// takes none (no limit). DuckDB takes a few more forms ("-1", "null", text
// after the unit) that read as mistakes, and rejects the rest only when the
// database opens, in a driver message that names no flag or key.
var memoryLimitSyntax = regexp.MustCompile(`(?i)^(\d+(\.\d*)?|\.\d+)(e-?\d+)? ?(b|bytes?|k|kb|kilobytes?|kib|m|mb|megabytes?|mib|g|gb|gigabytes?|gib|t|tb|terabytes?|tib)$`)

// CheckMemoryLimit says what is wrong with a DuckDB memory_limit value
// (--memory-limit, [duckdb] memory_limit), or returns nil when DuckDB
// takes it. The caller names the flag or key.
func CheckMemoryLimit(s string) error {
	if s == "none" || memoryLimitSyntax.MatchString(s) { // DuckDB takes none in lower case only
		return nil
	}
	return fmt.Errorf("%q is not a DuckDB memory size: want a number and a unit, e.g. 2GB or 512MiB (units B, KB, MB, GB, TB or KiB, MiB, GiB, TiB), or none", s)
}
