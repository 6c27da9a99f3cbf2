package cli

import "github.com/spf13/cobra"

// addSnapshotCmds adds the commands that read and rewrite a job's snapshots.
func (a *app) addSnapshotCmds(root *cobra.Command) {
	root.AddCommand(
		a.newExportCmd(),
		a.newDiffCmd(),
		a.newEraseCmd(),
		a.newRollbackCmd(),
		a.newRerunCmd(),
		a.newShowCmd(),
		a.newExpireCmd(),
		a.newDuCmd(),
		a.newPromoteCmd(),
		a.newEnvCmd(),
	)
}
