package job

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/seal"
)

// MacroDir is the folder of SQL macros beside a project's job files: each
// file NAME.sql holds one DuckDB CREATE MACRO NAME(...) AS ... (a scalar
// macro) or AS TABLE ... (a table macro), which any model, step, quality
// rule or audit of the jobs of that folder may call.
const MacroDir = "macros"

// A macro's rules, each the text of an error:
//   - the file holds one CREATE MACRO (or FUNCTION) statement, whose name is
//     the file's (macros/cents_to_dollars.sql creates cents_to_dollars);
//   - its body is sealed like a model's (Seal.Check, SealedText.Macro):
//     no volatile function, no relation read by name (a macro gets rows
//     through its arguments or the job's query), no write, no second
//     statement, a text DuckDB's parser splits as idem does;
//   - its name is no DuckDB function's (run.CreateMacros asks DuckDB's
//     catalog), so a call never means one thing in one job and another
//     in the next.
//
// A job uses the macros its SQL calls (its steps, model, quality rules and
// sql audits), and those they call. Their text is part of the transform
// part of its key (TransformPart): a job that uses no macro keeps its key
// byte for byte, and editing a macro changes the key of exactly the jobs
// that use it, which plan then shows as changed.

// loadMacros reads the macros folder of the job file at jobPath: none when
// there is no such folder.
func loadMacros(jobPath string) (map[string]seal.Macro, error) {
	dir := filepath.Join(filepath.Dir(jobPath), MacroDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &report.JobFileError{File: dir, Msg: fmt.Sprintf("read the macros folder: %v", err)}
	}
	out := map[string]seal.Macro{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(strings.ToLower(e.Name()), ".sql") {
			continue
		}
		file := MacroDir + "/" + e.Name()
		text, err := jobfs.ReadConfined(dir, e.Name())
		if jobfs.IsSQLTooLarge(err) {
			return nil, err
		}
		if err != nil {
			return nil, &report.JobFileError{File: filepath.Join(dir, e.Name()), Msg: fmt.Sprintf("read macro: %v", err)}
		}
		m, err := seal.ParseMacro(strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), file, string(text))
		if err != nil {
			return nil, &report.JobFileError{File: filepath.Join(dir, e.Name()), Line: 1, Msg: err.Error()}
		}
		out[strings.ToLower(m.Name)] = m
	}
	return out, nil
}

// useMacros binds the macros of all (the job's macros folder) that the
// job's SQL calls, and those they call, each after the macros it calls
// (then by name).
func (j *Job) useMacros(all map[string]seal.Macro) {
	j.macroDefs = all
	j.Macros = nil
	if len(all) == 0 {
		return
	}
	texts := []string{j.DDL}
	for _, st := range j.Steps {
		texts = append(texts, st.SQL)
	}
	for _, r := range j.Rules {
		texts = append(texts, r.SQL)
	}
	for _, a := range j.Audits {
		texts = append(texts, a.SQL)
	}
	seen := map[string]bool{}
	var visit func(text string)
	visit = func(text string) {
		var called []string
		for _, c := range seal.CalledNames(text) {
			if _, ok := all[c.Name]; ok && c.Call && !seen[c.Name] && !slices.Contains(called, c.Name) {
				called = append(called, c.Name)
			}
		}
		slices.Sort(called)
		for _, n := range called {
			if seen[n] {
				continue
			}
			seen[n] = true
			visit(all[n].SQL)
			j.Macros = append(j.Macros, all[n])
		}
	}
	for _, t := range texts {
		visit(t)
	}
}

// macroSteps are the used macros as the transform part's digest reads
// them, after the steps.
func (j *Job) macroSteps() []pipeline.Step {
	out := make([]pipeline.Step, len(j.Macros))
	for i, m := range j.Macros {
		out[i] = pipeline.Step{Name: m.File, SQL: m.SQL}
	}
	return out
}

// macroNames are the names of the macros the job uses, lower case.
func (j *Job) macroNames() map[string]bool {
	out := map[string]bool{}
	for _, m := range j.Macros {
		out[strings.ToLower(m.Name)] = true
	}
	return out
}

// macroTexts are the used macros as the seal checks them.
func (j *Job) macroTexts() []seal.SealedText {
	out := make([]seal.SealedText, len(j.Macros))
	for i, m := range j.Macros {
		out[i] = seal.SealedText{File: m.File, SQL: m.Create, Macro: true}
	}
	return out
}

// MacroText is one macro a job used as its key covers it: the file, as
// messages name it (macros/NAME.sql), and its text. A run records them
// (catalog.RecordMacroTexts) so that a rerun rebuilds a snapshot with the
// macros it ran with after a macro file was edited (WithMacros).
type MacroText struct {
	File string `json:"file"`
	SQL  string `json:"sql"`
}

// MacroTexts are the texts of the macros j uses, in the order its
// transform part reads them; none when it uses no macro.
func (j *Job) MacroTexts() []MacroText {
	out := make([]MacroText, len(j.Macros))
	for i, m := range j.Macros {
		out[i] = MacroText{File: m.File, SQL: m.SQL}
	}
	return out
}

// WithMacros is j using exactly the macros of texts, in their order,
// instead of those its macros folder holds now: a job as it ran for a
// snapshot. Each text is read as loadMacros reads a file; an error names
// the macro's file.
func (j *Job) WithMacros(texts []MacroText) (*Job, error) {
	at := *j
	at.Macros = make([]seal.Macro, len(texts))
	for i, t := range texts {
		base := strings.TrimSuffix(path.Base(t.File), path.Ext(t.File))
		m, err := seal.ParseMacro(base, t.File, t.SQL)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.File, err)
		}
		at.Macros[i] = m
	}
	return &at, nil
}
