package main

import (
	"runtime/debug"

	"github.com/prometheus/common/version"
)

// setBuildVersion fills version.Version from the binary's build information
// when no -ldflags -X set it (a plain `go build` or `go install`): the main
// module's version, which Go stamps from the VCS (a tag, or a pseudo-version
// such as v0.0.0-20260102030405-abcdef123456+dirty), or "(devel)" when it
// knows none. version.GetRevision already falls back on vcs.revision.
func setBuildVersion() {
	info, ok := debug.ReadBuildInfo()
	version.Version = buildVersion(version.Version, info, ok)
}

func buildVersion(ldflags string, info *debug.BuildInfo, ok bool) string {
	if ldflags != "" {
		return ldflags
	}
	if ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
