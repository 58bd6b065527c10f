package lint

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Deps returns the packages of module that pkg (a folder relative to root) imports,
// directly or through others, as folders relative to root: what `go list -deps` shows
// of the module, for its non-test files.
func Deps(root, module, pkg string) ([]string, error) {
	seen := map[string]bool{}
	var visit func(p string) error
	visit = func(p string) error {
		imps, err := imports(filepath.Join(root, filepath.FromSlash(p)), module)
		if err != nil {
			return err
		}
		for _, imp := range imps {
			if !seen[imp] {
				seen[imp] = true
				if err := visit(imp); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := visit(pkg); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// imports lists the module's packages that the non-test files of dir import.
func imports(dir, module string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return nil, err
			}
			switch {
			case imp == module:
				out = append(out, ".")
			case strings.HasPrefix(imp, module+"/"):
				out = append(out, strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
	return out, nil
}
