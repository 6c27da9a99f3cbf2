package main

import "github.com/spf13/cobra"

func (a *app) newInitCmd() *cobra.Command { return &cobra.Command{Use: "init", Hidden: true} }
