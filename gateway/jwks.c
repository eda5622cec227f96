/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwks.c - a JWK Set turned into OpenSSL public keys (see jwks.h).
 *
 * Keys are built with EVP_PKEY_fromdata from the JWK's own numbers, so no
 * PEM or DER text is ever assembled by hand. Every check that protects the
 * verifier (curve, point on the curve, modulus size, alg against kty) is made
 * here, once per load, so that gw_jwt_verify only has to look a key up.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>

#include "b64url.h"
#include "jwks.h"

struct gw_jwks {
    _Atomic unsigned refs;
    size_t n;
    gw_jwk_t keys[GW_JWKS_MAX_KEYS];
    char kids[GW_JWKS_MAX_KEYS][GW_JWKS_KID_MAX + 1];
};

static const char *const alg_names[GW_JWS__ALG_LAST] = {
    [GW_JWS_ES256] = "ES256",
    [GW_JWS_ES384] = "ES384",
    [GW_JWS_RS256] = "RS256",
    [GW_JWS_PS256] = "PS256",
};

const char *gw_jws_alg_name(gw_jws_alg_t a)
{
    return (unsigned)a < GW_JWS__ALG_LAST ? alg_names[a] : NULL;
}

bool gw_jws_alg_parse(const char *name, size_t len, gw_jws_alg_t *out)
{
    for (unsigned a = 0; a < GW_JWS__ALG_LAST; a++) {
        if (strlen(alg_names[a]) == len && memcmp(alg_names[a], name, len) == 0) {
            *out = (gw_jws_alg_t)a;
            return true;
        }
    }
    return false;
}

/* The curves: JWK name, OpenSSL group name, coordinate size, algorithm. */
static const struct {
    const char *crv, *group;
    size_t coord;
    gw_jws_alg_t alg;
} curves[] = {
    {"P-256", "prime256v1", 32, GW_JWS_ES256},
    {"P-384", "secp384r1", 48, GW_JWS_ES384},
};

/* A base64url member of a JWK, decoded into buf (cap bytes). */
static svc_err_t b64_member(json_t *jwk, size_t idx, const char *name, uint8_t *buf, size_t cap,
                            size_t *len, char errbuf[static SVC_ERRBUF_LEN])
{
    json_t *v = json_object_get(jwk, name);

    if (!json_is_string(v)) {
        svc_errbuf_set(errbuf, "key %zu: \"%s\" is missing or not a string", idx, name);
        return SVC_EINVAL;
    }
    if (!gw_b64url_decode(json_string_value(v), json_string_length(v), buf, cap, len) ||
        *len == 0) {
        svc_errbuf_set(errbuf, "key %zu: \"%s\" is not base64url of at most %zu bytes", idx, name,
                       cap);
        return SVC_EINVAL;
    }
    return SVC_OK;
}

/* Builds pkey from fromdata params; checks the public key when asked (EC:
 * the point is on the curve, which defeats invalid-curve attacks). OpenSSL
 * 3.0's fromdata already refuses a point off the curve (EC_POINT_oct2point
 * checks it); the explicit check keeps that true whatever the version. */
static svc_err_t from_params(const char *type, OSSL_PARAM *params, bool check, size_t idx,
                             EVP_PKEY **out, char errbuf[static SVC_ERRBUF_LEN])
{
    EVP_PKEY_CTX *ctx = NULL, *chk = NULL;
    EVP_PKEY *pkey = NULL;
    svc_err_t err = SVC_EINVAL;

    ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (ctx == NULL) {
        err = SVC_ENOMEM;
        goto out;
    }
    if (EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        svc_errbuf_set(errbuf, "key %zu: OpenSSL refused the %s public key", idx, type);
        goto out;
    }
    if (check) {
        chk = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
        if (chk == NULL) {
            err = SVC_ENOMEM;
            goto out;
        }
        if (EVP_PKEY_public_check(chk) != 1) {
            svc_errbuf_set(errbuf, "key %zu: the %s public key fails its check (not on the curve?)",
                           idx, type);
            goto out;
        }
    }
    *out = pkey;
    pkey = NULL;
    err = SVC_OK;
out:
    EVP_PKEY_free(pkey);
    EVP_PKEY_CTX_free(chk);
    EVP_PKEY_CTX_free(ctx);
    return err;
}

static svc_err_t ec_key(json_t *jwk, size_t idx, uint32_t *algs, EVP_PKEY **out,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    json_t *crv = json_object_get(jwk, "crv");
    uint8_t x[48], y[48], point[1 + 2 * 48];
    size_t xl, yl, c;
    OSSL_PARAM params[3];
    svc_err_t err;

    if (!json_is_string(crv)) {
        svc_errbuf_set(errbuf, "key %zu: EC key without a \"crv\" string", idx);
        return SVC_EINVAL;
    }
    for (c = 0; c < SVC_COUNTOF(curves); c++) {
        if (strcmp(json_string_value(crv), curves[c].crv) == 0)
            break;
    }
    if (c == SVC_COUNTOF(curves)) {
        svc_errbuf_set(errbuf, "key %zu: curve \"%.32s\" is not accepted (P-256, P-384)", idx,
                       json_string_value(crv));
        return SVC_EINVAL;
    }
    if ((err = b64_member(jwk, idx, "x", x, sizeof(x), &xl, errbuf)) != SVC_OK ||
        (err = b64_member(jwk, idx, "y", y, sizeof(y), &yl, errbuf)) != SVC_OK)
        return err;
    /* RFC 7518 §6.2.1.2: x and y are the full coordinate size, never shortened. */
    if (xl != curves[c].coord || yl != curves[c].coord) {
        svc_errbuf_set(errbuf, "key %zu: x and y of a %s key must be %zu bytes each", idx,
                       curves[c].crv, curves[c].coord);
        return SVC_EINVAL;
    }
    point[0] = 0x04; /* uncompressed point (SEC 1 §2.3.3) */
    memcpy(point + 1, x, xl);
    memcpy(point + 1 + xl, y, yl);
    params[0] =
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)curves[c].group, 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, 1 + xl + yl);
    params[2] = OSSL_PARAM_construct_end();
    *algs = GW_JWS_ALG_BIT(curves[c].alg);
    return from_params("EC", params, true, idx, out, errbuf);
}

static svc_err_t rsa_key(json_t *jwk, size_t idx, uint32_t *algs, EVP_PKEY **out,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    uint8_t n[GW_JWKS_MAX_RSA_BITS / 8], e[16];
    size_t nl, el;
    BIGNUM *bn = NULL, *be = NULL;
    OSSL_PARAM_BLD *bld = NULL;
    OSSL_PARAM *params = NULL;
    svc_err_t err;

    if ((err = b64_member(jwk, idx, "n", n, sizeof(n), &nl, errbuf)) != SVC_OK ||
        (err = b64_member(jwk, idx, "e", e, sizeof(e), &el, errbuf)) != SVC_OK)
        goto out;
    err = SVC_ENOMEM;
    if ((bn = BN_bin2bn(n, (int)nl, NULL)) == NULL || (be = BN_bin2bn(e, (int)el, NULL)) == NULL)
        goto out;
    err = SVC_EINVAL;
    if ((unsigned)BN_num_bits(bn) < GW_JWKS_MIN_RSA_BITS) {
        svc_errbuf_set(errbuf, "key %zu: RSA modulus of %d bits, fewer than %u", idx,
                       BN_num_bits(bn), GW_JWKS_MIN_RSA_BITS);
        goto out;
    }
    if (!BN_is_odd(be) || BN_is_one(be)) {
        svc_errbuf_set(errbuf, "key %zu: RSA exponent e must be odd and greater than 1", idx);
        goto out;
    }
    err = SVC_ENOMEM;
    if ((bld = OSSL_PARAM_BLD_new()) == NULL ||
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) != 1 ||
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) != 1 ||
        (params = OSSL_PARAM_BLD_to_param(bld)) == NULL)
        goto out;
    *algs = GW_JWS_ALG_BIT(GW_JWS_RS256) | GW_JWS_ALG_BIT(GW_JWS_PS256);
    /* No public check: OpenSSL 3.0's RSA public check only looks at e and
     * the modulus' size, which are checked above. */
    err = from_params("RSA", params, false, idx, out, errbuf);
out:
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    return err;
}

/* One JWK into s->keys[s->n] (or skipped: an "enc" key). */
static svc_err_t add_key(gw_jwks_t *s, json_t *jwk, size_t idx, char errbuf[static SVC_ERRBUF_LEN])
{
    json_t *kty = json_object_get(jwk, "kty"), *use = json_object_get(jwk, "use");
    json_t *alg = json_object_get(jwk, "alg"), *kid = json_object_get(jwk, "kid");
    uint32_t algs = 0;
    EVP_PKEY *pkey = NULL;
    const char *k;
    svc_err_t err;

    if (!json_is_object(jwk)) {
        svc_errbuf_set(errbuf, "key %zu: not a JSON object", idx);
        return SVC_EINVAL;
    }
    if (use != NULL) {
        if (json_is_string(use) && strcmp(json_string_value(use), "enc") == 0)
            return SVC_OK;
        if (!json_is_string(use) || strcmp(json_string_value(use), "sig") != 0) {
            svc_errbuf_set(errbuf, "key %zu: \"use\" must be \"sig\" or \"enc\"", idx);
            return SVC_EINVAL;
        }
    }
    if (!json_is_string(kty)) {
        svc_errbuf_set(errbuf, "key %zu: \"kty\" is missing or not a string", idx);
        return SVC_EINVAL;
    }
    if (kid != NULL && (!json_is_string(kid) || json_string_length(kid) == 0 ||
                        json_string_length(kid) > GW_JWKS_KID_MAX ||
                        strlen(json_string_value(kid)) != json_string_length(kid))) {
        svc_errbuf_set(errbuf, "key %zu: \"kid\" must be a string of 1-%u bytes", idx,
                       GW_JWKS_KID_MAX);
        return SVC_EINVAL;
    }
    k = json_string_value(kty);
    if (strcmp(k, "EC") == 0) {
        err = ec_key(jwk, idx, &algs, &pkey, errbuf);
    } else if (strcmp(k, "RSA") == 0) {
        err = rsa_key(jwk, idx, &algs, &pkey, errbuf);
    } else {
        svc_errbuf_set(errbuf, "key %zu: kty \"%.16s\" is not accepted (EC, RSA)", idx, k);
        err = SVC_EINVAL;
    }
    if (err != SVC_OK)
        return err;
    if (alg != NULL) {
        gw_jws_alg_t a;
        if (!json_is_string(alg) ||
            !gw_jws_alg_parse(json_string_value(alg), json_string_length(alg), &a)) {
            svc_errbuf_set(errbuf, "key %zu: \"alg\" is not one of ES256 ES384 RS256 PS256", idx);
            err = SVC_EINVAL;
        } else if ((algs & GW_JWS_ALG_BIT(a)) == 0) {
            svc_errbuf_set(errbuf, "key %zu: \"alg\" %s does not fit a %s key", idx,
                           gw_jws_alg_name(a), k);
            err = SVC_EINVAL;
        } else {
            algs = GW_JWS_ALG_BIT(a);
        }
    }
    if (err == SVC_OK && s->n == GW_JWKS_MAX_KEYS) {
        svc_errbuf_set(errbuf, "key %zu: more than %u signature keys", idx, GW_JWKS_MAX_KEYS);
        err = SVC_EINVAL;
    }
    if (err == SVC_OK && kid != NULL &&
        gw_jwks_find(s, json_string_value(kid), json_string_length(kid)) != NULL) {
        svc_errbuf_set(errbuf, "key %zu: kid \"%s\" appears twice", idx, json_string_value(kid));
        err = SVC_EINVAL;
    }
    if (err != SVC_OK) {
        EVP_PKEY_free(pkey);
        return err;
    }
    if (kid != NULL)
        memcpy(s->kids[s->n], json_string_value(kid), json_string_length(kid) + 1);
    s->keys[s->n].kid = s->kids[s->n];
    s->keys[s->n].algs = algs;
    s->keys[s->n].pkey = pkey;
    s->n++;
    return SVC_OK;
}

static void jwks_free(gw_jwks_t *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        EVP_PKEY_free(s->keys[i].pkey);
    free(s);
}

svc_err_t gw_jwks_parse(const char *json, size_t len, gw_jwks_t **out,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    json_error_t jerr;
    json_t *root = NULL, *keys;
    gw_jwks_t *s = NULL;
    svc_err_t err = SVC_EINVAL;
    size_t i, n_without_kid = 0;

    if (len > GW_JWKS_MAX_FILE_BYTES) {
        svc_errbuf_set(errbuf, "JWKS of %zu bytes, more than %u", len, GW_JWKS_MAX_FILE_BYTES);
        goto out;
    }
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        svc_errbuf_set(errbuf, "JWKS is not JSON: line %d: %s", jerr.line, jerr.text);
        goto out;
    }
    keys = json_object_get(root, "keys");
    if (!json_is_array(keys)) {
        svc_errbuf_set(errbuf, "JWKS has no \"keys\" array");
        goto out;
    }
    /* A set longer than this cannot fit after the "enc" keys are left out
     * either, and the bound keeps a hostile file from costing many parses. */
    if (json_array_size(keys) > 2 * GW_JWKS_MAX_KEYS) {
        svc_errbuf_set(errbuf, "JWKS has %zu keys, more than %u", json_array_size(keys),
                       2 * GW_JWKS_MAX_KEYS);
        goto out;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        err = SVC_ENOMEM;
        goto out;
    }
    atomic_init(&s->refs, 1);
    for (i = 0; i < json_array_size(keys); i++) {
        err = add_key(s, json_array_get(keys, i), i, errbuf);
        if (err != SVC_OK)
            goto out;
    }
    err = SVC_EINVAL;
    if (s->n == 0) {
        svc_errbuf_set(errbuf, "JWKS has no signature key");
        goto out;
    }
    for (i = 0; i < s->n; i++)
        n_without_kid += s->kids[i][0] == '\0';
    /* Without kids the verifier could not tell which key a token names. */
    if (n_without_kid > 0 && s->n > 1) {
        svc_errbuf_set(errbuf, "JWKS has %zu keys and %zu of them without a \"kid\"", s->n,
                       n_without_kid);
        goto out;
    }
    *out = s;
    s = NULL;
    err = SVC_OK;
out:
    jwks_free(s);
    json_decref(root);
    return err;
}

svc_err_t gw_jwks_load_file(const char *path, gw_jwks_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    svc_err_t err = SVC_EINVAL;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        svc_errbuf_set(errbuf, "open %s: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        svc_errbuf_set(errbuf, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_size > (off_t)GW_JWKS_MAX_FILE_BYTES) {
        svc_errbuf_set(errbuf, "%s: %lld bytes, more than %u", path, (long long)st.st_size,
                       GW_JWKS_MAX_FILE_BYTES);
        goto out;
    }
    /* One byte more than the cap: a file that grew after fstat is still caught. */
    buf = malloc(GW_JWKS_MAX_FILE_BYTES + 1);
    if (buf == NULL) {
        err = SVC_ENOMEM;
        goto out;
    }
    for (;;) {
        ssize_t r = read(fd, buf + got, GW_JWKS_MAX_FILE_BYTES + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            svc_errbuf_set(errbuf, "read %s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got > GW_JWKS_MAX_FILE_BYTES) {
            svc_errbuf_set(errbuf, "%s: more than %u bytes", path, GW_JWKS_MAX_FILE_BYTES);
            goto out;
        }
    }
    err = gw_jwks_parse(buf, got, out, errbuf);
out:
    free(buf);
    if (fd >= 0)
        close(fd);
    return err;
}

gw_jwks_t *gw_jwks_retain(gw_jwks_t *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

void gw_jwks_release(gw_jwks_t *s)
{
    if (s != NULL && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        jwks_free(s);
}

size_t gw_jwks_count(const gw_jwks_t *s)
{
    return s->n;
}

const gw_jwk_t *gw_jwks_at(const gw_jwks_t *s, size_t i)
{
    return i < s->n ? &s->keys[i] : NULL;
}

const gw_jwk_t *gw_jwks_find(const gw_jwks_t *s, const char *kid, size_t len)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->kids[i][0] != '\0' && strlen(s->kids[i]) == len && memcmp(s->kids[i], kid, len) == 0)
            return &s->keys[i];
    }
    return NULL;
}
