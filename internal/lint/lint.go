// Package lint checks Herald's package dependency rules: which module packages and
// which third-party modules each package may import.
// The rules are a table (Rules); the test in this package runs the checker over the module.
package lint

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Rule says what the packages matching Pkg may import.
//
// Pkg and the entries of Allow and TestAllow are module-relative package paths: "." is
// the root package herald, "lang/parser" a package, and "lang/..." a folder with every
// package below it. External lists third-party module path prefixes; the standard
// library is always allowed. TestAllow and TestExternal add to the lists for _test.go
// files only; a TestExternal entry is a named exception that also passes Exclusive.
type Rule struct {
	Pkg          string
	Allow        []string
	External     []string
	TestAllow    []string
	TestExternal []string
}

// Exclusive names a third-party module that only the listed packages may import, even
// from test files: one external dependency lives in one package.
type Exclusive struct {
	Module string
	Only   []string
}

// Config is a complete rule set for one module.
type Config struct {
	Module    string // module path, e.g. github.com/herald-mq/herald
	Rules     []Rule
	Exclusive []Exclusive
	// TestKits may be imported by the test files of every package.
	TestKits []string
	// TestExternal may be imported by the test files of every package.
	TestExternal []string
	// Nested lists folders holding modules of their own whose path is the folder's
	// below Module (github.com/herald-mq/herald/bench for "bench"): they are checked
	// as part of this rule set. Other nested modules are skipped.
	Nested []string
}

// Violation is one import that breaks the rules.
type Violation struct {
	File   string // slash-separated, relative to the module root
	Pkg    string // importing package, module-relative
	Import string // the imported path as written
	Reason string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: package %s must not import %q: %s", v.File, v.Pkg, v.Import, v.Reason)
}

// Check parses the imports of every .go file under root (skipping testdata, vendor and
// hidden folders) and returns the violations of cfg, sorted by file and import.
func Check(root string, cfg Config) ([]Violation, error) {
	var out []Violation
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			// A nested module is not part of this one, unless the rules name it.
			if rel, _ := filepath.Rel(root, path); path != root && !slices.Contains(cfg.Nested, filepath.ToSlash(rel)) {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		isTest := strings.HasSuffix(name, "_test.go")
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: bad import %s", rel, spec.Path.Value)
			}
			if reason := cfg.verdict(pkg, imp, isTest); reason != "" {
				out = append(out, Violation{File: rel, Pkg: pkg, Import: imp, Reason: reason})
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Import < out[j].Import
	})
	return out, err
}

// verdict returns why pkg may not import imp, or "" when it may.
func (cfg Config) verdict(pkg, imp string, isTest bool) string {
	internal, isInternal := cfg.relative(imp)
	if !isInternal && isStdlib(imp) {
		return ""
	}
	rule, ok := cfg.rule(pkg)
	if !ok {
		return "no rule covers this package; add it to the table in internal/lint"
	}
	if isInternal {
		if internal == pkg {
			return "" // an external test package importing the package under test
		}
		if matchAny(rule.Allow, internal) || (isTest && (matchAny(rule.TestAllow, internal) || matchAny(cfg.TestKits, internal))) {
			return ""
		}
		return fmt.Sprintf("%s may import only %s", pkgLabel(rule.Pkg), listLabel(rule.Allow))
	}
	// A package's own test exceptions are deliberate and named, so they may reach past
	// an exclusive module (e.g. the engine's restart tests on Pebble's in-memory vfs).
	if isTest && prefixAny(rule.TestExternal, imp) {
		return ""
	}
	for _, ex := range cfg.Exclusive {
		if hasModulePrefix(imp, ex.Module) && !matchAny(ex.Only, pkg) {
			return fmt.Sprintf("only %s may import %s", listLabel(ex.Only), ex.Module)
		}
	}
	if prefixAny(rule.External, imp) || (isTest && prefixAny(cfg.TestExternal, imp)) {
		return ""
	}
	return fmt.Sprintf("third-party module not allowed in %s", pkgLabel(rule.Pkg))
}

// relative returns imp relative to the module ("." for the root) when it is inside it.
func (cfg Config) relative(imp string) (string, bool) {
	if imp == cfg.Module {
		return ".", true
	}
	if rest, ok := strings.CutPrefix(imp, cfg.Module+"/"); ok {
		return rest, true
	}
	return "", false
}

// rule returns the most specific rule matching pkg: an exact entry beats a folder one,
// and a deeper folder beats a shallower one.
func (cfg Config) rule(pkg string) (Rule, bool) {
	best, bestLen, found := Rule{}, -1, false
	for _, r := range cfg.Rules {
		if r.Pkg == pkg {
			return r, true
		}
		if base, ok := strings.CutSuffix(r.Pkg, "/..."); ok && (pkg == base || strings.HasPrefix(pkg, base+"/")) && len(base) > bestLen {
			best, bestLen, found = r, len(base), true
		}
	}
	return best, found
}

func match(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pattern == pkg
}

func matchAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if match(p, pkg) {
			return true
		}
	}
	return false
}

func hasModulePrefix(imp, module string) bool {
	return imp == module || strings.HasPrefix(imp, module+"/")
}

func prefixAny(modules []string, imp string) bool {
	for _, m := range modules {
		if hasModulePrefix(imp, m) {
			return true
		}
	}
	return false
}

// isStdlib reports whether imp is a standard-library path: its first element has no dot.
func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

func pkgLabel(p string) string {
	if p == "." {
		return "herald (root)"
	}
	return p
}

func listLabel(ps []string) string {
	if len(ps) == 0 {
		return "the standard library"
	}
	labels := make([]string, len(ps))
	for i, p := range ps {
		labels[i] = pkgLabel(p)
	}
	return strings.Join(labels, ", ")
}
