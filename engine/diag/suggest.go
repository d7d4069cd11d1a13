package diag

import (
	"fmt"
	"strings"

	"github.com/agext/levenshtein"
)

// Suggest returns ` (did you mean "x"?)` naming the candidate closest to
// given, or "" when none is close enough to be a likely typo.
func Suggest(given string, candidates []string) string {
	best, bestDist := "", 4
	for _, c := range candidates {
		if d := levenshtein.Distance(strings.ToLower(given), strings.ToLower(c), nil); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
