package lake

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
// URLs. Other schemes (s3://, gs://) are refused by name: Stores reads
// s3:// through S3.
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
		return "", fmt.Errorf("iceberg location %s: idem reads local tables (file:// or a path) and s3:// ones; %s:// is not supported yet", location, scheme)
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

// Stores is the Store of a run: s3:// locations are read through S3,
// configured from the environment on first use, and everything else as
// LocalStore. The objects DuckDB reads are copied to a folder of this
// process under the system's temporary folder (idem-lake/PID-*), removed
// by the next reader once this process is gone.
type Stores struct {
	getenv func(string) string
	once   sync.Once
	s3     *S3
	err    error
}

// NewStores returns the Store of a run reading the environment through
// getenv (os.Getenv when nil).
func NewStores(getenv func(string) string) *Stores {
	if getenv == nil {
		getenv = os.Getenv
	}
	return &Stores{getenv: getenv}
}

func (s *Stores) store(location string) (Store, error) {
	if !isS3(location) {
		return LocalStore{}, nil
	}
	s.once.Do(func() {
		var dir string
		if dir, s.err = copiesDir(); s.err == nil {
			s.s3, s.err = S3FromEnv(s.getenv, dir)
		}
	})
	return s.s3, s.err
}

// Open opens location.
func (s *Stores) Open(ctx context.Context, location string) (io.ReadCloser, error) {
	st, err := s.store(location)
	if err != nil {
		return nil, err
	}
	return st.Open(ctx, location)
}

// Local is the path of location, or of its local copy.
func (s *Stores) Local(ctx context.Context, location string) (string, error) {
	st, err := s.store(location)
	if err != nil {
		return "", err
	}
	return st.Local(ctx, location)
}

// List names the files of folder location.
func (s *Stores) List(ctx context.Context, location string) ([]string, error) {
	st, err := s.store(location)
	if err != nil {
		return nil, err
	}
	return st.List(ctx, location)
}

// copiesDir makes this process's folder for copies of objects, after
// removing the folders of processes that are gone.
func copiesDir() (string, error) {
	root := filepath.Join(os.TempDir(), "idem-lake")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("make the folder of lake object copies: %w", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", fmt.Errorf("list the lake object copies of finished readers: %w", err)
	}
	for _, e := range entries {
		pidText, _, _ := strings.Cut(e.Name(), "-")
		if pid, err := strconv.Atoi(pidText); err == nil && (pid == os.Getpid() || processAlive(pid)) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			return "", fmt.Errorf("remove the lake object copies of a finished reader: %w", err)
		}
	}
	return os.MkdirTemp(root, strconv.Itoa(os.Getpid())+"-")
}
