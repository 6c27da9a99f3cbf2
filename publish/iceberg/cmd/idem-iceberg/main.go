// Command idem-iceberg is the idem CLI with the Apache Iceberg publisher:
// every snapshot a command commits for a job declaring [publish.iceberg]
// is published after COMMIT, and `idem-iceberg publish JOB [--verify]`
// catches up or verifies. It is built from its own Go module
// (publish/iceberg) so that the idem binary does not carry iceberg-go.
package main

import (
	"os"

	"github.com/idem-dev/idem/cmd/idem/cli"
	"github.com/idem-dev/idem/publish/iceberg/publisher"
)

func main() {
	os.Exit(cli.RunWith(publisher.Extension()))
}
