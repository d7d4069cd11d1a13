package checks

import "strings"

// imageRef is an image reference split the way the image table matches it.
type imageRef struct {
	// Repository without registry host, "docker.io/" or "library/": a
	// mirror of ollama/ollama in a private registry is still ollama/ollama.
	Repository string
	Tag        string
	Digest     string
}

func parseImage(ref string) imageRef {
	var r imageRef
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, r.Digest = ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, r.Tag = ref[:i], ref[i+1:]
	}
	if first, rest, ok := strings.Cut(ref, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		ref = rest
	}
	r.Repository = strings.TrimPrefix(ref, "library/")
	return r
}

// pinned reports whether the reference names one build: a digest or a tag
// other than latest.
func (r imageRef) pinned() bool {
	return r.Digest != "" || (r.Tag != "" && r.Tag != "latest")
}
