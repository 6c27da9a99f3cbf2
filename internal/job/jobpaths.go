package job

import (
	"errors"
	"fmt"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/sqltext"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// resolvePipeline finds a built-in pipeline by name, or a folder on disk by
// path, read from the job file's folder. The folder must lie inside the job
// file's folder: a path that climbs out with .. (or an absolute path
// elsewhere) is refused, so a job file reads only SQL of its own project.
func resolvePipeline(jobPath, ref string, builtins fs.FS, lenient bool) (*pipeline.Pipeline, error) {
	if ref == "" {
		return nil, errors.New("missing pipeline name or path")
	}
	if sqltext.Identifier.MatchString(ref) && builtins != nil {
		if sub, err := fs.Sub(builtins, ref); err == nil {
			if _, err := fs.Stat(sub, "pipeline.toml"); err == nil {
				return pipeline.Load(sub, "builtin:"+ref, lenient)
			}
		}
	}
	dir, err := allowedPipelineDir(jobPath, ref)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && sqltext.Identifier.MatchString(ref) {
			return nil, fmt.Errorf("no built-in pipeline named %q (built-ins: %s) and %v", ref, strings.Join(BuiltinNames(builtins), ", "), err)
		}
		return nil, err
	}
	return pipeline.Load(jobfs.ConfinedFS{Dir: dir}, dir, lenient)
}

// allowedPipelineDir resolves a pipeline folder from the job file's folder
// and checks that it lies inside it (symbolic links followed). A folder
// that does not exist, or has no pipeline.toml, is an error wrapping
// fs.ErrNotExist that says where it was looked for.
func allowedPipelineDir(jobPath, ref string) (string, error) {
	jobDir, err := filepath.Abs(filepath.Dir(jobPath))
	if err != nil {
		return "", err
	}
	c := ref
	if !filepath.IsAbs(c) {
		c = filepath.Join(jobDir, ref)
	}
	shown := resolveJobPath(filepath.Dir(jobPath), ref)
	real, err := filepath.EvalSymlinks(c)
	if err == nil {
		_, err = os.Stat(filepath.Join(real, "pipeline.toml"))
	}
	if err != nil {
		return "", notExist(fmt.Sprintf("no folder %s with a pipeline.toml (%s is read from the job file's folder)%s",
			shown, ref, oldRuleHint(jobPath, ref, true)))
	}
	root, err := filepath.EvalSymlinks(jobDir)
	if err != nil {
		return "", err
	}
	if !jobfs.Within(root, real) {
		return "", fmt.Errorf("pipeline folder %s lies outside the job file's folder %s: a job file sits beside or above the pipelines it runs", ref, filepath.Dir(jobPath))
	}
	return real, nil
}

// notExist is an error that reads msg and is fs.ErrNotExist.
type notExist string

func (e notExist) Error() string { return string(e) }
func (e notExist) Unwrap() error { return fs.ErrNotExist }

// resolveJobPath reads a path written in a job file from the job file's
// folder dir. Empty and absolute paths are returned as they are.
func resolveJobPath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// oldRuleHint says, for a path written in the job file at jobPath that
// names nothing from the job file's folder, whether the same path read from
// the working directory (how idem read job-file paths before they became
// relative to the job file's folder) names something: a file (a folder when
// folder is true) or a glob match. It returns "; ..." to append to an
// error, naming the path to write instead and the flag that overrides the
// key (flag may be empty), or "" when the old rule names nothing either.
func oldRuleHint(jobPath, written string, folder bool, flag ...string) string {
	if written == "" || filepath.IsAbs(written) {
		return ""
	}
	jobDir, err1 := filepath.Abs(filepath.Dir(jobPath))
	old, err2 := filepath.Abs(written)
	if err1 != nil || err2 != nil || filepath.Join(jobDir, written) == old {
		return ""
	}
	found := false
	if strings.ContainsAny(written, "*?[") {
		m, _ := filepath.Glob(written)
		found = len(m) > 0
	} else if st, err := os.Stat(written); err == nil {
		found = st.IsDir() == folder
	}
	if !found {
		return ""
	}
	want := old
	if rel, err := filepath.Rel(jobDir, old); err == nil {
		want = filepath.ToSlash(rel)
	}
	if folder && strings.HasPrefix(want, "..") {
		return fmt.Sprintf("; %s read from the working directory does exist: idem read job-file paths from there before they became relative to the job file's folder; a pipeline folder lies inside the job file's folder: move %s into a folder that holds %s and write the path from there",
			written, jobPath, written)
	}
	or := ""
	if len(flag) > 0 {
		or = " or pass " + flag[0] + " " + written
	}
	return fmt.Sprintf("; %s read from the working directory does exist: idem read job-file paths from there before they became relative to the job file's folder; write %q in %s%s",
		written, want, jobPath, or)
}

// CheckDatabase returns a *UsageError (exit 2) when the job's database does
// not exist but the path written in the job file, read from the working
// directory as idem did before, names a file: a job written for the old
// rule would otherwise start a new, empty database beside the job file.
func (j *Job) CheckDatabase() error {
	if j.Database == "" {
		return nil
	}
	if _, err := os.Stat(j.Database); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if h := oldRuleHint(j.File, j.written.database, false, "--db"); h != "" {
		return report.Usage("database %s (read from the job file's folder) does not exist%s", j.Database, h)
	}
	return nil
}

// InputHint is the hint for a job [input] path that matches nothing, when
// the old rule (paths read from the working directory) would have matched;
// "" otherwise.
func (j *Job) InputHint() string {
	return oldRuleHint(j.File, j.written.input, false, "--input")
}

// BuiltinNames lists the built-in pipelines.
func BuiltinNames(builtins fs.FS) []string {
	if builtins == nil {
		return nil
	}
	entries, _ := fs.ReadDir(builtins, ".")
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			if _, err := fs.Stat(builtins, e.Name()+"/pipeline.toml"); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	return names
}
