package ui

import (
	"embed"
	"io/fs"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// contentTypes covers the few kinds of file the page is made of.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Asset returns the file at name (relative to the page's root: "" or
// "index.html" for the page itself, "app.js", ...) and its content type.
// ok is false for anything that is not one of the page's files.
func Asset(name string) (body []byte, contentType string, ok bool) {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		name = "index.html"
	}
	ct, known := contentTypes[path.Ext(name)]
	if !known {
		return nil, "", false
	}
	b, err := fs.ReadFile(static, "static/"+name)
	if err != nil {
		return nil, "", false
	}
	return b, ct, true
}
