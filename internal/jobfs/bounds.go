package jobfs

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/idem-dev/idem/internal/report"
	"io"
	"io/fs"
	"os"
)

// Bounds of a TOML file idem decodes (a job file or a pipeline.toml),
// checked before decoding: the decoder's time and memory grow with the
// square of the nesting depth (a 24 KB job file of inline tables 6,000
// deep took 8.8 s and 1.6 GB, 100,000 deep 24 GB), and a job needs a few
// levels and a few kilobytes.
const (
	// MaxTOMLBytes is the largest TOML file idem reads.
	MaxTOMLBytes = 1 << 20
	// MaxTOMLDepth is how deep arrays, inline tables and table headers
	// may nest.
	MaxTOMLDepth = 32
)

// checkTOMLBounds returns the *JobFileError of a TOML file at path larger
// than MaxTOMLBytes or nested deeper than MaxTOMLDepth, naming the line
// where the bound was passed. It reads data once, in linear time.
func checkTOMLBounds(path string, data []byte) error {
	if len(data) > MaxTOMLBytes {
		return &report.JobFileError{File: path, Line: 1 + bytes.Count(data[:MaxTOMLBytes], []byte("\n")),
			Msg: fmt.Sprintf("the file is larger than %d bytes (1 MiB), the most idem reads of a job file or pipeline.toml", MaxTOMLBytes)}
	}
	if line := tooDeep(data, MaxTOMLDepth); line > 0 {
		return &report.JobFileError{File: path, Line: line,
			Msg: fmt.Sprintf("arrays and tables nest deeper than %d levels, the most idem reads of a job file or pipeline.toml", MaxTOMLDepth)}
	}
	return nil
}

// tooDeep returns the line where the nesting of [ and { in TOML data,
// outside strings and comments, passes max, or 0 when it never does. It
// does not validate: what it cannot read (an unterminated string, say) the
// decoder reports.
func tooDeep(data []byte, max int) int {
	depth, line := 0, 1
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '\n':
			line++
		case '#':
			for i+1 < len(data) && data[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			var lines int
			i, lines = skipTOMLString(data, i)
			line += lines
		case '[', '{':
			depth++
			if depth > max {
				return line
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return 0
}

// skipTOMLString skips the string that opens at data[i] (a quote), basic
// ("...", with backslash escapes) or literal ('...'), on one line or, with
// three quotes, on several. It returns the index of the string's last byte
// and the number of line ends inside it. A one-line string ends at the end
// of its line at the latest.
func skipTOMLString(data []byte, i int) (end, lines int) {
	q := data[i]
	multi := i+2 < len(data) && data[i+1] == q && data[i+2] == q
	j := i + 1
	if multi {
		j = i + 3
	}
	for ; j < len(data); j++ {
		switch c := data[j]; {
		case c == '\\' && q == '"':
			if j+1 < len(data) && data[j+1] == '\n' {
				if !multi {
					return j, lines
				}
				lines++
			}
			j++
		case c == '\n':
			if !multi {
				return j - 1, lines
			}
			lines++
		case c == q && !multi:
			return j, lines
		case c == q && j+2 < len(data) && data[j+1] == q && data[j+2] == q:
			// Up to two more quotes belong to the string: """a"""" is a".
			j += 2
			for k := 0; k < 2 && j+1 < len(data) && data[j+1] == q; k++ {
				j++
			}
			return j, lines
		}
	}
	return len(data) - 1, lines
}

// CheckTOMLBounds is checkTOMLBounds for another TOML file idem reads (a
// test file of idem test): larger than MaxTOMLBytes or nested deeper than
// MaxTOMLDepth is a *JobFileError naming the line.
func CheckTOMLBounds(path string, data []byte) error { return checkTOMLBounds(path, data) }

// MaxSQLBytes is the largest SQL file idem reads: a model, a pipeline's
// step or its schema DDL. A model's text is held several times over while
// it is checked, parsed and expanded (a 200 MB model file took 3.4 GB),
// and a hand-written or generated SELECT is a few kilobytes.
const MaxSQLBytes = 4 << 20

// ReadSQLFile reads SQL file name of fsys, refusing one larger than
// MaxSQLBytes before it holds more than that: a *JobFileError naming the
// file as display, its size and the bound (exit 2).
func ReadSQLFile(fsys fs.FS, name, display string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > MaxSQLBytes {
		return nil, sqlTooLarge(display, fmt.Sprintf("%d bytes", st.Size()))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSQLBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSQLBytes {
		// It grew since its size was read, or has none (not a regular
		// file).
		return nil, sqlTooLarge(display, fmt.Sprintf("more than %d bytes", MaxSQLBytes))
	}
	return data, nil
}

// errSQLTooLarge is wrapped by ReadSQLFile's refusal, which names the
// file itself: callers return it as it is.
var errSQLTooLarge = errors.New("SQL file too large")

func sqlTooLarge(file, size string) error {
	return &report.JobFileError{File: file, Err: errSQLTooLarge,
		Msg: fmt.Sprintf("the file is %s, larger than %d bytes (4 MiB), the most idem reads of a SQL file (a model, a pipeline's step or schema)", size, MaxSQLBytes)}
}

// IsSQLTooLarge says err is ReadSQLFile's refusal of a file past
// MaxSQLBytes.
func IsSQLTooLarge(err error) bool { return errors.Is(err, errSQLTooLarge) }

// ReadJobFile reads a job file; an error is a *JobFileError that says why.
// A file larger than MaxTOMLBytes is refused once that many bytes are read,
// without reading it whole.
func ReadJobFile(path string) ([]byte, error) {
	data, err := readAtMost(path, MaxTOMLBytes+1)
	if err != nil {
		reason := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err
		}
		return nil, &report.JobFileError{File: path, Msg: "cannot read job file: " + reason.Error(), Err: err}
	}
	if len(data) > MaxTOMLBytes {
		return nil, checkTOMLBounds(path, data)
	}
	return data, nil
}

// readAtMost reads the first n bytes of the file at path, or all of a
// shorter one.
func readAtMost(path string, n int64) ([]byte, error) {
	// Opening a FIFO blocks until a writer comes: only a regular file is
	// opened.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New("not a regular file")}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}
