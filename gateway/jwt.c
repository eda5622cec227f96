/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt.c - the JWT verifier (see jwt.h for the rules).
 *
 * The order of the steps is deliberate: everything that can be refused
 * without a key (length, shape, base64url, header) is refused first, the key
 * and algorithm are settled before any crypto, and the payload is parsed
 * only once its signature holds, so that unsigned bytes reach jansson only
 * in the small header. All crypto is OpenSSL's EVP; the only conversion
 * done here is the JWS ECDSA signature (raw r||s) into DER.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>

#include "b64url.h"
#include "jwt.h"

static const char *const reasons[GW_JWT__ERR_LAST] = {
#define GW_JWT_XX(name, text) [GW_JWT_##name] = text,
    GW_JWT_ERR_MAP(GW_JWT_XX)
#undef GW_JWT_XX
};

const char *gw_jwt_reason(gw_jwt_err_t e)
{
    return (unsigned)e < GW_JWT__ERR_LAST ? reasons[e] : "unknown";
}

const char *gw_jwt_rfc6750_error(gw_jwt_err_t e)
{
    switch (e) {
    case GW_JWT_OK:
    case GW_JWT_MISSING:
    case GW_JWT_INTERNAL:
    case GW_JWT__ERR_LAST:
        return NULL;
    case GW_JWT_TOO_LONG:
    case GW_JWT_MALFORMED:
    case GW_JWT_BAD_HEADER:
    case GW_JWT_BAD_ALG:
    case GW_JWT_UNKNOWN_KID:
    case GW_JWT_BAD_SIGNATURE:
    case GW_JWT_BAD_CLAIMS:
    case GW_JWT_BAD_ISSUER:
    case GW_JWT_BAD_AUDIENCE:
    case GW_JWT_EXPIRED:
    case GW_JWT_NOT_YET_VALID:
    case GW_JWT_BAD_SUB:
        break;
    }
    return "invalid_token";
}

void gw_jwt_opts_init(gw_jwt_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->leeway_s = GW_JWT_DEFAULT_LEEWAY_S;
}

svc_err_t gw_jwt_opts_check(const gw_jwt_opts_t *o, char errbuf[static SVC_ERRBUF_LEN])
{
    if (o->issuer == NULL || o->issuer[0] == '\0') {
        svc_errbuf_set(errbuf, "JWT issuer is not set");
        return SVC_EINVAL;
    }
    if (o->audience == NULL || o->audience[0] == '\0') {
        svc_errbuf_set(errbuf, "JWT audience is not set");
        return SVC_EINVAL;
    }
    if (o->leeway_s > GW_JWT_MAX_LEEWAY_S) {
        svc_errbuf_set(errbuf, "JWT leeway %u s is more than %u s", o->leeway_s,
                       GW_JWT_MAX_LEEWAY_S);
        return SVC_EINVAL;
    }
    return SVC_OK;
}

int64_t gw_jwt_now_s(const gw_jwt_opts_t *o)
{
    struct timespec ts;

    if (o->wall_clock != NULL)
        return (int64_t)(o->wall_clock->now_ns(o->wall_clock->ctx) / 1000000000ull);
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

/* The digest and, for ECDSA, the coordinate size of an algorithm. */
static const EVP_MD *alg_md(gw_jws_alg_t a, size_t *ec_coord)
{
    *ec_coord = 0;
    switch (a) {
    case GW_JWS_ES256:
        *ec_coord = 32;
        return EVP_sha256();
    case GW_JWS_ES384:
        *ec_coord = 48;
        return EVP_sha384();
    case GW_JWS_RS256:
    case GW_JWS_PS256:
        return EVP_sha256();
    case GW_JWS__ALG_LAST:
        break;
    }
    return NULL;
}

/* r||s (2 * coord bytes) into a DER ECDSA-Sig-Value in der (cap bytes). */
static gw_jwt_err_t ecdsa_der(const uint8_t *sig, size_t coord, uint8_t *der, size_t cap,
                              size_t *der_len)
{
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, (int)coord, NULL), *s = BN_bin2bn(sig + coord, (int)coord, NULL);
    gw_jwt_err_t err = GW_JWT_INTERNAL;
    unsigned char *p = der;
    int n;

    if (es == NULL || r == NULL || s == NULL || ECDSA_SIG_set0(es, r, s) != 1)
        goto out;
    r = s = NULL; /* es owns them now */
    n = i2d_ECDSA_SIG(es, NULL);
    if (n <= 0 || (size_t)n > cap)
        goto out;
    n = i2d_ECDSA_SIG(es, &p);
    if (n <= 0)
        goto out;
    *der_len = (size_t)n;
    err = GW_JWT_OK;
out:
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(es);
    return err;
}

static gw_jwt_err_t check_signature(const gw_jwk_t *key, gw_jws_alg_t alg, const char *input,
                                    size_t input_len, const uint8_t *sig, size_t sig_len)
{
    uint8_t der[2 * 48 + 16];
    size_t coord, der_len;
    const EVP_MD *md = alg_md(alg, &coord);
    EVP_MD_CTX *ctx = NULL;
    EVP_PKEY_CTX *pctx = NULL;
    gw_jwt_err_t err;
    int rc;

    if (md == NULL)
        return GW_JWT_BAD_ALG;
    if (coord != 0) {
        /* RFC 7518 §3.4: exactly two coordinates; a DER signature or a
         * shortened one is not a JWS signature. */
        if (sig_len != 2 * coord)
            return GW_JWT_BAD_SIGNATURE;
        err = ecdsa_der(sig, coord, der, sizeof(der), &der_len);
        if (err != GW_JWT_OK)
            return err;
        sig = der;
        sig_len = der_len;
    } else if (sig_len != (size_t)EVP_PKEY_get_size(key->pkey)) {
        return GW_JWT_BAD_SIGNATURE;
    }
    ctx = EVP_MD_CTX_new();
    if (ctx == NULL)
        return GW_JWT_INTERNAL;
    err = GW_JWT_INTERNAL;
    if (EVP_DigestVerifyInit(ctx, &pctx, md, NULL, key->pkey) != 1)
        goto out;
    /* RFC 7518 §3.5: PSS with MGF1 of the same hash and a salt as long as it. */
    if (alg == GW_JWS_PS256 &&
        (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
         EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1))
        goto out;
    rc = EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)input, input_len);
    /* 0 is a wrong signature; a negative value a malformed one (e.g. a DER
     * r or s out of range): the token's fault either way. */
    err = rc == 1 ? GW_JWT_OK : GW_JWT_BAD_SIGNATURE;
out:
    EVP_MD_CTX_free(ctx);
    return err;
}

/* A NumericDate claim: absent (false, *present = false), a number (true),
 * anything else (false, *present = true). */
static bool numeric_date(json_t *payload, const char *name, double *out, bool *present)
{
    json_t *v = json_object_get(payload, name);

    *present = v != NULL;
    if (v == NULL || !json_is_number(v))
        return false;
    *out = json_number_value(v);
    return isfinite(*out);
}

static gw_jwt_err_t add_scope_string(const char *s, size_t len, pr_scopes_t *scopes)
{
    size_t i = 0;

    while (i < len) {
        size_t j = i;
        while (j < len && s[j] != ' ')
            j++;
        *scopes |= pr_scopes_parse(s + i, j - i);
        i = j + 1;
    }
    return GW_JWT_OK;
}

static gw_jwt_err_t read_scopes(json_t *payload, pr_scopes_t *scopes)
{
    json_t *v = json_object_get(payload, "scope");
    size_t i;
    json_t *e;

    *scopes = 0;
    if (v != NULL) {
        if (!json_is_string(v))
            return GW_JWT_BAD_CLAIMS;
        return add_scope_string(json_string_value(v), json_string_length(v), scopes);
    }
    v = json_object_get(payload, "scp");
    if (v == NULL)
        return GW_JWT_OK;
    /* Azure AD sends "scp" as a space-separated string, Okta as an array. */
    if (json_is_string(v))
        return add_scope_string(json_string_value(v), json_string_length(v), scopes);
    if (!json_is_array(v))
        return GW_JWT_BAD_CLAIMS;
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e))
            return GW_JWT_BAD_CLAIMS;
        *scopes |= pr_scopes_parse(json_string_value(e), json_string_length(e));
    }
    return GW_JWT_OK;
}

static bool string_is(json_t *v, const char *want)
{
    return json_is_string(v) && json_string_length(v) == strlen(want) &&
           memcmp(json_string_value(v), want, json_string_length(v)) == 0;
}

static gw_jwt_err_t check_claims(json_t *payload, const gw_jwt_opts_t *o, gw_principal_t *out)
{
    json_t *aud, *sub, *e;
    double exp, nbf, iat, now = (double)gw_jwt_now_s(o), leeway = o->leeway_s;
    bool present, found = false;
    size_t i, len;
    const char *s;

    if (!json_is_object(payload))
        return GW_JWT_MALFORMED;
    if (!string_is(json_object_get(payload, "iss"), o->issuer))
        return GW_JWT_BAD_ISSUER;
    aud = json_object_get(payload, "aud");
    if (json_is_array(aud)) {
        json_array_foreach(aud, i, e)
        {
            if (!json_is_string(e))
                return GW_JWT_BAD_CLAIMS;
            found = found || string_is(e, o->audience);
        }
    } else {
        found = string_is(aud, o->audience);
    }
    if (!found)
        return GW_JWT_BAD_AUDIENCE;
    if (!numeric_date(payload, "exp", &exp, &present))
        return GW_JWT_BAD_CLAIMS;
    if (!(exp > now - leeway))
        return GW_JWT_EXPIRED;
    if (numeric_date(payload, "nbf", &nbf, &present)) {
        if (nbf > now + leeway)
            return GW_JWT_NOT_YET_VALID;
    } else if (present) {
        return GW_JWT_BAD_CLAIMS;
    }
    /* A token issued in the future comes from a clock that cannot be trusted
     * for exp either. */
    if (numeric_date(payload, "iat", &iat, &present)) {
        if (iat > now + leeway)
            return GW_JWT_NOT_YET_VALID;
    } else if (present) {
        return GW_JWT_BAD_CLAIMS;
    }
    sub = json_object_get(payload, "sub");
    if (!json_is_string(sub))
        return GW_JWT_BAD_SUB;
    s = json_string_value(sub);
    len = json_string_length(sub);
    if (!pr_subject_valid(s, len))
        return GW_JWT_BAD_SUB;
    if (read_scopes(payload, &out->scopes) != GW_JWT_OK)
        return GW_JWT_BAD_CLAIMS;
    memcpy(out->sub, s, len + 1);
    /* Rounded down, and bounded so that a cache's comparisons cannot overflow. */
    out->exp = exp > 4e18 ? INT64_C(4000000000000000000) : (int64_t)floor(exp);
    return GW_JWT_OK;
}

static gw_jwt_err_t check_header(json_t *hdr, const gw_jwks_t *set, const gw_jwk_t **key,
                                 gw_jws_alg_t *alg)
{
    json_t *a, *typ, *kid;

    if (!json_is_object(hdr))
        return GW_JWT_BAD_HEADER;
    a = json_object_get(hdr, "alg");
    if (!json_is_string(a))
        return GW_JWT_BAD_HEADER;
    if (!gw_jws_alg_parse(json_string_value(a), json_string_length(a), alg))
        return GW_JWT_BAD_ALG;
    typ = json_object_get(hdr, "typ");
    if (typ != NULL && !string_is(typ, "JWT") && !string_is(typ, "at+jwt"))
        return GW_JWT_BAD_HEADER;
    /* RFC 7515 §4.1.11: an extension the recipient does not understand
     * makes the JWS invalid; none is understood here. */
    if (json_object_get(hdr, "crit") != NULL)
        return GW_JWT_BAD_HEADER;
    kid = json_object_get(hdr, "kid");
    if (kid != NULL) {
        if (!json_is_string(kid))
            return GW_JWT_BAD_HEADER;
        *key = gw_jwks_find(set, json_string_value(kid), json_string_length(kid));
    } else {
        *key = gw_jwks_count(set) == 1 ? gw_jwks_at(set, 0) : NULL;
    }
    if (*key == NULL)
        return GW_JWT_UNKNOWN_KID;
    /* The algorithm-confusion check: the header names the algorithm, but
     * only the key decides which ones it may be verified with. */
    if (((*key)->algs & GW_JWS_ALG_BIT(*alg)) == 0)
        return GW_JWT_BAD_ALG;
    return GW_JWT_OK;
}

gw_jwt_err_t gw_jwt_verify(const gw_jwks_t *set, const gw_jwt_opts_t *o, const char *token,
                           size_t len, gw_principal_t *out)
{
    uint8_t buf[GW_B64URL_DECODED_MAX(GW_JWT_MAX_TOKEN)];
    uint8_t sig[GW_JWKS_MAX_RSA_BITS / 8];
    const char *dot1, *dot2, *p2, *p3;
    size_t hlen, plen, slen;
    const gw_jwk_t *key = NULL;
    gw_jws_alg_t alg;
    json_t *hdr = NULL, *payload = NULL;
    gw_jwt_err_t err;

    memset(out, 0, sizeof(*out));
    if (len == 0)
        return GW_JWT_MISSING;
    if (len > GW_JWT_MAX_TOKEN)
        return GW_JWT_TOO_LONG;
    dot1 = memchr(token, '.', len);
    if (dot1 == NULL)
        return GW_JWT_MALFORMED;
    p2 = dot1 + 1;
    dot2 = memchr(p2, '.', (size_t)(token + len - p2));
    if (dot2 == NULL)
        return GW_JWT_MALFORMED;
    p3 = dot2 + 1;
    /* A fourth part (JWE has five) or an empty part is not a compact JWS. */
    if (memchr(p3, '.', (size_t)(token + len - p3)) != NULL || dot1 == token || dot2 == p2 ||
        p3 == token + len)
        return GW_JWT_MALFORMED;

    if (!gw_b64url_decode(token, (size_t)(dot1 - token), buf, sizeof(buf), &hlen))
        return GW_JWT_MALFORMED;
    hdr = json_loadb((const char *)buf, hlen, JSON_REJECT_DUPLICATES, NULL);
    if (hdr == NULL)
        return GW_JWT_BAD_HEADER;
    err = check_header(hdr, set, &key, &alg);
    json_decref(hdr);
    if (err != GW_JWT_OK)
        return err;

    if (!gw_b64url_decode(p3, (size_t)(token + len - p3), sig, sizeof(sig), &slen))
        return GW_JWT_MALFORMED;
    err = check_signature(key, alg, token, (size_t)(dot2 - token), sig, slen);
    if (err != GW_JWT_OK)
        return err;

    if (!gw_b64url_decode(p2, (size_t)(dot2 - p2), buf, sizeof(buf), &plen))
        return GW_JWT_MALFORMED;
    payload = json_loadb((const char *)buf, plen, JSON_REJECT_DUPLICATES, NULL);
    if (payload == NULL)
        return GW_JWT_MALFORMED;
    err = check_claims(payload, o, out);
    json_decref(payload);
    if (err != GW_JWT_OK)
        memset(out, 0, sizeof(*out));
    return err;
}
