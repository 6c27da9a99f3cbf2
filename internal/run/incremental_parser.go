package run

import (
	"errors"
	"unsafe"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// parserStrings runs query, which must return one VARCHAR column, on the
// process's parser DuckDB (parser.go) and returns its values (NULL as "").
// It is for the checks made at load, before any database is open; the
// parser holds no tables, so query can read only the engine itself.
func parserStrings(query string) ([]string, error) {
	if err := openParser(); err != nil {
		return nil, err
	}
	parser.mu.Lock()
	defer parser.mu.Unlock()
	var res mapping.Result
	defer mapping.DestroyResult(&res)
	if mapping.Query(parser.conn, query, &res) == mapping.StateError {
		return nil, errors.New(mapping.ResultError(&res))
	}
	if mapping.ColumnCount(&res) != 1 || mapping.ColumnType(&res, 0) != mapping.TypeVarchar {
		return nil, errors.New("the parser's query does not return one VARCHAR column")
	}
	var out []string
	for {
		chunk := mapping.FetchChunk(res)
		n := mapping.DataChunkGetSize(chunk)
		if n == 0 {
			mapping.DestroyDataChunk(&chunk)
			return out, nil
		}
		vec := mapping.DataChunkGetVector(chunk, 0)
		values := unsafe.Slice((*mapping.StringT)(mapping.VectorGetData(vec)), n)
		valid := mapping.VectorGetValidity(vec)
		for i := range values {
			s := ""
			if valid == nil || mapping.ValidityRowIsValid(valid, mapping.IdxT(i)) {
				s = mapping.StringTData(&values[i])
			}
			out = append(out, s)
		}
		mapping.DestroyDataChunk(&chunk)
	}
}
