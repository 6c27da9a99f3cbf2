package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
)

// InputFile is one input file: where it was read, its bytes' sha256 and
// size, and where its retained copy lives once the run loads it.
type InputFile struct {
	Path     string `json:"path"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"bytes"`
	Retained string `json:"-"`
}

// Expand expands path (a file or a glob) into its files in name order
// and hashes each one. A missing file, a glob that matches nothing or a
// directory is an error: never an empty batch.
func Expand(ctx context.Context, path string, progress report.Progress) ([]InputFile, error) {
	if path == "" {
		return nil, report.Usage("no input: set [input] path in the job file or pass --input")
	}
	var paths []string
	if strings.ContainsAny(path, "*?[") {
		m, err := filepath.Glob(path)
		if err != nil {
			return nil, report.Usage("input pattern %s: %v", path, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("input %s: no file matches: %w", path, os.ErrNotExist)
		}
		paths = m
	} else {
		paths = []string{path}
	}
	files := make([]InputFile, 0, len(paths))
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", p, err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("input %s: is a directory, not a file", p)
		}
		if !st.Mode().IsRegular() {
			// A FIFO or a device would be read twice (hashed, then staged)
			// and may never end: refuse it before reading a byte.
			return nil, fmt.Errorf("input %s: not a regular file (%s): idem reads regular files only", p, fileKind(st.Mode()))
		}
		sum, n, err := HashFile(ctx, p, st.Size(), progress)
		if err != nil {
			return nil, err
		}
		files = append(files, InputFile{Path: p, SHA256: sum, Size: n})
	}
	return files, nil
}

// fileKind names a non-regular file's type for messages.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.Type().String()
}

// HashFile streams an input file through sha256, reporting progress.
func HashFile(ctx context.Context, path string, size int64, progress report.Progress) (string, int64, error) {
	label := "hash " + filepath.Base(path)
	sum, n, err := SumFile(ctx, path, func(done int64) { progress.Count(label, done, size) })
	if err != nil && ctx.Err() == nil {
		return "", 0, fmt.Errorf("input %s: %w", path, err)
	}
	return sum, n, err
}

// SumFile returns a file's sha256 and size, reading it in 1 MiB pieces and
// stopping when ctx is canceled; done (may be nil) gets the bytes read.
func SumFile(ctx context.Context, path string, done func(int64)) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		k, err := f.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			if done != nil {
				done(n)
			}
		}
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), n, nil
		}
		if err != nil {
			return "", 0, err
		}
	}
}

// InferFormat names the format of the input from the job or the extension.
func InferFormat(declared string, files []InputFile) (string, error) {
	if declared != "" {
		return declared, nil
	}
	ext := strings.ToLower(filepath.Ext(files[0].Path))
	switch ext {
	case ".csv":
		return job.FormatCSV, nil
	case ".jsonl", ".ndjson", ".json":
		return job.FormatJSONL, nil
	case ".parquet":
		return job.FormatParquet, nil
	}
	return "", report.Usage("input %s: cannot infer the format from extension %q: set [input] format to csv, jsonl or parquet", files[0].Path, ext)
}

// ResolveJob resolves the input of a run of j: flag (--input, read
// from the working directory) or else the job's [input] path. A job path
// that matches nothing says so when the old rule would have matched.
func ResolveJob(ctx context.Context, j *job.Job, flag string, progress report.Progress) ([]InputFile, error) {
	if flag != "" {
		return Expand(ctx, flag, progress)
	}
	files, err := Expand(ctx, j.Input.Path, progress)
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		if h := j.InputHint(); h != "" {
			return nil, fmt.Errorf("%w%s", err, h)
		}
	}
	return files, err
}

// Digest is the input part: the sha256 of the bytes of one file, or of
// the canonical JSON list of the sorted file digests for several.
func Digest(files []InputFile) string {
	if len(files) == 1 {
		return files[0].SHA256
	}
	digests := make([]string, len(files))
	for i, f := range files {
		digests[i] = f.SHA256
	}
	sort.Strings(digests)
	sum := sha256.Sum256(jobkey.CanonicalJSON(digests))
	return hex.EncodeToString(sum[:])
}

// FileSHA256 hashes a file.
func FileSHA256(path string) (string, int64, error) {
	return SumFile(context.Background(), path, nil)
}
