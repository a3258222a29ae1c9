// Package shareddata locates the development-only data in ../shared (FAST
// vectors, SSE evidence, TCP captures) for tests. That folder sits beside the
// repository checkout in development and CI, never in a module that users
// `go get`, so tests that need it skip with a message when it is absent.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvVar names the environment variable that overrides the location of the
// shared folder.
const EnvVar = "TICKWIRE_SHARED"

// Root returns the shared folder: $TICKWIRE_SHARED when set, otherwise
// "../shared" next to the directory holding go.mod, found by walking up from
// the working directory. It returns "" when there is none.
func Root() string {
	if d := os.Getenv(EnvVar); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			// bench/ has its own go.mod; keep walking to the repository root.
			if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil || isRepoRoot(dir) {
				break
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	shared := filepath.Join(filepath.Dir(dir), "shared")
	if st, err := os.Stat(shared); err != nil || !st.IsDir() {
		return ""
	}
	return shared
}

// isRepoRoot reports whether dir holds the root module's LICENSE file, so the
// search also stops correctly in a tree without .git (an unpacked archive).
func isRepoRoot(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "LICENSE"))
	return err == nil
}

// Path returns the path of elem inside the shared folder, skipping the test
// with a message when the folder or the element is absent.
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	root := Root()
	if root == "" {
		tb.Skipf("shared test data not found (../shared beside the checkout, or $%s); skipping", EnvVar)
	}
	p := filepath.Join(append([]string{root}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("shared test data %s absent; skipping", p)
	}
	return p
}
