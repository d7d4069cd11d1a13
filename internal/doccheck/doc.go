// Package doccheck holds the tests that keep the README and the guides
// honest: every relative link resolves, the README stays a short
// introduction, and CI runs exactly the README's test command.
package doccheck
