//go:build libsecp256k1

package secp

/*
#include <stddef.h>

// The declarations this package needs from libsecp256k1's public headers
// (secp256k1.h, secp256k1_extrakeys.h, secp256k1_schnorrsig.h). The
// definitions are in fiatjaf.com/nostr's cgo object, which compiles the
// library with its schnorrsig and extrakeys modules; the headers themselves
// sit in that module's directory, which a cgo directive cannot name.
typedef struct secp256k1_context_struct secp256k1_context;
typedef struct { unsigned char data[64]; } secp256k1_pubkey;
typedef struct { unsigned char data[96]; } secp256k1_keypair;

extern secp256k1_context *secp256k1_context_create(unsigned int flags);
extern int secp256k1_ec_pubkey_parse(const secp256k1_context *ctx, secp256k1_pubkey *pubkey, const unsigned char *input, size_t inputlen);
extern int secp256k1_ec_pubkey_serialize(const secp256k1_context *ctx, unsigned char *output, size_t *outputlen, const secp256k1_pubkey *pubkey, unsigned int flags);
extern int secp256k1_ec_pubkey_tweak_mul(const secp256k1_context *ctx, secp256k1_pubkey *pubkey, const unsigned char *tweak32);
extern int secp256k1_keypair_create(const secp256k1_context *ctx, secp256k1_keypair *keypair, const unsigned char *seckey);
extern int secp256k1_schnorrsig_sign32(const secp256k1_context *ctx, unsigned char *sig64, const unsigned char *msg32, const secp256k1_keypair *keypair, const unsigned char *aux_rand32);

#define CVM_SECP256K1_CONTEXT_NONE 1
#define CVM_SECP256K1_EC_COMPRESSED ((1 << 1) | (1 << 8))

// cvm_shared_x writes the x coordinate of sk·P, P being the even-y point
// with x coordinate pub32, in one cgo call. tweak_mul multiplies in
// variable time, as the pure-Go path (dcrd's ScalarMultNonConst) does.
static int cvm_shared_x(const secp256k1_context *ctx, unsigned char *out32, const unsigned char *pub32, const unsigned char *sk32) {
	unsigned char buf[33];
	secp256k1_pubkey p;
	size_t n = sizeof(buf);
	buf[0] = 2;
	for (int i = 0; i < 32; i++) buf[i + 1] = pub32[i];
	if (!secp256k1_ec_pubkey_parse(ctx, &p, buf, sizeof(buf))) return -1;
	if (!secp256k1_ec_pubkey_tweak_mul(ctx, &p, sk32)) return -2;
	secp256k1_ec_pubkey_serialize(ctx, buf, &n, &p, CVM_SECP256K1_EC_COMPRESSED);
	for (int i = 0; i < 32; i++) out32[i] = buf[i + 1];
	return 1;
}
*/
import "C"

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"fiatjaf.com/nostr"
)

// Backend names the implementation this binary was built with.
const Backend = "libsecp256k1"

// context returns the library context every call shares: read-only after
// creation, so safe for concurrent use, and costly enough to make once.
var context = sync.OnceValue(func() *C.secp256k1_context {
	ctx := C.secp256k1_context_create(C.CVM_SECP256K1_CONTEXT_NONE)
	if ctx == nil {
		panic("secp: secp256k1_context_create failed")
	}
	return ctx
})

// Key is a secret key parsed once for signing: a libsecp256k1 keypair, which
// holds the public point so that signing skips that multiplication.
type Key struct {
	kp C.secp256k1_keypair
}

// NewKey parses sk.
func NewKey(sk nostr.SecretKey) (*Key, error) {
	k := new(Key)
	if C.secp256k1_keypair_create(context(), &k.kp, (*C.uchar)(unsafe.Pointer(&sk[0]))) != 1 {
		return nil, fmt.Errorf("%w: secret key is zero or not below the group order", ErrInvalidKey)
	}
	return k, nil
}

// Sign returns the BIP-340 signature of the 32-byte message id, with fresh
// auxiliary randomness as BIP-340 recommends against side channels.
func (k *Key) Sign(id *[32]byte) ([64]byte, error) {
	var sig [64]byte
	var aux [32]byte
	rand.Read(aux[:])
	if C.secp256k1_schnorrsig_sign32(context(), (*C.uchar)(unsafe.Pointer(&sig[0])), (*C.uchar)(unsafe.Pointer(&id[0])), &k.kp, (*C.uchar)(unsafe.Pointer(&aux[0]))) != 1 {
		return sig, errors.New("secp256k1: signing failed")
	}
	return sig, nil
}

// ConversationKey returns NIP-44 v2's conversation key between sk and pub.
func ConversationKey(pub nostr.PubKey, sk nostr.SecretKey) ([32]byte, error) {
	var x [32]byte
	switch C.cvm_shared_x(context(), (*C.uchar)(unsafe.Pointer(&x[0])), (*C.uchar)(unsafe.Pointer(&pub[0])), (*C.uchar)(unsafe.Pointer(&sk[0]))) {
	case -1:
		return [32]byte{}, fmt.Errorf("%w: public key %x is not on the curve", ErrInvalidKey, pub[:])
	case -2:
		return [32]byte{}, fmt.Errorf("%w: secret key is zero or not below the group order", ErrInvalidKey)
	}
	return conversationKey(x[:])
}

// conversationKey derives NIP-44 v2's conversation key from the unhashed x
// coordinate of the shared point.
func conversationKey(sharedX []byte) ([32]byte, error) {
	var ck [32]byte
	prk, err := hkdf.Extract(sha256.New, sharedX, []byte("nip44-v2"))
	if err != nil {
		return ck, err
	}
	copy(ck[:], prk)
	return ck, nil
}
