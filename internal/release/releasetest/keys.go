// Package releasetest makes throwaway OpenPGP keys for the tests that sign
// a release, as GPUSLICE_RELEASE_GPG_KEY would hold one.
package releasetest

import (
	"bytes"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// NewKey makes a key for name (an e-mail address's local part).
func NewKey(tb testing.TB, name string) *openpgp.Entity {
	tb.Helper()
	e, err := openpgp.NewEntity("gpuslice "+name, "", name+"@gpuslice.test", &packet.Config{RSABits: 2048})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// Armor is e's private key, ASCII-armored and unencrypted.
func Armor(tb testing.TB, e *openpgp.Entity) string {
	tb.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PrivateKeyType, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.SerializePrivateWithoutSigning(w, nil); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}
