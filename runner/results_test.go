package runner

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/ops"
	"github.com/idem-dev/idem/internal/run"
)

// TestResultsInStep: each public result type and the internal one it is
// copied from agree on their JSON keys, the idem command's --json: a key of
// the public type is the internal type's key of the same kind, unless the
// public type adds it; a key of the internal type is carried, unless it is
// named here as left out. A field added on either side fails this test
// until it is copied or left out on purpose.
func TestResultsInStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		public, internal any
		added            []string // keys only the public type has
		leftOut          []string // keys of the internal type not carried
	}{
		{public: Result{}, internal: run.Result{},
			added:   []string{"sha256", "new_files", "runs", "blocked_by", "error", "exit_code"},
			leftOut: []string{"pipeline", "mode", "inputs", "parts", "ignored_columns", "audits", "note", "upstream", "conflicts", "replica", "partitions", "repaired_partitions", "incremental", "incremental_note", "keys", "expiry"}},
		{public: Result{}, internal: run.FilesResult{},
			added:   []string{"changed", "first_load", "job_key", "snapshot", "parent", "batch_id", "sha256", "rows_in", "outcomes", "rows_out", "rows_written", "cursor", "epoch", "target", "input_sha256", "blocked_by", "error", "exit_code"},
			leftOut: nil},
		{public: Result{}, internal: run.ChunksResult{},
			added:   []string{"changed", "first_load", "job_key", "snapshot", "parent", "batch_id", "sha256", "rows_in", "outcomes", "rows_out", "rows_written", "cursor", "epoch", "target", "input_sha256", "new_files", "blocked_by", "error", "exit_code"},
			leftOut: []string{"watermark"}},
		{public: Plan{}, internal: ops.Plan{},
			added:   []string{"blocked_by"},
			leftOut: []string{"parts", "upstream", "model_change"}},
		{public: RerunResult{}, internal: ops.RerunResult{},
			leftOut: []string{"diff", "rebuilt_path", "upstream", "unsigned_zero", "erased_by"}},
		{public: ExportResult{}, internal: ops.ExportResult{},
			leftOut: []string{"files"}},
	} {
		pub, in := jsonKeys(reflect.TypeOf(tc.public)), jsonKeys(reflect.TypeOf(tc.internal))
		name := reflect.TypeOf(tc.public).Name() + " of " + reflect.TypeOf(tc.internal).String()
		for k, kind := range pub {
			ik, ok := in[k]
			switch {
			case slices.Contains(tc.added, k):
				if ok {
					t.Errorf("%s: %q is listed as added but the internal type has it: copy it", name, k)
				}
			case !ok:
				t.Errorf("%s: %q is not a key of the internal type: list it as added", name, k)
			case ik != kind:
				t.Errorf("%s: %q is a %s, the internal type's a %s", name, k, kind, ik)
			}
		}
		for k := range in {
			if _, ok := pub[k]; !ok && !slices.Contains(tc.leftOut, k) {
				t.Errorf("%s: the internal type's %q is not carried: copy it or list it as left out", name, k)
			}
		}
	}
}

// jsonKeys maps the JSON keys of struct type t (its embedded structs'
// too) to their kinds.
func jsonKeys(t reflect.Type) map[string]reflect.Kind {
	keys := map[string]reflect.Kind{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" && f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, v := range jsonKeys(ft) {
				keys[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys[name] = f.Type.Kind()
	}
	return keys
}
