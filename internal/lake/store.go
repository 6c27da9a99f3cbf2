package lake

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// A Store reads the files of a table by their location as the metadata
// writes it (an absolute path or a file:// URL for Local). Local returns
// the path DuckDB reads a data or delete file from: a store of remote
// objects would copy the object to a local cache first.
type Store interface {
	Open(ctx context.Context, location string) (io.ReadCloser, error)
	Local(ctx context.Context, location string) (string, error)
	// List names the files of a folder (a table's metadata folder).
	List(ctx context.Context, location string) ([]string, error)
}

// LocalStore is the Store of a local file system: plain paths and file://
// URLs. Other schemes (s3://, gs://) are refused by name.
type LocalStore struct{}

// Path is the local path of location.
func (LocalStore) Path(location string) (string, error) {
	switch {
	case strings.HasPrefix(location, "file:"):
		u, err := url.Parse(location)
		if err != nil {
			return "", fmt.Errorf("iceberg location %s: %w", location, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("iceberg location %s: a file:// URL names a host", location)
		}
		return filepath.FromSlash(u.Path), nil
	case strings.Contains(location, "://"):
		scheme, _, _ := strings.Cut(location, "://")
		return "", fmt.Errorf("iceberg location %s: idem reads local tables (file:// or a path); %s:// is not supported yet", location, scheme)
	}
	return location, nil
}

// Open opens location.
func (s LocalStore) Open(ctx context.Context, location string) (io.ReadCloser, error) {
	p, err := s.Path(location)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// Local is location's path.
func (s LocalStore) Local(ctx context.Context, location string) (string, error) {
	return s.Path(location)
}

// List names the entries of folder location.
func (s LocalStore) List(ctx context.Context, location string) ([]string, error) {
	p, err := s.Path(location)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
