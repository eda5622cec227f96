/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwks.h - a JSON Web Key Set (RFC 7517): the public keys the gateway
 * accepts JWT signatures from, read from the file every OIDC provider
 * publishes (its jwks_uri) or that `shopmicro-jwt keygen` writes.
 *
 * What a key may be (anything else fails the whole set, naming the key):
 *   kty "EC"  crv "P-256" (ES256) or "P-384" (ES384), x and y of the
 *             curve's size; the point must be on the curve;
 *   kty "RSA" n of GW_JWKS_MIN_RSA_BITS..GW_JWKS_MAX_RSA_BITS bits, e odd
 *             and > 1 (RS256, PS256).
 * "kid" (1..GW_JWKS_KID_MAX bytes, unique in the set) is optional only when
 * the set holds one key. "alg", when present, pins the key to that one
 * algorithm and must fit its kty/crv; absent, an EC key gets its curve's
 * algorithm and an RSA key RS256 and PS256. "use": "enc" keys are skipped
 * (they are not for signatures); any other value than "sig" fails. A set
 * with no signature key left fails too: a reload must not silently lock
 * every client out. Symmetric keys (kty "oct") are refused: the gateway
 * verifies with public keys only, and a shared secret in the set is the raw
 * material of the HS256-with-the-public-key confusion.
 *
 * A set is immutable once built and reference-counted, so loop threads can
 * verify with it while the main thread loads its successor (auth.h).
 */
#ifndef GW_JWKS_H
#define GW_JWKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "svc/core.h"

/* Bounds: a provider's set is a few KB with 2-4 keys. */
#define GW_JWKS_MAX_FILE_BYTES (64u * 1024u)
#define GW_JWKS_MAX_KEYS       16u
#define GW_JWKS_KID_MAX        128u
#define GW_JWKS_MIN_RSA_BITS   2048u
/* Verification cost grows with the square of the modulus: 8192 bits is
 * about 16 times a 2048-bit verify, and more than any provider uses. */
#define GW_JWKS_MAX_RSA_BITS 8192u

/* The JWS algorithms the gateway knows (RFC 7518 §3.1 names). */
typedef enum {
    GW_JWS_ES256,
    GW_JWS_ES384,
    GW_JWS_RS256,
    GW_JWS_PS256,
    GW_JWS__ALG_LAST
} gw_jws_alg_t;
#define GW_JWS_ALG_BIT(a) (1u << (a))

/* "ES256" ...; NULL for a value outside the enum. */
const char *gw_jws_alg_name(gw_jws_alg_t a);
/* The algorithm named by name (len bytes); false for any other name,
 * including "none" and every HS*. */
bool gw_jws_alg_parse(const char *name, size_t len, gw_jws_alg_t *out);

typedef struct gw_jwks gw_jwks_t;

/* One key of a set: valid while the set is held. */
typedef struct gw_jwk {
    const char *kid; /* "" when the key has none */
    uint32_t algs;   /* GW_JWS_ALG_BIT set: what this key may verify */
    EVP_PKEY *pkey;  /* the public key; never modified once built */
} gw_jwk_t;

/*
 * Builds a set from JSON text (len bytes). *out owned by caller
 * (gw_jwks_release), untouched on failure. SVC_EINVAL with the reason in
 * errbuf ("key 2: kty \"oct\" is not accepted ..."), SVC_ENOMEM.
 */
svc_err_t gw_jwks_parse(const char *json, size_t len, gw_jwks_t **out,
                        char errbuf[static SVC_ERRBUF_LEN]) __attribute__((warn_unused_result));
/* The same from a file of at most GW_JWKS_MAX_FILE_BYTES. */
svc_err_t gw_jwks_load_file(const char *path, gw_jwks_t **out, char errbuf[static SVC_ERRBUF_LEN])
    __attribute__((warn_unused_result));

/* Another reference to s (returned). Thread-safe. */
gw_jwks_t *gw_jwks_retain(gw_jwks_t *s);
/* Drops a reference; the last frees the set. NULL-safe, thread-safe. */
void gw_jwks_release(gw_jwks_t *s);

/* Number of signature keys in the set (>= 1). */
size_t gw_jwks_count(const gw_jwks_t *s);
/* Key i (0 <= i < count). */
const gw_jwk_t *gw_jwks_at(const gw_jwks_t *s, size_t i);
/* The key whose kid is kid (len bytes), or NULL. */
const gw_jwk_t *gw_jwks_find(const gw_jwks_t *s, const char *kid, size_t len);

#endif
