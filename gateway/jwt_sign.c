/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt_sign.c - compact JWS signing and JWK export (see jwt_sign.h), with
 * OpenSSL EVP doing every cryptographic step. ECDSA signatures come out of
 * OpenSSL as DER and are written as JWS wants them: r and s, each padded to
 * the coordinate size (RFC 7518 §3.4).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>

#include "b64url.h"
#include "jwt_sign.h"

/* The key's kind: "EC" with its curve's algorithm and coordinate size, or "RSA". */
static svc_err_t key_kind(const EVP_PKEY *key, const char **kty, const char **crv, size_t *coord,
                          gw_jws_alg_t *ec_alg, char errbuf[static SVC_ERRBUF_LEN])
{
    char group[64];

    *crv = NULL;
    *coord = 0;
    if (EVP_PKEY_is_a(key, "RSA")) {
        *kty = "RSA";
        return SVC_OK;
    }
    if (EVP_PKEY_is_a(key, "EC") &&
        EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                       NULL) == 1) {
        *kty = "EC";
        if (strcmp(group, "prime256v1") == 0) {
            *crv = "P-256";
            *coord = 32;
            *ec_alg = GW_JWS_ES256;
            return SVC_OK;
        }
        if (strcmp(group, "secp384r1") == 0) {
            *crv = "P-384";
            *coord = 48;
            *ec_alg = GW_JWS_ES384;
            return SVC_OK;
        }
    }
    svc_errbuf_set(errbuf, "not an RSA, P-256 or P-384 key");
    return SVC_EINVAL;
}

/* base64url of a big number parameter (padded to pad bytes; 0: its own size). */
static svc_err_t b64_bn(const EVP_PKEY *key, const char *param, size_t pad, char *out, size_t cap)
{
    BIGNUM *bn = NULL;
    uint8_t bin[1024];
    int n;
    svc_err_t err = SVC_ENOMEM;

    if (EVP_PKEY_get_bn_param(key, param, &bn) != 1)
        goto out;
    n = pad != 0 ? BN_bn2binpad(bn, bin, (int)pad) : BN_bn2bin(bn, bin);
    if (n <= 0 || (size_t)BN_num_bytes(bn) > sizeof(bin))
        goto out;
    if (gw_b64url_encode(bin, (size_t)n, out, cap) == 0)
        goto out;
    err = SVC_OK;
out:
    BN_free(bn);
    return err;
}

/* The JWK members that RFC 7638 hashes, as a JSON object (caller decrefs). */
static svc_err_t required_members(const EVP_PKEY *key, json_t **out, gw_jws_alg_t *ec_alg,
                                  char errbuf[static SVC_ERRBUF_LEN])
{
    char a[1400], b[1400];
    const char *kty, *crv;
    size_t coord;
    svc_err_t err;

    if ((err = key_kind(key, &kty, &crv, &coord, ec_alg, errbuf)) != SVC_OK)
        return err;
    if (strcmp(kty, "RSA") == 0) {
        if (b64_bn(key, OSSL_PKEY_PARAM_RSA_N, 0, a, sizeof(a)) != SVC_OK ||
            b64_bn(key, OSSL_PKEY_PARAM_RSA_E, 0, b, sizeof(b)) != SVC_OK)
            return SVC_ENOMEM;
        *out = json_pack("{s:s, s:s, s:s}", "kty", "RSA", "n", a, "e", b);
    } else {
        if (b64_bn(key, OSSL_PKEY_PARAM_EC_PUB_X, coord, a, sizeof(a)) != SVC_OK ||
            b64_bn(key, OSSL_PKEY_PARAM_EC_PUB_Y, coord, b, sizeof(b)) != SVC_OK)
            return SVC_ENOMEM;
        *out = json_pack("{s:s, s:s, s:s, s:s}", "kty", "EC", "crv", crv, "x", a, "y", b);
    }
    return *out != NULL ? SVC_OK : SVC_ENOMEM;
}

svc_err_t gw_jwk_thumbprint(const EVP_PKEY *key, char out[GW_JWK_THUMBPRINT_LEN],
                            char errbuf[static SVC_ERRBUF_LEN])
{
    json_t *jwk = NULL;
    char *text = NULL;
    uint8_t digest[32];
    unsigned dlen = 0;
    gw_jws_alg_t ec_alg;
    svc_err_t err;

    if ((err = required_members(key, &jwk, &ec_alg, errbuf)) != SVC_OK)
        goto out;
    err = SVC_ENOMEM;
    /* RFC 7638 §3.3: the required members only, sorted, no white space. */
    text = json_dumps(jwk, JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL || EVP_Digest(text, strlen(text), digest, &dlen, EVP_sha256(), NULL) != 1 ||
        gw_b64url_encode(digest, dlen, out, GW_JWK_THUMBPRINT_LEN) == 0)
        goto out;
    err = SVC_OK;
out:
    free(text);
    json_decref(jwk);
    return err;
}

svc_err_t gw_jwk_public_json(const EVP_PKEY *key, const char *kid, gw_jws_alg_t alg, char **out,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    json_t *jwk = NULL;
    gw_jws_alg_t ec_alg = GW_JWS__ALG_LAST;
    svc_err_t err;

    if ((err = required_members(key, &jwk, &ec_alg, errbuf)) != SVC_OK)
        goto out;
    err = SVC_ENOMEM;
    if ((kid != NULL && json_object_set_new(jwk, "kid", json_string(kid)) != 0) ||
        json_object_set_new(jwk, "alg", json_string(gw_jws_alg_name(alg))) != 0 ||
        json_object_set_new(jwk, "use", json_string("sig")) != 0)
        goto out;
    *out = json_dumps(jwk, JSON_COMPACT | JSON_SORT_KEYS);
    err = *out != NULL ? SVC_OK : SVC_ENOMEM;
out:
    json_decref(jwk);
    return err;
}

/* The DER ECDSA signature in der (der_len bytes) as r||s into raw. */
static svc_err_t ecdsa_raw(const uint8_t *der, size_t der_len, size_t coord, uint8_t *raw)
{
    const unsigned char *p = der;
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    const BIGNUM *r, *s;
    svc_err_t err = SVC_EINTERNAL;

    if (es == NULL)
        return err;
    ECDSA_SIG_get0(es, &r, &s);
    if (BN_bn2binpad(r, raw, (int)coord) == (int)coord &&
        BN_bn2binpad(s, raw + coord, (int)coord) == (int)coord)
        err = SVC_OK;
    ECDSA_SIG_free(es);
    return err;
}

svc_err_t gw_jwt_sign_raw(EVP_PKEY *key, gw_jws_alg_t alg, const char *header_json,
                          const char *payload_json, char **out, char errbuf[static SVC_ERRBUF_LEN])
{
    size_t hl = strlen(header_json), pl = strlen(payload_json), coord, sig_len = 0, input_len;
    size_t cap =
        GW_B64URL_ENCODED_LEN(hl) + GW_B64URL_ENCODED_LEN(pl) + GW_B64URL_ENCODED_LEN(1024) + 4;
    const char *kty, *crv;
    gw_jws_alg_t ec_alg = GW_JWS__ALG_LAST;
    const EVP_MD *md = alg == GW_JWS_ES384 ? EVP_sha384() : EVP_sha256();
    EVP_MD_CTX *ctx = NULL;
    EVP_PKEY_CTX *pctx = NULL;
    uint8_t sig[1024], raw[96];
    char *tok = NULL;
    svc_err_t err;

    if ((err = key_kind(key, &kty, &crv, &coord, &ec_alg, errbuf)) != SVC_OK)
        goto out;
    err = SVC_EINVAL;
    if (coord != 0 ? alg != ec_alg : (alg != GW_JWS_RS256 && alg != GW_JWS_PS256)) {
        svc_errbuf_set(errbuf, "%s does not fit a %s key",
                       gw_jws_alg_name(alg) ? gw_jws_alg_name(alg) : "?", kty);
        goto out;
    }
    err = SVC_ENOMEM;
    if ((tok = malloc(cap)) == NULL || (ctx = EVP_MD_CTX_new()) == NULL)
        goto out;
    input_len = gw_b64url_encode((const uint8_t *)header_json, hl, tok, cap);
    tok[input_len++] = '.';
    input_len +=
        gw_b64url_encode((const uint8_t *)payload_json, pl, tok + input_len, cap - input_len);
    err = SVC_EINTERNAL;
    if (EVP_DigestSignInit(ctx, &pctx, md, NULL, key) != 1)
        goto out;
    if (alg == GW_JWS_PS256 &&
        (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
         EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1))
        goto out;
    sig_len = sizeof(sig);
    if (EVP_DigestSign(ctx, NULL, &sig_len, (const uint8_t *)tok, input_len) != 1 ||
        sig_len > sizeof(sig) ||
        EVP_DigestSign(ctx, sig, &sig_len, (const uint8_t *)tok, input_len) != 1) {
        svc_errbuf_set(errbuf, "OpenSSL could not sign");
        goto out;
    }
    tok[input_len++] = '.';
    if (coord != 0) {
        if ((err = ecdsa_raw(sig, sig_len, coord, raw)) != SVC_OK)
            goto out;
        gw_b64url_encode(raw, 2 * coord, tok + input_len, cap - input_len);
    } else {
        gw_b64url_encode(sig, sig_len, tok + input_len, cap - input_len);
    }
    *out = tok;
    tok = NULL;
    err = SVC_OK;
out:
    EVP_MD_CTX_free(ctx);
    free(tok);
    return err;
}

svc_err_t gw_jwt_sign(EVP_PKEY *key, gw_jws_alg_t alg, const char *kid, const gw_jwt_claims_t *c,
                      char **out, char errbuf[static SVC_ERRBUF_LEN])
{
    json_t *hdr = NULL, *pl = NULL;
    char *hs = NULL, *ps = NULL;
    svc_err_t err = SVC_ENOMEM;

    if (gw_jws_alg_name(alg) == NULL || c->iss == NULL || c->aud == NULL || c->sub == NULL) {
        svc_errbuf_set(errbuf, "alg, iss, aud and sub are required");
        return SVC_EINVAL;
    }
    hdr = json_pack("{s:s, s:s}", "alg", gw_jws_alg_name(alg), "typ", "JWT");
    pl = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", c->iss, "aud", c->aud, "sub", c->sub, "iat",
                   (json_int_t)c->iat, "exp", (json_int_t)(c->iat + c->ttl_s));
    if (hdr == NULL || pl == NULL)
        goto out;
    if ((kid != NULL && json_object_set_new(hdr, "kid", json_string(kid)) != 0) ||
        (c->scope != NULL && json_object_set_new(pl, "scope", json_string(c->scope)) != 0) ||
        (c->has_nbf &&
         json_object_set_new(pl, "nbf", json_integer((json_int_t)(c->iat + c->nbf_offset_s))) != 0))
        goto out;
    hs = json_dumps(hdr, JSON_COMPACT);
    ps = json_dumps(pl, JSON_COMPACT);
    if (hs == NULL || ps == NULL)
        goto out;
    err = gw_jwt_sign_raw(key, alg, hs, ps, out, errbuf);
out:
    free(hs);
    free(ps);
    json_decref(hdr);
    json_decref(pl);
    return err;
}
