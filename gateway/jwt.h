/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt.h - verifying a bearer JWT (RFC 7519, compact JWS of RFC 7515) against
 * a key set (jwks.h), and what a verified token says: its principal.
 *
 * The token:
 *  - at most GW_JWT_MAX_TOKEN bytes, three base64url parts (no padding),
 *    the header and payload JSON objects;
 *  - header "alg" one of ES256 ES384 RS256 PS256 that the chosen key allows
 *    ("none", HS*, and an alg of the other key type are refused: the
 *    algorithm-confusion attacks), "typ" absent or "JWT" / "at+jwt"
 *    (RFC 9068), "crit" absent (no extension is understood);
 *  - "kid" selects the key; a token without one is accepted only when the
 *    set holds exactly one key (what a provider that never rotates
 *    publishes); with several keys a kid-less token is refused rather than
 *    tried against each (that would multiply the cost of a forged token);
 *  - signature verified by OpenSSL (EVP_DigestVerify); ES256/ES384's raw
 *    r||s (RFC 7518 §3.4) of exactly twice the coordinate size is turned
 *    into the DER that OpenSSL expects;
 *  - claims: "iss" equal to the issuer, "aud" (string or array of strings)
 *    holding the audience, "exp" required, "nbf" and "iat" optional, all
 *    NumericDate (a JSON number; fractions allowed); exp > now - leeway,
 *    nbf <= now + leeway, iat <= now + leeway;
 *  - "sub": 1..GW_JWT_SUB_MAX bytes of A-Z a-z 0-9 and - . _ ~ : @ | +
 *    (it becomes the order's customer_id, at most 100 characters, and a
 *    gRPC metadata value, where only printable ASCII may go);
 *  - scopes: "scope" a space-separated string (RFC 8693 §4.2), or else
 *    "scp" an array of strings (Azure AD, Okta). Unknown scopes are ignored.
 *
 * Every failure is invalid_token for the client (RFC 6750 §3.1); the
 * gw_jwt_err_t says why, for the log line only.
 */
#ifndef GW_JWT_H
#define GW_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jwks.h"
#include "principal/principal.h"
#include "svc/core.h"

#define GW_JWT_MAX_TOKEN 8192u
#define GW_JWT_SUB_MAX   PR_SUBJECT_MAX
/* The default clock skew allowed for exp, nbf and iat (GATEWAY_JWT_LEEWAY_S). */
#define GW_JWT_DEFAULT_LEEWAY_S 30u
#define GW_JWT_MAX_LEEWAY_S     600u

/* Scopes are pkg/principal's bits (pr_scope_t: catalog:write, orders:write,
 * orders:read, orders:admin), the same the services read from the call's
 * metadata; a sub follows pr_subject_valid. */

/* Who a verified token speaks for. Plain data: copied freely. */
typedef struct gw_principal {
    char sub[GW_JWT_SUB_MAX + 1]; /* NUL-terminated; charset as above */
    pr_scopes_t scopes;           /* pr_scope_t bits */
    int64_t exp;                  /* seconds since the Unix epoch */
} gw_principal_t;

/* Why a token was refused. APPEND ONLY: the reasons appear in logs. */
#define GW_JWT_ERR_MAP(XX)                                                                         \
    XX(OK, "ok")                                                                                   \
    XX(MISSING, "no token")                                                                        \
    XX(TOO_LONG, "token too long")                                                                 \
    XX(MALFORMED, "malformed token")                                                               \
    XX(BAD_HEADER, "bad header")                                                                   \
    XX(BAD_ALG, "algorithm not accepted")                                                          \
    XX(UNKNOWN_KID, "unknown key id")                                                              \
    XX(BAD_SIGNATURE, "bad signature")                                                             \
    XX(BAD_CLAIMS, "bad claims")                                                                   \
    XX(BAD_ISSUER, "wrong issuer")                                                                 \
    XX(BAD_AUDIENCE, "wrong audience")                                                             \
    XX(EXPIRED, "expired")                                                                         \
    XX(NOT_YET_VALID, "not yet valid")                                                             \
    XX(BAD_SUB, "bad subject")                                                                     \
    XX(INTERNAL, "internal error")

typedef enum {
#define GW_JWT_XX(name, text) GW_JWT_##name,
    GW_JWT_ERR_MAP(GW_JWT_XX)
#undef GW_JWT_XX
        GW_JWT__ERR_LAST
} gw_jwt_err_t;

/* A short reason for the log ("expired"). Never NULL. */
const char *gw_jwt_reason(gw_jwt_err_t e);
/* The RFC 6750 error code for WWW-Authenticate: NULL for OK and MISSING
 * (a request without a token gets a bare Bearer challenge, §3.1),
 * "invalid_token" for every other refusal. INTERNAL is not the token's
 * fault: the caller answers 500 and no challenge (the function says NULL). */
const char *gw_jwt_rfc6750_error(gw_jwt_err_t e);

typedef struct gw_jwt_opts {
    const char *issuer;   /* required; the "iss" every token must carry; borrowed */
    const char *audience; /* required; one of the token's "aud"; borrowed */
    uint32_t leeway_s;    /* GW_JWT_DEFAULT_LEEWAY_S; <= GW_JWT_MAX_LEEWAY_S */
    /* NULL: CLOCK_REALTIME. Otherwise now_ns must give nanoseconds since the
     * Unix epoch (tests pass a fake clock set to such a time). */
    const svc_clock_t *wall_clock;
} gw_jwt_opts_t;

/* Fills the defaults (issuer and audience NULL: they must be set). */
void gw_jwt_opts_init(gw_jwt_opts_t *o);
/* SVC_EINVAL with the reason in errbuf when o cannot be used. */
svc_err_t gw_jwt_opts_check(const gw_jwt_opts_t *o, char errbuf[static SVC_ERRBUF_LEN]);

/* Now, in seconds since the Unix epoch, from o's clock. */
int64_t gw_jwt_now_s(const gw_jwt_opts_t *o);

/*
 * Verifies token (len bytes; need not be NUL-terminated) with the keys of
 * set and the rules above. On GW_JWT_OK fills *out; otherwise *out is
 * zeroed. o must have passed gw_jwt_opts_check. No cache: every call
 * verifies the signature (auth.h caches). Thread-safe; set is borrowed.
 */
gw_jwt_err_t gw_jwt_verify(const gw_jwks_t *set, const gw_jwt_opts_t *o, const char *token,
                           size_t len, gw_principal_t *out);

/* Whether a principal verified earlier is still within its exp at now_s
 * (the same rule and leeway as gw_jwt_verify): what a cache hit checks. */
static inline bool gw_jwt_still_valid(const gw_principal_t *p, int64_t now_s, uint32_t leeway_s)
{
    return p->exp > now_s - (int64_t)leeway_s;
}

#endif
