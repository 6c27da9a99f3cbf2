package job

import "testing"

// TestCheckMemoryLimit: the sizes DuckDB 1.5.6 takes pass, the ones it
// refuses when the database opens (and a few it takes that read as
// mistakes) are refused up front.
func TestCheckMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"2GB", "2 GB", "2gb", "2GiB", "1.5GB", ".5GB", "512MB", "512MiB", "1M", "2G", "1T", "1TiB", "100B", "100 bytes", "3gigabytes", "1 terabyte", "1e9B", "1E3MB", "none"} {
		if err := CheckMemoryLimit(s); err != nil {
			t.Errorf("CheckMemoryLimit(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"", "lots", "100", "0", "1e9", "80%", "1P", "1PB", "1.5.5GB", "1-2GB", "1,5GB", "1_000MB", "+1GB", "1 2GB", "NONE", "-1", "-5GB", "null", "1GB x", " 1GB", "1GB "} {
		if err := CheckMemoryLimit(s); err == nil {
			t.Errorf("CheckMemoryLimit(%q) = nil, want an error", s)
		}
	}
}
