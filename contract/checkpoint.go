package contract

import (
	"k8s.io/apimachinery/pkg/util/version"
)

// Checkpoint formats of the node plugin (nodeplugin/checkpoint) that not
// every release reads. The plugin saves the oldest format that holds its
// claims, so a node needs a newer format only while it holds a claim of a
// kind the older formats cannot describe; a release that meets a format it
// does not know stops (it cannot tell which claims it would strand), which
// takes down every claim of the node. The engine refuses a node-plugin
// image change to a release that would stop so.
const (
	// CheckpointV3 holds shares of an any-size or time-sliced device.
	CheckpointV3 = "v3"
	// CheckpointV4 holds MIG devices.
	CheckpointV4 = "v4"
)

// CheckpointFormatFor is the oldest checkpoint format that holds a device
// shared as sharing (an AttrSharing value), or "" when every format does
// (a partition).
func CheckpointFormatFor(sharing string) string {
	switch sharing {
	case SharingAnySize, SharingTimeSliced:
		return CheckpointV3
	case SharingMIG:
		return CheckpointV4
	}
	return ""
}

// checkpointReaders is the first release of the node plugin that reads
// each format. Which formats a release reads is fixed when it ships, and
// the engine must know it before the release runs (a rollback target is
// stopped, an upgrade target not yet started), so it is this table, keyed
// by the release version that `make image-push` puts in the image's tag,
// rather than anything a node publishes. A format added later gets the
// release that adds it. 0.1.0 is the first release; the builds before it
// (pre-releases such as 0.1.0-29a6e70, the previous release the upgrade
// tests install) read up to v2.
var checkpointReaders = map[string]*version.Version{
	CheckpointV3: version.MustParseSemantic("0.1.0"),
	CheckpointV4: version.MustParseSemantic("0.1.0"),
}

// ReleaseReadsCheckpoint reports whether the node plugin of release (a
// version, e.g. "0.1.0", as the image's tag gives it) reads checkpoint
// format. A release that is not a version (IsRelease false: a tag such as
// "latest" or "dev") is unknown and taken for one that reads no format
// after v2: the side on which no claim is stranded.
func ReleaseReadsCheckpoint(release, format string) bool {
	since, ok := checkpointReaders[format]
	if !ok {
		return true
	}
	v, err := version.ParseSemantic(release)
	return err == nil && v.AtLeast(since)
}

// IsRelease reports whether release is a release version the checkpoint
// table can place.
func IsRelease(release string) bool {
	_, err := version.ParseSemantic(release)
	return err == nil
}
