// Package scaffold owns idem init: the starting files it writes, embedded
// from templates/ (one folder per mode: apply, refresh, select), and the
// refusal to overwrite any file already there.
//
// Pure file writing: no database, only job's names and modes.
package scaffold
