package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEnvOverride(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvVar, dir)
	if got := Path(t, "x"); got != filepath.Join(dir, "x") {
		t.Fatalf("Path = %q, want %q", got, filepath.Join(dir, "x"))
	}
}

func TestRootFromPackageDir(t *testing.T) {
	t.Setenv(EnvVar, "")
	root := Root()
	if root == "" {
		t.Skip("no ../shared beside this checkout")
	}
	if _, err := os.Stat(filepath.Join(root, "ARCHITECTURE.md")); err != nil {
		t.Fatalf("Root() = %q does not look like the shared folder: %v", root, err)
	}
}
