package tron

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type keyVectors struct {
	Keys []struct {
		PrivateKey string `json:"private_key"`
		Address    string `json:"address"`
		Sign       struct {
			TxID      string `json:"txid"`
			Signature string `json:"signature"`
		} `json:"sign"`
	} `json:"keys"`
}

func loadKeyVectors(t *testing.T) keyVectors {
	t.Helper()
	b, err := os.ReadFile("../testdata/tron/keys.json")
	if err != nil {
		t.Fatal(err)
	}
	var kv keyVectors
	if err := json.Unmarshal(b, &kv); err != nil {
		t.Fatal(err)
	}
	return kv
}

func TestKeySignerMatchesPublishedAddressAndSignature(t *testing.T) {
	for _, k := range loadKeyVectors(t).Keys {
		s, err := ParseKeySigner(k.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		if s.Address().String() != k.Address {
			t.Fatalf("address %s, want %s", s.Address(), k.Address)
		}
		txid, err := ParseTxID(k.Sign.TxID)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := s.Sign(context.Background(), txid)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(sig); got != k.Sign.Signature {
			t.Fatalf("signature\n %s\nwant\n %s", got, k.Sign.Signature)
		}
	}
}

func TestRecoverSignerAcceptsVInZeroOneAndTwentySevenTwentyEight(t *testing.T) {
	s, err := GenerateKeySigner(strings.NewReader(strings.Repeat("weir deterministic test entropy ", 8)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 { // several txids so both recovery ids show up
		txid := sha256.Sum256([]byte{byte(i)})
		sig, err := s.Sign(context.Background(), txid)
		if err != nil {
			t.Fatal(err)
		}
		if len(sig) != SignatureSize || sig[64] > 1 {
			t.Fatalf("signature %x: want 65 bytes with v in {0,1}", sig)
		}
		for _, v := range []byte{sig[64], sig[64] + 27} {
			sig2 := append([]byte(nil), sig...)
			sig2[64] = v
			got, err := RecoverSigner(txid, sig2)
			if err != nil || got != s.Address() {
				t.Fatalf("v=%d: recovered %s, %v; want %s", v, got, err, s.Address())
			}
		}
		bad := append([]byte(nil), sig...)
		bad[64] = 2
		if _, err := RecoverSigner(txid, bad); !errors.Is(err, ErrInvalidSignature) {
			t.Fatalf("v=2 accepted: %v", err)
		}
		if err := VerifySignature(sha256.Sum256([]byte("other")), sig, s.Address()); err == nil {
			t.Fatal("signature verified for a different txid")
		}
	}
	if _, err := RecoverSigner([32]byte{}, make([]byte, 64)); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("64-byte signature: %v", err)
	}
	if _, err := RecoverSigner([32]byte{}, make([]byte, 65)); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("zero signature: %v", err)
	}
}

func TestKeySignerNeverPrintsTheKey(t *testing.T) {
	const keyHex = "2d8f68944bdbfbc0769542fba8fc2d2a3de67393334471624364c7006da2aa54"
	s, err := ParseKeySigner(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("signer", "s", s)
	jsonBytes, _ := json.Marshal(s)
	outputs := []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %x %q", s, s, s, s, s, s),
		fmt.Sprintf("%+v", struct{ S *KeySigner }{s}), logged.String(), string(jsonBytes),
	}
	for _, out := range outputs {
		if strings.Contains(strings.ToLower(out), keyHex[:16]) {
			t.Fatalf("key material printed: %s", out)
		}
	}
	if !strings.Contains(outputs[0], "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC") {
		t.Fatalf("String() should name the address: %s", outputs[0])
	}
}

func TestLoadKeySignerFromFileAndEnv(t *testing.T) {
	const keyHex = "2d8f68944bdbfbc0769542fba8fc2d2a3de67393334471624364c7006da2aa54"
	const want = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("0x"+keyHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadKeySigner(path)
	if err != nil || s.Address().String() != want {
		t.Fatalf("file: %v %v", s, err)
	}
	t.Setenv("WEIR_TEST_TRON_KEY", keyHex)
	s, err = KeySignerFromEnv("WEIR_TEST_TRON_KEY")
	if err != nil || s.Address().String() != want {
		t.Fatalf("env: %v %v", s, err)
	}

	secret := "zz" + keyHex[2:]
	t.Setenv("WEIR_TEST_TRON_BAD_KEY", secret)
	_, err = KeySignerFromEnv("WEIR_TEST_TRON_BAD_KEY")
	if !errors.Is(err, ErrInvalidKey) || strings.Contains(err.Error(), keyHex[2:18]) {
		t.Fatalf("bad key error must wrap ErrInvalidKey without echoing it: %v", err)
	}
	if _, err := KeySignerFromEnv("WEIR_TEST_TRON_UNSET_KEY"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("unset: %v", err)
	}
	if _, err := LoadKeySigner(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := NewKeySigner(make([]byte, 32)); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("zero key: %v", err)
	}
}

func TestHMACSignerIsDeterministicAndOnlyItsOwnVerifierAcceptsIt(t *testing.T) {
	a, b := NewHMACSigner([]byte("worker-a")), NewHMACSigner([]byte("worker-b"))
	if a.Address() == b.Address() || a.Address()[0] != AddressPrefix {
		t.Fatalf("addresses %s %s", a.Address(), b.Address())
	}
	txid := sha256.Sum256([]byte("tx"))
	s1, _ := a.Sign(context.Background(), txid)
	s2, _ := NewHMACSigner([]byte("worker-a")).Sign(context.Background(), txid)
	if hex.EncodeToString(s1) != hex.EncodeToString(s2) || len(s1) != SignatureSize {
		t.Fatalf("not deterministic or wrong size: %x %x", s1, s2)
	}
	if !a.VerifySignature(txid, s1, a.Address()) {
		t.Fatal("own verifier refuses own signature")
	}
	if b.VerifySignature(txid, s1, a.Address()) || a.VerifySignature(txid, s1, b.Address()) {
		t.Fatal("verifier accepted a foreign signature")
	}
	if Secp256k1Verifier.VerifySignature(txid, s1, a.Address()) {
		t.Fatal("an HMAC signature passed as a real signature")
	}
	if strings.Contains(fmt.Sprintf("%#v", a), "worker-a") {
		t.Fatal("HMAC key printed")
	}
}

func TestSignEnvelopeRefusesAForeignSignerAndVerifiesTheSignature(t *testing.T) {
	owner, err := ParseKeySigner("2d8f68944bdbfbc0769542fba8fc2d2a3de67393334471624364c7006da2aa54")
	if err != nil {
		t.Fatal(err)
	}
	env, err := BuildTransfer(testParams()) // owner TJRyWw..., the key above
	if err != nil {
		t.Fatal(err)
	}
	stx, err := SignEnvelope(context.Background(), owner, env)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stx.Raw, env.Raw) || VerifySignature(env.TxID, stx.Signature, env.Owner) != nil {
		t.Fatalf("signed tx %x", stx.Signature)
	}
	if _, err := SignEnvelope(context.Background(), NewHMACSigner([]byte("x")), env); !errors.Is(err, ErrSignerMismatch) {
		t.Fatalf("foreign signer: %v", err)
	}
	hs := NewHMACSigner([]byte("x"))
	p := testParams()
	p.Owner = hs.Address()
	henv, _ := BuildTransfer(p)
	if _, err := SignEnvelope(context.Background(), hs, henv); err != nil {
		t.Fatalf("test signer verified by its own verifier: %v", err)
	}
	if _, err := SignEnvelope(context.Background(), brokenSigner{owner}, env); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("broken signer: %v", err)
	}
}

// brokenSigner returns a signature over the wrong digest.
type brokenSigner struct{ *KeySigner }

func (b brokenSigner) Sign(ctx context.Context, txid [32]byte) ([]byte, error) {
	txid[0] ^= 1
	return b.KeySigner.Sign(ctx, txid)
}

func (b brokenSigner) VerifySignature(txid [32]byte, sig []byte, owner Address) bool {
	return Secp256k1Verifier.VerifySignature(txid, sig, owner)
}

// SignEnvelope does not recover the owner again for a KeySigner (it would
// cost as much as the signature): what makes that safe is that every
// KeySigner signature recovers to its address, with the recovery id it
// carries — checked here over many keys and digests.
func TestKeySignerSignaturesVerifyByConstruction(t *testing.T) {
	seed := sha256.Sum256([]byte("weir key signer by construction"))
	for i := range 64 {
		key := sha256.Sum256(append(seed[:], byte(i)))
		k, err := NewKeySigner(key[:])
		if err != nil {
			t.Fatal(err)
		}
		txid := sha256.Sum256(append(key[:], 'x'))
		sig, err := k.Sign(context.Background(), txid)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifySignature(txid, sig, k.Address()); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
}
