package lint

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/sqltext"
)

// The step contract: the relations idem and the later steps read, by the
// step that must create them. The stage step is the first step.
var (
	createsStaged = createsRelation("staged")
)

// createsRelation matches a CREATE TABLE or VIEW of name, temp or not.
func createsRelation(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?is)\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:TEMP|TEMPORARY)\s+)?(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:temp\.(?:main\.)?)?"?` + name + `"?(?:\s|\(|$)`)
}

// creates reports whether text creates the relation re matches, outside
// comments and string literals.
func creates(re *regexp.Regexp, text string) bool {
	masked := sqltext.MaskSQL(text)
	for _, m := range re.FindAllStringIndex(text, -1) {
		if strings.EqualFold(masked[m[0]:m[0]+6], "CREATE") {
			return true
		}
	}
	return false
}

// contract checks the step contract: the stage step (the first) creates
// temp table staged with a column reason, some step creates outcomes (read
// by idem unless the pipeline declares its outcomes table), and an apply
// pipeline leaves idem_touched (else history compares the whole target).
func (l *linter) contract(origin string, steps []lintFile) {
	j := l.j
	dir := path.Join(origin, fmt.Sprintf("transform/v%d", j.TransformVersion))
	add := func(sev, file, msg, fix string) {
		l.rep.add(Finding{ID: StepContract, Severity: sev, File: file, Message: msg, Fix: fix})
	}
	if len(steps) == 0 {
		return
	}
	stage := steps[0]
	if !creates(createsStaged, stage.text) {
		msg := fmt.Sprintf("the stage step %s does not create temp table staged: the run fails after it (quality rules and idem's outcome check read staged)", path.Base(stage.name))
		for _, f := range steps[1:] {
			if creates(createsStaged, f.text) {
				msg = fmt.Sprintf("staged is created by %s, not by the stage step %s: quality rules are applied to staged right after the first step", path.Base(f.name), path.Base(stage.name))
			}
		}
		add(SeverityError, stage.name, msg, "CREATE OR REPLACE TEMP TABLE staged AS SELECT row_number() OVER () AS _row, ..., <reason> AS reason FROM input in the first step")
	} else if conn, err := l.db.Conn(l.ctx); err == nil {
		// Where the stage step runs on an empty input in the scratch
		// database, its columns are known: reason must be one of them.
		if _, err := run.DryStage(l.ctx, conn, j); errors.Is(err, run.ErrNoReason) {
			add(SeverityError, stage.name, fmt.Sprintf("the stage step %s creates staged without a column reason: idem and quality rules tag invalid rows there", path.Base(stage.name)),
				"add a column reason to staged: NULL for a valid row, else why it is invalid (CAST(NULL AS VARCHAR) AS reason when nothing is checked)")
		}
		conn.Close()
	}
	createsOutcomes, createsTouched := createsRelation("outcomes"), createsRelation("idem_touched")
	hasOutcomes, hasTouched := false, false
	for _, f := range steps {
		hasOutcomes = hasOutcomes || creates(createsOutcomes, f.text)
		hasTouched = hasTouched || creates(createsTouched, f.text)
	}
	if !hasOutcomes && j.Pipeline.OutcomesTable == "" {
		add(SeverityError, dir, "no step creates temp table outcomes and the pipeline declares no outcomes_table: idem counts each row's outcome there, so every run would fail",
			"create temp table (or view) outcomes in the outcomes step: one row per staged row, with a column outcome")
	}
	if j.Pipeline.Mode == pipeline.ModeApply && !hasTouched {
		add(SeverityWarning, dir, "no step creates temp table idem_touched: every run compares the whole target with its history instead of the keys the batch touched",
			fmt.Sprintf("in the commit step, CREATE OR REPLACE TEMP TABLE idem_touched AS the key columns (%s) of every row written or deleted", strings.Join(j.Pipeline.Key, ", ")))
	}
}
