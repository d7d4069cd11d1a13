package release

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// The signing key comes from the environment, never from a file in the
// repository: an ASCII-armored OpenPGP private key, and its passphrase
// when it has one.
const (
	KeyEnv        = "GPUSLICE_RELEASE_GPG_KEY"
	PassphraseEnv = "GPUSLICE_RELEASE_GPG_PASSPHRASE"
)

// SourceDateEpochEnv is the reproducible-builds convention for the time a
// build claims: when set, it is the signatures' creation time and they
// carry no random salt, so a release signed twice with an RSA or EdDSA key
// (deterministic signature schemes; not ECDSA) is the same bytes,
// signatures included.
const SourceDateEpochEnv = "SOURCE_DATE_EPOCH"

// Signer makes the detached signatures of a release's sums files.
type Signer struct {
	entity *openpgp.Entity
	// At is the signatures' creation time; zero signs with the time now.
	At time.Time
}

// SignerFromEnv reads the key from KeyEnv and PassphraseEnv, and the
// signing time from SourceDateEpochEnv when it is set.
func SignerFromEnv() (*Signer, error) {
	key := os.Getenv(KeyEnv)
	if key == "" {
		return nil, fmt.Errorf("%s is empty: set it to the ASCII-armored private key that signs releases (gpg --armor --export-secret-keys KEYID), and %s to its passphrase if it has one", KeyEnv, PassphraseEnv)
	}
	s, err := NewSigner(key, []byte(os.Getenv(PassphraseEnv)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyEnv, err)
	}
	if epoch := os.Getenv(SourceDateEpochEnv); epoch != "" {
		sec, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil || sec <= 0 {
			return nil, fmt.Errorf("%s is %q: set it to a Unix time in seconds (e.g. git log -1 --format=%%ct), or unset it to sign with the time now", SourceDateEpochEnv, epoch)
		}
		s.At = time.Unix(sec, 0).UTC()
	}
	return s, nil
}

// NewSigner reads one armored private key, decrypting it with passphrase
// when it is encrypted.
func NewSigner(armored string, passphrase []byte) (*Signer, error) {
	keys, err := openpgp.ReadArmoredKeyRing(strings.NewReader(armored))
	if err != nil {
		return nil, fmt.Errorf("read the armored key: %w", err)
	}
	if len(keys) != 1 || keys[0].PrivateKey == nil {
		return nil, fmt.Errorf("want exactly one private key, found %d keys (private: %t)", len(keys), len(keys) > 0 && keys[0].PrivateKey != nil)
	}
	e := keys[0]
	if e.PrivateKey.Encrypted {
		if len(passphrase) == 0 {
			return nil, fmt.Errorf("key %s is encrypted: set %s", e.PrimaryKey.KeyIdString(), PassphraseEnv)
		}
		if err := e.DecryptPrivateKeys(passphrase); err != nil {
			return nil, fmt.Errorf("decrypt key %s with %s: %w", e.PrimaryKey.KeyIdString(), PassphraseEnv, err)
		}
	}
	return &Signer{entity: e}, nil
}

// KeyID is the primary key's ID as registries show it (16 hex digits).
func (s *Signer) KeyID() string { return strings.ToUpper(s.entity.PrimaryKey.KeyIdString()) }

// PublicKey is the armored public key a registry hands OpenTofu to check
// the signatures with.
func (s *Signer) PublicKey() (string, error) {
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		return "", err
	}
	if err := s.entity.Serialize(w); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return b.String(), nil
}

// signFile writes path's binary detached signature to path.sig, the form
// registries serve as shasums_signature_url.
func (s *Signer) signFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var config *packet.Config
	if !s.At.IsZero() {
		// Reproducible: the set time, and no random salt notation (which
		// go-crypto adds by default and GnuPG never does), so an RSA or
		// EdDSA key signs the same sums the same way twice.
		at, deterministic := s.At, false
		config = &packet.Config{Time: func() time.Time { return at }, NonDeterministicSignaturesViaNotation: &deterministic}
	}
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, s.entity, bytes.NewReader(data), config); err != nil {
		return fmt.Errorf("sign %s with key %s: %w", path, s.KeyID(), err)
	}
	return os.WriteFile(SignatureOf(path), sig.Bytes(), 0o644)
}
