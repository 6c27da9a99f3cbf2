// Package pipelines holds idem's built-in pipelines as versioned SQL files.
//
// Each pipeline is a folder with a pipeline.toml, transform/v<N>/NN_<step>.sql
// and schema/v<N>.sql. The files of a released version never change: a change
// of output is a new version.
package pipelines

import "embed"

// FS holds every built-in pipeline, one folder per pipeline name.
//
//go:embed */pipeline.toml */transform */schema
var FS embed.FS
