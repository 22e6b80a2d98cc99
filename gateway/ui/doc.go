// Package ui holds the gateway's status page: static HTML, CSS and
// JavaScript embedded in the binary, so there is no build step and nothing
// to install beside regen. The page polls the gateway's status JSON and
// draws the cluster from it; the gateway serves the files, authenticates
// the browser and produces the JSON, so this package knows nothing of HTTP
// frameworks or of the cluster.
package ui
