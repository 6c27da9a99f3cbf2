package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) newFenceCmd() *cobra.Command {
	var f dbFlags
	cmd := &cobra.Command{
		Use:   "fence JOB",
		Short: "Advance the job's writer epoch so that runs with an older --epoch are refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, name, err := f.openOne(cmd.Context(), args[0])
			if err != nil {
				return a.fail(f.jsonOut, err)
			}
			res, err := p.Fence(cmd.Context(), name)
			return a.written(p, f.jsonOut, err, nil, func() error {
				if f.jsonOut {
					return a.printJSON(res)
				}
				_, err := fmt.Fprintf(a.stdout, "%s: epoch %d\n", res.Job, res.Epoch)
				return err
			})
		},
	}
	f.register(cmd)
	return cmd
}
