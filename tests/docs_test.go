package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportedNamesHaveDocs keeps the API readable from `go doc`: every
// exported name of the non-test code has a doc comment (a grouped const or
// var block's comment counts for its members), every package has a package
// comment, and no package comment sends the reader to files outside the
// repository.
func TestExportedNamesHaveDocs(t *testing.T) {
	fset := token.NewFileSet()
	pkgDoc := map[string]bool{} // dir -> has a package comment
	var missing []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if f.Doc != nil {
			pkgDoc[dir] = true
			if text := f.Doc.Text(); strings.Contains(text, "../shared") || strings.Contains(text, "/work/") {
				t.Errorf("%s: the package comment points outside the repository", path)
			}
		} else if _, ok := pkgDoc[dir]; !ok {
			pkgDoc[dir] = false
		}
		if f.Name.Name == "main" {
			return nil // commands have no importable API
		}
		pos := func(n ast.Node) string { return fset.Position(n.Pos()).String() }
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Doc == nil && exportedRecv(d) {
					missing = append(missing, pos(d)+" "+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
							missing = append(missing, pos(s)+" "+s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Doc == nil && d.Doc == nil && s.Comment == nil {
								missing = append(missing, pos(n)+" "+n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range pkgDoc {
		if !ok {
			t.Errorf("package in %s has no package comment (doc.go)", dir)
		}
	}
	for _, m := range missing {
		t.Errorf("%s has no doc comment", m)
	}
}

// exportedRecv reports whether a method's receiver type is exported (the
// methods of unexported types are not in the API); true for functions.
func exportedRecv(d *ast.FuncDecl) bool {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return true
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return true
		}
	}
}
