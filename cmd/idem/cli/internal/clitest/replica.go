package clitest

import (
	"github.com/idem-dev/idem/internal/run"
)

// Replica is the path of the job database's read replica.
func (j *GuardJob) Replica() string { return run.ReplicaPath(j.DB) }
