package main

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
