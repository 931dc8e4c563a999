// Package options turns nodelet's command line and configuration file into
// one validated NodeletConfiguration. The file is decoded strictly, so a
// misspelt or unknown field is an error that names it; flags that are set on
// the command line override the file, which is the kubelet's precedence rule.
package options
