// Package docs owns idem docs: a static HTML site of a project, one
// index.html that opens from disk. Gather reads the project's job files
// (with their column descriptions: the job file's [columns], a model's
// SELECT-list comments, columns.go) and, read-only, what its databases hold
// (state, run log, snapshots and their release packets, through catalog,
// run and ops); Layout places the lineage graph in Go, by topological level,
// with a lane for each arrow through each column it skips so that no arrow
// crosses a box (layout.go); Render writes the page with html/template, so
// every user text is escaped; Write puts the page in a folder without
// touching files it did not write.
//
// The page is a function of the project and its databases alone: no clock,
// no absolute path, maps sorted. It carries its CSS and a small script
// inline (one job's panel at a time, and the search over jobs and columns,
// site/site.js), allowed by a Content-Security-Policy that names their
// sha256, and loads nothing else.
package docs
