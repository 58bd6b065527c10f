package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Version is the release version; a release build sets it with
// -ldflags "-X github.com/herald-mq/herald/internal/cli.Version=v1.2.3". When empty,
// the module version from the build information is shown.
var Version = ""

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, commit and Go version of this binary",
		Example: "  herald version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			bi, _ := debug.ReadBuildInfo()
			_, err := io.WriteString(stdout, versionText(Version, bi, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH))
			return err
		},
	}
}

// versionText renders the version report from the build information.
func versionText(version string, bi *debug.BuildInfo, goVersion, platform string) string {
	commit, modified, built := "unknown", false, ""
	if bi != nil {
		if version == "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			case "vcs.time":
				built = s.Value
			}
		}
	}
	if version == "" {
		version = "(devel)"
	}
	if modified {
		commit += " (modified)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "herald %s\n", version)
	fmt.Fprintf(&b, "commit: %s\n", commit)
	if built != "" {
		fmt.Fprintf(&b, "commit time: %s\n", built)
	}
	fmt.Fprintf(&b, "go: %s %s\n", goVersion, platform)
	return b.String()
}
