/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt_sign.h - the signing side of jwt.h, for the local stack's token tool
 * (gateway/tools/jwt_tool.c, `shopmicro-jwt`) and the tests: compact JWS
 * with ES256, ES384, RS256 or PS256 through OpenSSL EVP, and a public key
 * written as a JWK. The gateway itself never signs.
 */
#ifndef GW_JWT_SIGN_H
#define GW_JWT_SIGN_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "jwks.h"
#include "svc/core.h"

/* The RFC 7638 thumbprint of a public key (SHA-256, base64url: 43
 * characters and a NUL), the kid `keygen` gives its key. */
#define GW_JWK_THUMBPRINT_LEN 44

/*
 * Signs: returns "b64(header).b64(payload).b64(signature)" for the JSON
 * texts header_json and payload_json, taken as they are (a test can put
 * anything in them). alg must fit key (an EC key of its curve, or RSA).
 * *out owned by caller (free). SVC_EINVAL (alg and key do not fit) or
 * SVC_ENOMEM; errbuf says which.
 */
svc_err_t gw_jwt_sign_raw(EVP_PKEY *key, gw_jws_alg_t alg, const char *header_json,
                          const char *payload_json, char **out, char errbuf[static SVC_ERRBUF_LEN])
    __attribute__((warn_unused_result));

/* The claims the tool signs. */
typedef struct gw_jwt_claims {
    const char *iss, *aud, *sub; /* required */
    const char *scope;           /* NULL: no "scope" claim */
    int64_t iat;                 /* seconds since the epoch; also the base of exp and nbf */
    int64_t ttl_s;               /* exp = iat + ttl_s */
    bool has_nbf;
    int64_t nbf_offset_s; /* nbf = iat + nbf_offset_s, when has_nbf */
} gw_jwt_claims_t;

/* A token with header {"alg","typ":"JWT","kid"} (kid NULL: none) and the
 * claims above. Same contract as gw_jwt_sign_raw. */
svc_err_t gw_jwt_sign(EVP_PKEY *key, gw_jws_alg_t alg, const char *kid, const gw_jwt_claims_t *c,
                      char **out, char errbuf[static SVC_ERRBUF_LEN])
    __attribute__((warn_unused_result));

/* The thumbprint of an EC (P-256, P-384) or RSA key. */
svc_err_t gw_jwk_thumbprint(const EVP_PKEY *key, char out[GW_JWK_THUMBPRINT_LEN],
                            char errbuf[static SVC_ERRBUF_LEN]);
/* The public JWK of key as a JSON object text with "kid" (NULL: none),
 * "alg" and "use":"sig". *out owned by caller (free). */
svc_err_t gw_jwk_public_json(const EVP_PKEY *key, const char *kid, gw_jws_alg_t alg, char **out,
                             char errbuf[static SVC_ERRBUF_LEN])
    __attribute__((warn_unused_result));

#endif
