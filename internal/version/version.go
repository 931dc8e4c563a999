package version

// Version is nodelet's version, a semantic version with a leading "v".
// Release builds override it with -ldflags -X.
var Version = "v0.1.0-dev"
