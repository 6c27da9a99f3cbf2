package cli

import (
	"fmt"

	"github.com/idem-dev/idem/internal/ops"
	"github.com/spf13/cobra"
)

func (a *app) newFenceCmd() *cobra.Command {
	var f dbFlags
	cmd := &cobra.Command{
		Use:   "fence JOB",
		Short: "Advance the job's writer epoch so that runs with an older --epoch are refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			job, db, err := f.openJob(cmd.Context(), args[0], false)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			defer a.closeWritten(db, &err)
			epoch, err := ops.Fence(cmd.Context(), db, job.Name)
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			if f.jsonOut {
				return a.printJSON(struct {
					Job   string `json:"job"`
					Epoch int64  `json:"epoch"`
				}{job.Name, epoch})
			}
			fmt.Fprintf(a.stdout, "%s: epoch %d\n", job.Name, epoch)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}
