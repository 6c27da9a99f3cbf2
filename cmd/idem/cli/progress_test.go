package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// On a terminal each step ends as one line with its name and elapsed time,
// and a byte bar shows bytes done while a file is read.
func TestTermProgressLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := newTermProgress(&buf).hooks()
	done := p.Step("hash input")
	p.Bytes("hash big.csv", 1<<20, 4<<20)
	mid := buf.String()
	p.Bytes("hash big.csv", 4<<20, 4<<20)
	done(1500 * time.Millisecond)
	p.Step("01_stage")(42 * time.Millisecond)

	require.Contains(t, mid, "hash big.csv")
	require.Contains(t, mid, "(1.0/4.2 MB")
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if i := strings.LastIndex(l, "\r"); i >= 0 {
			l = l[i+1:]
		}
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, " "))
		}
	}
	require.Equal(t, []string{"✓ hash input       1.5 s", "✓ 01_stage         42 ms"}, lines)
}

// A byte count without a known total (an export writing its output) shows
// bytes done and ends with its step.
func TestTermProgressUnknownTotal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := newTermProgress(&buf).hooks()
	done := p.Step("export")
	p.Bytes("write out.csv", 3<<20, 0)
	require.Contains(t, buf.String(), "3.1 MB")
	done(2 * time.Second)
	require.True(t, strings.HasSuffix(buf.String(), "\r✓ export           2.0 s\n"), "%q", buf.String())
}
