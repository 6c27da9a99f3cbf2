package runner

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/dbfile"
	"github.com/idem-dev/idem/internal/diff"
	"github.com/idem-dev/idem/internal/env"
	"github.com/idem-dev/idem/internal/export"
	"github.com/idem-dev/idem/internal/history"
	"github.com/idem-dev/idem/internal/inspect"
	"github.com/idem-dev/idem/internal/lint"
	"github.com/idem-dev/idem/internal/modeltest"
	"github.com/idem-dev/idem/internal/planner"
	"github.com/idem-dev/idem/internal/run"
	"github.com/idem-dev/idem/internal/storage"
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
		raw              []string // keys carried as raw JSON (json.RawMessage), whatever is under them
		summary          bool     // the public type's other keys are not the internal type's concern
	}{
		{public: Result{}, internal: run.Result{},
			added: []string{"sha256", "new_files", "runs", "watermark", "blocked_by", "error", "exit_code"},
			raw:   []string{"parts"}},
		// A files-mode or chunked run's summary: its keys are among the
		// Result's (its runs are Results, checked above).
		{public: Result{}, internal: run.FilesResult{}, summary: true, leftOut: []string{"runs."}},
		{public: Result{}, internal: run.ChunksResult{}, summary: true, leftOut: []string{"runs."}},
		{public: Plan{}, internal: planner.Plan{},
			added: []string{"blocked_by"},
			raw:   []string{"parts"}},
		{public: RerunResult{}, internal: history.RerunResult{}},
		{public: ExportResult{}, internal: export.Result{}},
		{public: DiffResult{}, internal: diff.Result{}},
		{public: LogEntry{}, internal: catalog.LogEntry{}},
		{public: Packet{}, internal: inspect.Shown{}},
		{public: RollbackResult{}, internal: history.RollbackResult{}},
		{public: ExpireResult{}, internal: history.ExpireResult{}},
		{public: AuditResult{}, internal: export.AuditResult{}},
		{public: TestReport{}, internal: modeltest.Report{}},
		{public: LintReport{}, internal: lint.Report{}},
		{public: DUResult{}, internal: storage.DUResult{}},
		{public: BackupResult{}, internal: dbfile.BackupResult{}},
		{public: CompactResult{}, internal: dbfile.CompactResult{}},
		{public: ChainEraseResult{}, internal: history.ChainEraseResult{}},
		{public: EraseResult{}, internal: history.EraseResult{}},
		{public: JournalReplay{}, internal: history.JournalReplay{}},
		{public: Environment{}, internal: env.Environment{}},
		{public: EnvironmentFile{}, internal: env.Environment{}, added: []string{"bytes", "production_bytes"}},
		{public: EnvDiff{}, internal: env.Diff{}},
		{public: Promoted{}, internal: env.Promoted{}},
		{public: StreamBatch{}, internal: run.StreamResult{}},
		{public: KeptSnapshots{}, internal: inspect.KeptSnapshots{}},
		{public: SnapshotTable{}, internal: export.PinnedTable{}},
	} {
		pubKeys, inKeys := jsonKeys(reflect.TypeOf(tc.public), ""), jsonKeys(reflect.TypeOf(tc.internal), "")
		pub, in := kinds(pubKeys), kinds(inKeys)
		for _, k := range tc.raw {
			for ik := range in {
				if strings.HasPrefix(ik, k+".") {
					delete(in, ik)
				}
			}
			in[k] = pub[k]
		}
		name := reflect.TypeOf(tc.public).Name() + " of " + reflect.TypeOf(tc.internal).String()
		for k, kind := range pub {
			ik, ok := in[k]
			switch {
			case listed(tc.added, k):
				if ok {
					t.Errorf("%s: %q is listed as added but the internal type has it: copy it", name, k)
				}
			case !ok && tc.summary:
			case !ok:
				t.Errorf("%s: %q is not a key of the internal type: list it as added", name, k)
			case tc.summary && strings.TrimSuffix(ik, " omitempty") == strings.TrimSuffix(kind, " omitempty"):
				// A summary's keys are left out of a single run's.
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

// keyKind is a JSON key, as a path (entries.sha256), its kind and
// whether it is left out when empty (omitempty).
type keyKind struct {
	path string
	kind reflect.Kind
	omit bool
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
		name, opts, _ := strings.Cut(tag, ",")
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
		keys = append(keys, keyKind{prefix + name, f.Type.Kind(), strings.Contains(opts, "omitempty")})
		for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Time{}) && ft != t {
			keys = append(keys, jsonKeys(ft, prefix+name+".")...)
		}
	}
	return keys
}

// kinds maps keys to their kinds, "omitempty" appended to those left
// out when empty.
func kinds(keys []keyKind) map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k.path] = k.kind.String()
		if k.omit {
			m[k.path] += " omitempty"
		}
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

// TestConvertKeepsRawBytes: a key carried as raw JSON (a run's or a
// plan's parts) keeps the bytes the command printed, '<' and '&' as they
// are, not escaped.
func TestConvertKeepsRawBytes(t *testing.T) {
	t.Parallel()
	src := struct {
		Parts map[string]string `json:"parts"`
	}{map[string]string{"config": "a<b&c"}}
	var dst struct {
		Parts json.RawMessage `json:"parts"`
	}
	if err := convert(src, &dst); err != nil {
		t.Fatal(err)
	}
	if got, want := string(dst.Parts), `{"config":"a<b&c"}`; got != want {
		t.Errorf("parts %s, want %s", got, want)
	}
}
