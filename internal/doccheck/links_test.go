package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is two levels above this package.
const repoRoot = "../.."

// markdownLink matches [text](target); images and inline links alike.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// The pages a newcomer reads: the README, the guides (as tfplugindocs
// renders them into docs/guides) and the acceptance suite's README.
func pages(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(repoRoot, "docs", "guides", "*.md"))
	if err != nil || len(guides) == 0 {
		t.Fatalf("no guides under docs/guides (run make docs): %v", err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "acctest", "README.md")}, guides...)
}

func TestRelativeLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, _, _ := strings.Cut(target, "#")
				if _, err := os.Stat(filepath.Join(filepath.Dir(page), file)); err != nil {
					t.Errorf("%s:%d: link %q points at nothing (%v); fix the path relative to the page", page, i+1, target, err)
				}
			}
		}
	}
}

// The README is the ten-minute read; everything else belongs in a guide.
func TestREADMEStaysShort(t *testing.T) {
	const maxLines = 260
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail into a guide under templates/guides/ (make docs renders it into docs/guides/)", n, maxLines)
	}
}

// CI must run what the README tells a newcomer to run.
func TestCIRunsTheREADMEsTestCommand(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test\s`).Match(readme) {
		t.Errorf("README.md has no line starting with `make test` in its commands; the README's test command is what CI runs")
	}
	if !regexp.MustCompile(`(?m)^exec make test$`).Match(ci) {
		t.Errorf(".ci/run does not run exactly `make test`, the README's test command:\n%s", ci)
	}
}
