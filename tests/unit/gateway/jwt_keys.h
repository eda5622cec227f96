/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt_keys.h - what the JWT tests share: keys made with OpenSSL in the test,
 * key sets written as JWKS text, tokens signed with gateway/jwt_sign.c (the
 * same code the local stack's tool uses), and a wall clock at a fixed epoch.
 * Every helper fails the test (cmocka) rather than return an error.
 */
#ifndef TEST_GATEWAY_JWT_KEYS_H
#define TEST_GATEWAY_JWT_KEYS_H

#include <openssl/evp.h>

#include "jwks.h"
#include "jwt.h"
#include "jwt_sign.h"

/* The fake wall clock's start: 2027-01-15, in seconds since the epoch. */
#define TK_NOW 1800000000LL
#define TK_ISS "https://idp.test"
#define TK_AUD "shopmicro-gateway"

EVP_PKEY *tk_ec(const char *curve); /* "P-256", "P-384" */
EVP_PKEY *tk_rsa(unsigned bits);

/* A JWK of key (kid NULL: none) as JSON text; caller frees. */
char *tk_jwk(EVP_PKEY *key, const char *kid, gw_jws_alg_t alg);
/* {"keys":[a, b, ...]} of NULL-terminated JWK texts; frees them; caller frees the result. */
char *tk_jwks(const char *first, ...);
/* The set of a JWKS text (fails the test when it does not parse). */
gw_jwks_t *tk_set(const char *json);

/* Writes text to path the way a deployment should replace a key set: a new
 * file renamed over the old (path + ".tmp" first), so that a reader never
 * sees half of it. */
void tk_write_file(const char *path, const char *text);

/* A token of header and payload texts as they are; caller frees. */
char *tk_token(EVP_PKEY *key, gw_jws_alg_t alg, const char *header, const char *payload);
/* A token with {"alg","typ","kid"} and a payload with iss, aud, sub "c1",
 * exp = TK_NOW + 600 and the members of `extra` (a JSON object text whose
 * members replace those; a member with value null is removed). */
char *tk_claims(EVP_PKEY *key, gw_jws_alg_t alg, const char *kid, const char *extra);

/* opts with TK_ISS, TK_AUD, leeway 30 s and a fake clock at TK_NOW (the
 * clock lives in a static of jwt_keys.c). */
void tk_opts(gw_jwt_opts_t *o);
/* Sets that clock to now_s (seconds since the epoch). */
void tk_clock_set(long long now_s);
const svc_clock_t *tk_clock(void);

#endif
