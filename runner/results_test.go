package runner

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/modeltest"
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
			leftOut: []string{"runs."}}, // Results: checked against run.Result above
		{public: Result{}, internal: run.ChunksResult{},
			added:   []string{"changed", "first_load", "job_key", "snapshot", "parent", "batch_id", "sha256", "rows_in", "outcomes", "rows_out", "rows_written", "cursor", "epoch", "target", "input_sha256", "new_files", "blocked_by", "error", "exit_code"},
			leftOut: []string{"watermark", "runs."}},
		{public: Plan{}, internal: ops.Plan{},
			added:   []string{"blocked_by"},
			leftOut: []string{"parts", "upstream", "model_change"}},
		{public: RerunResult{}, internal: ops.RerunResult{},
			leftOut: []string{"diff", "rebuilt_path", "upstream", "unsigned_zero", "erased_by"}},
		{public: ExportResult{}, internal: ops.ExportResult{},
			leftOut: []string{"files"}},
		{public: LogEntry{}, internal: catalog.LogEntry{}},
		{public: Packet{}, internal: ops.Shown{}},
		{public: RollbackResult{}, internal: ops.RollbackResult{}},
		{public: ExpireResult{}, internal: ops.ExpireResult{}},
		{public: AuditResult{}, internal: ops.AuditResult{}},
		{public: TestReport{}, internal: modeltest.Report{}},
		{public: LintReport{}, internal: ops.LintReport{}},
	} {
		pubKeys, inKeys := jsonKeys(reflect.TypeOf(tc.public), ""), jsonKeys(reflect.TypeOf(tc.internal), "")
		pub, in := kinds(pubKeys), kinds(inKeys)
		name := reflect.TypeOf(tc.public).Name() + " of " + reflect.TypeOf(tc.internal).String()
		for k, kind := range pub {
			ik, ok := in[k]
			switch {
			case listed(tc.added, k):
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
			if _, ok := pub[k]; !ok && !listed(tc.leftOut, k) {
				t.Errorf("%s: the internal type's %q is not carried: copy it or list it as left out", name, k)
			}
		}
		// The keys both have come in the same order: the public type's
		// JSON is the command's, byte for byte.
		var common []string
		for _, k := range inKeys {
			if _, ok := pub[k.path]; ok {
				common = append(common, k.path)
			}
		}
		var order []string
		for _, k := range pubKeys {
			if _, ok := in[k.path]; ok {
				order = append(order, k.path)
			}
		}
		if !slices.Equal(common, order) {
			t.Errorf("%s: the keys both have come in another order:\n%v\n%v", name, order, common)
		}
	}
}

// keyKind is a JSON key, as a path (entries.sha256), and its kind.
type keyKind struct {
	path string
	kind reflect.Kind
}

// jsonKeys lists the JSON keys of struct type t in order, its embedded
// structs' keys in their place and the keys of the structs its fields
// hold (directly, by pointer, in a slice or a map) under the field's key.
func jsonKeys(t reflect.Type, prefix string) []keyKind {
	var keys []keyKind
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
			keys = append(keys, jsonKeys(ft, prefix)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys = append(keys, keyKind{prefix + name, f.Type.Kind()})
		for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Time{}) && ft != t {
			keys = append(keys, jsonKeys(ft, prefix+name+".")...)
		}
	}
	return keys
}

// kinds maps keys to their kinds.
func kinds(keys []keyKind) map[string]reflect.Kind {
	m := make(map[string]reflect.Kind, len(keys))
	for _, k := range keys {
		m[k.path] = k.kind
	}
	return m
}

// listed says key, or the key it is under, is in keys.
func listed(keys []string, key string) bool {
	for _, k := range keys {
		if key == k || strings.HasPrefix(key, strings.TrimSuffix(k, ".")+".") {
			return true
		}
	}
	return false
}
