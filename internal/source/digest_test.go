package source

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/report"
)

// TestInputDigest pins the input part of the job key (README, Words): the
// sha256 of the bytes of one file; for several, the sha256 of the canonical
// JSON list of their sorted digests, whatever their paths and order. A
// change here changes the key of every job and reloads it; the values
// below were computed apart from idem (sha256 of the bytes and of
// ["<digest a>","<digest b>"]).
func TestInputDigest(t *testing.T) {
	t.Parallel()
	const (
		digestA  = "ab14685b680c7f5297d1ea9426e52c8bebd452bcec9701a2bfcc1a4710726941" // sha256 of "id,v\n1,x\n"
		digestB  = "e82faa52ede963ec7310a2dfc0abe2fa5a083600f1dd849f9ed17ef7970d8df6" // sha256 of "id,v\n2,y\n"
		digestAB = "70fc876bc5a93413db470ed6ea31285c5aa7c0f699f76c7c99a156ad909fb8a7"
	)
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("in/a.csv", "id,v\n1,x\n")
	write("in/b.csv", "id,v\n2,y\n")
	write("elsewhere/z-copy-of-b.csv", "id,v\n2,y\n")
	write("elsewhere/y-copy-of-a.csv", "id,v\n1,x\n")
	ctx := context.Background()

	one, err := Expand(ctx, filepath.Join(dir, "in", "a.csv"), report.Progress{})
	require.NoError(t, err)
	require.Equal(t, digestA, Digest(one))

	two, err := Expand(ctx, filepath.Join(dir, "in", "*.csv"), report.Progress{})
	require.NoError(t, err)
	require.Equal(t, digestAB, Digest(two))
	slices.Reverse(two)
	require.Equal(t, digestAB, Digest(two), "the order of the files")
	moved, err := Expand(ctx, filepath.Join(dir, "elsewhere", "*.csv"), report.Progress{})
	require.NoError(t, err)
	require.Equal(t, digestAB, Digest(moved), "the paths of the files")
	require.Equal(t, digestB, moved[1].SHA256)
}
