package scaffold

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
)

// templates holds the files idem init writes, one folder per mode: a
// pipeline folder, a job file that runs it and an example input.
//
//go:embed templates
var templates embed.FS

// ScaffoldSelect is the mode of idem init that writes a model (pipeline
// "select") and the source job it reads, instead of a pipeline folder.
const ScaffoldSelect = "select"

// Scaffold writes a new pipeline of mode (ModeApply or ModeRefresh) named
// name into dir: dir/<name>/ (the pipeline: pipeline.toml,
// transform/v1/01_stage.sql..04_commit.sql, schema/v1.sql), dir/<name>.toml
// (a job that runs it) and an example input: for apply, dir/landing/
// example.jsonl, every new file of dir/landing/ applied once; for refresh,
// dir/input/example.csv, the whole input loaded. Mode ScaffoldSelect
// writes a project of two jobs instead: dir/<name>.toml, a model
// (pipeline = "select") whose SELECT is dir/models/<name>/v1.sql, and
// dir/<name>_source.toml, the job it reads (merge_by_key of
// dir/input/<name>.csv), with dir/tests/<name>.toml, unit tests of the
// model that idem test runs. The database goes to dir/data/, created by the
// first run. It refuses to overwrite anything (a *UsageError, exit 2) and
// returns the paths written.
func Scaffold(dir, name, mode string) ([]string, error) {
	if !sqltext.Identifier.MatchString(name) || strings.HasPrefix(strings.ToLower(name), "idem") {
		return nil, report.Usage("pipeline name %q: want letters, digits and underscores, starting with a letter, not starting with idem", name)
	}
	type file struct {
		src, dst string
	}
	var files []file
	root := "templates/" + mode
	switch mode {
	case pipeline.ModeApply, pipeline.ModeRefresh:
		example := map[string]string{pipeline.ModeApply: "landing/example.jsonl", pipeline.ModeRefresh: "input/example.csv"}[mode]
		files = []file{
			{root + "/job.toml", name + ".toml"},
			{root + "/" + path.Base(example), example},
		}
		err := fs.WalkDir(templates, root+"/pipeline", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files = append(files, file{p, path.Join(name, strings.TrimPrefix(p, root+"/pipeline/"))})
			return nil
		})
		if err != nil {
			return nil, err
		}
		files = append(files, file{dst: name}) // the pipeline folder: checked, not written
	case ScaffoldSelect:
		files = []file{
			{root + "/job.toml", name + ".toml"},
			{root + "/source.toml", name + "_source.toml"},
			{root + "/model.sql", path.Join("models", name, "v1.sql")},
			{root + "/example.csv", path.Join("input", name+".csv")},
			{root + "/test.toml", path.Join("tests", name+".toml")},
		}
	default:
		return nil, report.Usage("mode %q: want %s, %s or %s", mode, pipeline.ModeApply, pipeline.ModeRefresh, ScaffoldSelect)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f.dst)); err == nil {
			return nil, report.Usage("%s already exists: idem init writes only new files", filepath.Join(dir, f.dst))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	var written []string
	for _, f := range files {
		if f.src == "" {
			continue
		}
		data, err := templates.ReadFile(f.src)
		if err != nil {
			return nil, err
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.dst))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, fmt.Errorf("init %s: %w", dir, err)
		}
		text := strings.ReplaceAll(string(data), "__NAME__", name)
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("init %s: %w", dir, err)
		}
		written = append(written, dst)
	}
	return written, nil
}
