/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_jwt.c - gateway/jwt.c, the verifier: valid ES256, ES384, RS256 and PS256 tokens; another
 * key's signature; kid selection and rotation; exp, nbf and iat at the leeway's edges exactly;
 * iss and aud (string and array); the algorithm-confusion attacks (none, HS256 keyed with the RSA
 * public key, ES256 named on an RSA key and the reverse); malformed tokens (parts, base64url,
 * padding, JSON, length); sub rules; claim types; scope and scp; typ and crit; and the RFC 6750
 * mapping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "b64url.h"
#include "jwt.h"
#include "jwt_keys.h"
#include "support/group.h"

/* Two EC keys (kids "e1", "e2"), an RSA key ("r1"), and keys that are in no set. */
static struct {
    EVP_PKEY *e1, *e2, *r1, *stranger_ec, *stranger_rsa;
    gw_jwks_t *set;    /* e1, e2, r1 */
    gw_jwks_t *single; /* e1 alone */
    gw_jwt_opts_t o;
} fx;

static int setup(void **state)
{
    char *json, *one;

    (void)state;
    fx.e1 = tk_ec("P-256");
    fx.e2 = tk_ec("P-256");
    fx.r1 = tk_rsa(2048);
    fx.stranger_ec = tk_ec("P-256");
    fx.stranger_rsa = tk_rsa(2048);
    json = tk_jwks(tk_jwk(fx.e1, "e1", GW_JWS_ES256), tk_jwk(fx.e2, "e2", GW_JWS_ES256),
                   tk_jwk(fx.r1, "r1", GW_JWS_RS256), NULL);
    fx.set = tk_set(json);
    one = tk_jwks(tk_jwk(fx.e1, "e1", GW_JWS_ES256), NULL);
    fx.single = tk_set(one);
    free(json);
    free(one);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gw_jwks_release(fx.set);
    gw_jwks_release(fx.single);
    EVP_PKEY_free(fx.e1);
    EVP_PKEY_free(fx.e2);
    EVP_PKEY_free(fx.r1);
    EVP_PKEY_free(fx.stranger_ec);
    EVP_PKEY_free(fx.stranger_rsa);
    return 0;
}

static int each(void **state)
{
    (void)state;
    tk_opts(&fx.o);
    return 0;
}

/* Verifies tok against set with fx.o and frees it. */
static gw_jwt_err_t check_in(gw_jwks_t *set, char *tok, gw_principal_t *p)
{
    gw_principal_t local;
    gw_jwt_err_t err = gw_jwt_verify(set, &fx.o, tok, strlen(tok), p != NULL ? p : &local);

    free(tok);
    return err;
}

static gw_jwt_err_t check(char *tok)
{
    return check_in(fx.set, tok, NULL);
}

/* A token of e1 with extra claims. */
static char *e1(const char *extra)
{
    return tk_claims(fx.e1, GW_JWS_ES256, "e1", extra);
}

static void valid_es256(void **state)
{
    gw_principal_t p;

    (void)state;
    assert_int_equal(check_in(fx.set, e1("{\"scope\":\"orders:write orders:read\"}"), &p),
                     GW_JWT_OK);
    assert_string_equal(p.sub, "c1");
    assert_int_equal(p.scopes, PR_SCOPE_ORDERS_WRITE | PR_SCOPE_ORDERS_READ);
    assert_int_equal(p.exp, TK_NOW + 600);
}

static void valid_rs256_ps256_es384(void **state)
{
    EVP_PKEY *e384 = tk_ec("P-384"), *r = tk_rsa(3072);
    char *json =
        tk_jwks(tk_jwk(e384, "p384", GW_JWS_ES384), tk_jwk(r, "r3072", GW_JWS_PS256), NULL);
    gw_jwks_t *set = tk_set(json);

    (void)state;
    assert_int_equal(check(tk_claims(fx.r1, GW_JWS_RS256, "r1", NULL)), GW_JWT_OK);
    assert_int_equal(check_in(set, tk_claims(e384, GW_JWS_ES384, "p384", NULL), NULL), GW_JWT_OK);
    assert_int_equal(check_in(set, tk_claims(r, GW_JWS_PS256, "r3072", NULL), NULL), GW_JWT_OK);
    /* The JWK pinned PS256: RS256 with the same key is refused. */
    assert_int_equal(check_in(set, tk_claims(r, GW_JWS_RS256, "r3072", NULL), NULL),
                     GW_JWT_BAD_ALG);
    gw_jwks_release(set);
    free(json);
    EVP_PKEY_free(e384);
    EVP_PKEY_free(r);
}

static void signed_by_another_key(void **state)
{
    (void)state;
    /* The kid of a key in the set, the signature of a key that is not. */
    assert_int_equal(check(tk_claims(fx.stranger_ec, GW_JWS_ES256, "e1", NULL)),
                     GW_JWT_BAD_SIGNATURE);
    assert_int_equal(check(tk_claims(fx.stranger_rsa, GW_JWS_RS256, "r1", NULL)),
                     GW_JWT_BAD_SIGNATURE);
    /* e2's signature under e1's kid. */
    assert_int_equal(check(tk_claims(fx.e2, GW_JWS_ES256, "e1", NULL)), GW_JWT_BAD_SIGNATURE);
}

static void tampered_payload(void **state)
{
    char *tok = e1(NULL), *forged = e1("{\"sub\":\"admin\"}");
    char *dot1 = strchr(tok, '.'), *dot2 = strchr(dot1 + 1, '.');
    char *f1 = strchr(forged, '.'), *f2 = strchr(f1 + 1, '.');
    char buf[2048];

    (void)state;
    /* forged's payload with tok's header and signature. */
    snprintf(buf, sizeof(buf), "%.*s%.*s%s", (int)(dot1 - tok), tok, (int)(f2 - f1), f1, dot2);
    assert_int_equal(check(strdup(buf)), GW_JWT_BAD_SIGNATURE);
    free(tok);
    free(forged);
}

static void unknown_kid(void **state)
{
    (void)state;
    assert_int_equal(check(tk_claims(fx.e1, GW_JWS_ES256, "nope", NULL)), GW_JWT_UNKNOWN_KID);
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256, "{\"alg\":\"ES256\",\"kid\":7}", "{}")),
                     GW_JWT_BAD_HEADER);
}

static void rotation_and_missing_kid(void **state)
{
    (void)state;
    /* Both keys of a rotation verify their own tokens. */
    assert_int_equal(check(tk_claims(fx.e1, GW_JWS_ES256, "e1", NULL)), GW_JWT_OK);
    assert_int_equal(check(tk_claims(fx.e2, GW_JWS_ES256, "e2", NULL)), GW_JWT_OK);
    /* No kid: refused with several keys, accepted with exactly one. */
    assert_int_equal(check(tk_claims(fx.e1, GW_JWS_ES256, NULL, NULL)), GW_JWT_UNKNOWN_KID);
    assert_int_equal(check_in(fx.single, tk_claims(fx.e1, GW_JWS_ES256, NULL, NULL), NULL),
                     GW_JWT_OK);
}

static void exp_edges(void **state)
{
    char c[64];

    (void)state;
    /* exp is exclusive: valid while now < exp + leeway. */
    snprintf(c, sizeof(c), "{\"exp\":%lld}", TK_NOW - 30);
    assert_int_equal(check(e1(c)), GW_JWT_EXPIRED);
    snprintf(c, sizeof(c), "{\"exp\":%lld}", TK_NOW - 29);
    assert_int_equal(check(e1(c)), GW_JWT_OK);
    fx.o.leeway_s = 0;
    snprintf(c, sizeof(c), "{\"exp\":%lld}", TK_NOW);
    assert_int_equal(check(e1(c)), GW_JWT_EXPIRED);
    snprintf(c, sizeof(c), "{\"exp\":%lld}", TK_NOW + 1);
    assert_int_equal(check(e1(c)), GW_JWT_OK);
    /* A fraction counts. */
    snprintf(c, sizeof(c), "{\"exp\":%lld.5}", TK_NOW);
    assert_int_equal(check(e1(c)), GW_JWT_OK);
    /* The clock moved past it. */
    tk_clock_set(TK_NOW + 600);
    assert_int_equal(check(e1(NULL)), GW_JWT_EXPIRED);
}

static void nbf_and_iat_edges(void **state)
{
    char c[64];

    (void)state;
    /* nbf is inclusive: valid once now + leeway >= nbf. */
    snprintf(c, sizeof(c), "{\"nbf\":%lld}", TK_NOW + 30);
    assert_int_equal(check(e1(c)), GW_JWT_OK);
    snprintf(c, sizeof(c), "{\"nbf\":%lld}", TK_NOW + 31);
    assert_int_equal(check(e1(c)), GW_JWT_NOT_YET_VALID);
    snprintf(c, sizeof(c), "{\"iat\":%lld}", TK_NOW + 30);
    assert_int_equal(check(e1(c)), GW_JWT_OK);
    snprintf(c, sizeof(c), "{\"iat\":%lld}", TK_NOW + 31);
    assert_int_equal(check(e1(c)), GW_JWT_NOT_YET_VALID);
    tk_clock_set(TK_NOW + 1);
    snprintf(c, sizeof(c), "{\"nbf\":%lld}", TK_NOW + 31);
    assert_int_equal(check(e1(c)), GW_JWT_OK);
    assert_int_equal(check(e1("{\"nbf\":\"soon\"}")), GW_JWT_BAD_CLAIMS);
    assert_int_equal(check(e1("{\"iat\":true}")), GW_JWT_BAD_CLAIMS);
}

static void issuer_and_audience(void **state)
{
    (void)state;
    assert_int_equal(check(e1("{\"iss\":\"https://evil.test\"}")), GW_JWT_BAD_ISSUER);
    assert_int_equal(check(e1("{\"iss\":null}")), GW_JWT_BAD_ISSUER);
    assert_int_equal(check(e1("{\"iss\":\"https://idp.test/\"}")), GW_JWT_BAD_ISSUER);
    assert_int_equal(check(e1("{\"aud\":\"another-api\"}")), GW_JWT_BAD_AUDIENCE);
    assert_int_equal(check(e1("{\"aud\":null}")), GW_JWT_BAD_AUDIENCE);
    assert_int_equal(check(e1("{\"aud\":[\"other\",\"shopmicro-gateway\"]}")), GW_JWT_OK);
    assert_int_equal(check(e1("{\"aud\":[\"other\",\"more\"]}")), GW_JWT_BAD_AUDIENCE);
    assert_int_equal(check(e1("{\"aud\":[]}")), GW_JWT_BAD_AUDIENCE);
    assert_int_equal(check(e1("{\"aud\":[\"shopmicro-gateway\",5]}")), GW_JWT_BAD_CLAIMS);
}

static void alg_none(void **state)
{
    const char *hdr = "{\"alg\":\"none\",\"typ\":\"JWT\"}";
    const char *pl = "{\"iss\":\"https://idp.test\",\"aud\":\"shopmicro-gateway\",\"sub\":\"c1\","
                     "\"exp\":1800000600}";
    char h[256], p[512], tok[1024];

    (void)state;
    gw_b64url_encode((const uint8_t *)hdr, strlen(hdr), h, sizeof(h));
    gw_b64url_encode((const uint8_t *)pl, strlen(pl), p, sizeof(p));
    /* The unsecured JWS of RFC 7519 §6.1 has an empty third part. */
    snprintf(tok, sizeof(tok), "%s.%s.", h, p);
    assert_int_equal(check_in(fx.single, strdup(tok), NULL), GW_JWT_MALFORMED);
    snprintf(tok, sizeof(tok), "%s.%s.AAAA", h, p);
    assert_int_equal(check_in(fx.single, strdup(tok), NULL), GW_JWT_BAD_ALG);
}

/* The classic confusion: a verifier that takes the header's alg would use
 * the RSA key's public PEM (which anyone can fetch) as the HMAC secret. */
static void hs256_with_the_public_key_as_secret(void **state)
{
    char *pem = NULL, h[256], p[512], s[64], tok[1024];
    const char *hdr = "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"r1\"}";
    const char *pl =
        "{\"iss\":\"https://idp.test\",\"aud\":\"shopmicro-gateway\",\"sub\":\"admin\","
        "\"exp\":1800000600,\"scope\":\"orders:admin\"}";
    uint8_t mac[32];
    unsigned mac_len = 0;
    BIO *bio = BIO_new(BIO_s_mem());
    long pem_len;
    int n;

    (void)state;
    assert_int_equal(PEM_write_bio_PUBKEY(bio, fx.r1), 1);
    pem_len = BIO_get_mem_data(bio, &pem);
    gw_b64url_encode((const uint8_t *)hdr, strlen(hdr), h, sizeof(h));
    gw_b64url_encode((const uint8_t *)pl, strlen(pl), p, sizeof(p));
    n = snprintf(tok, sizeof(tok), "%s.%s", h, p);
    assert_non_null(
        HMAC(EVP_sha256(), pem, (int)pem_len, (const uint8_t *)tok, (size_t)n, mac, &mac_len));
    gw_b64url_encode(mac, mac_len, s, sizeof(s));
    snprintf(tok + n, sizeof(tok) - (size_t)n, ".%s", s);
    assert_int_equal(check(strdup(tok)), GW_JWT_BAD_ALG);
    BIO_free(bio);
}

static void alg_of_the_other_key_type(void **state)
{
    (void)state;
    /* ES256 named on the RSA key's kid (signed by an EC key to get a
     * well-formed 64-byte signature) and RS256 on the EC key's. */
    assert_int_equal(
        check(tk_token(fx.e1, GW_JWS_ES256, "{\"alg\":\"ES256\",\"kid\":\"r1\"}", "{}")),
        GW_JWT_BAD_ALG);
    assert_int_equal(
        check(tk_token(fx.r1, GW_JWS_RS256, "{\"alg\":\"RS256\",\"kid\":\"e1\"}", "{}")),
        GW_JWT_BAD_ALG);
    assert_int_equal(
        check(tk_token(fx.r1, GW_JWS_PS256, "{\"alg\":\"PS256\",\"kid\":\"r1\"}", "{}")),
        GW_JWT_BAD_ALG); /* r1's JWK pinned RS256 */
    assert_int_equal(
        check(tk_token(fx.e1, GW_JWS_ES256, "{\"alg\":\"ES384\",\"kid\":\"e1\"}", "{}")),
        GW_JWT_BAD_ALG);
}

static void malformed(void **state)
{
    char *tok = e1(NULL), buf[GW_JWT_MAX_TOKEN + 16];
    char *dot1 = strchr(tok, '.'), *dot2 = strchr(dot1 + 1, '.');
    size_t len = strlen(tok);

    (void)state;
    /* Two parts; four parts; empty parts. */
    snprintf(buf, sizeof(buf), "%.*s", (int)(dot2 - tok), tok);
    assert_int_equal(check(strdup(buf)), GW_JWT_MALFORMED);
    snprintf(buf, sizeof(buf), "%s.AAAA", tok);
    assert_int_equal(check(strdup(buf)), GW_JWT_MALFORMED);
    snprintf(buf, sizeof(buf), "%s%s", dot1, "");
    assert_int_equal(check(strdup(buf)), GW_JWT_MALFORMED);
    assert_int_equal(check(strdup("..")), GW_JWT_MALFORMED);
    assert_int_equal(check(strdup("abc")), GW_JWT_MALFORMED);
    /* Padding, and characters of the other base64 alphabet. */
    snprintf(buf, sizeof(buf), "%s=", tok);
    assert_int_equal(check(strdup(buf)), GW_JWT_MALFORMED);
    snprintf(buf, sizeof(buf), "%s", tok);
    buf[1] = '+';
    assert_int_equal(check(strdup(buf)), GW_JWT_MALFORMED);
    snprintf(buf, sizeof(buf), "%s", tok);
    buf[len - 2] = '/';
    assert_int_equal(check(strdup(buf)), GW_JWT_MALFORMED);
    snprintf(buf, sizeof(buf), "%.*s %s", (int)(dot1 - tok), tok, dot1);
    assert_int_equal(check(strdup(buf)), GW_JWT_MALFORMED);
    /* A header that is not JSON, or not an object, or has no alg. */
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256, "not json", "{}")), GW_JWT_BAD_HEADER);
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256, "[\"ES256\"]", "{}")), GW_JWT_BAD_HEADER);
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256, "{\"kid\":\"e1\"}", "{}")),
                     GW_JWT_BAD_HEADER);
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256,
                                    "{\"alg\":\"ES256\",\"alg\":\"none\",\"kid\":\"e1\"}", "{}")),
                     GW_JWT_BAD_HEADER); /* duplicate member */
    /* A payload that is not JSON (under a good signature). */
    assert_int_equal(
        check(tk_token(fx.e1, GW_JWS_ES256, "{\"alg\":\"ES256\",\"kid\":\"e1\"}", "not json")),
        GW_JWT_MALFORMED);
    /* Huge, and empty. */
    memset(buf, 'A', GW_JWT_MAX_TOKEN + 1);
    buf[GW_JWT_MAX_TOKEN + 1] = '\0';
    assert_int_equal(check(strdup(buf)), GW_JWT_TOO_LONG);
    assert_int_equal(check(strdup("")), GW_JWT_MISSING);
    free(tok);
}

static void ecdsa_signature_length(void **state)
{
    char *tok = e1(NULL), buf[1024];
    char *sig = strrchr(tok, '.') + 1;

    (void)state;
    /* 63 bytes instead of 64 (86 characters -> 84). */
    snprintf(buf, sizeof(buf), "%.*s", (int)(sig - tok) + 84, tok);
    assert_int_equal(check(strdup(buf)), GW_JWT_BAD_SIGNATURE);
    free(tok);
}

static void sub_rules(void **state)
{
    char c[256], sub[GW_JWT_SUB_MAX + 2];
    gw_principal_t p;

    (void)state;
    assert_int_equal(check(e1("{\"sub\":null}")), GW_JWT_BAD_SUB);
    assert_int_equal(check(e1("{\"sub\":\"\"}")), GW_JWT_BAD_SUB);
    assert_int_equal(check(e1("{\"sub\":42}")), GW_JWT_BAD_SUB);
    assert_int_equal(check(e1("{\"sub\":\"c 1\"}")), GW_JWT_BAD_SUB);
    assert_int_equal(check(e1("{\"sub\":\"c\\n1\"}")), GW_JWT_BAD_SUB);
    /* jansson refuses \u0000 unless asked (JSON_ALLOW_NUL): the payload is not JSON to it. */
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256, "{\"alg\":\"ES256\",\"kid\":\"e1\"}",
                                    "{\"iss\":\"https://idp.test\",\"aud\":\"shopmicro-gateway\","
                                    "\"exp\":1800000600,\"sub\":\"c\\u00001\"}")),
                     GW_JWT_MALFORMED);
    assert_int_equal(check(e1("{\"sub\":\"caf\\u00e9\"}")), GW_JWT_BAD_SUB);
    assert_int_equal(check(e1("{\"sub\":\"a,b\"}")), GW_JWT_BAD_SUB);
    assert_int_equal(check_in(fx.set, e1("{\"sub\":\"auth0|5f7c.x_y-z~1:2@idp+1\"}"), &p),
                     GW_JWT_OK);
    assert_string_equal(p.sub, "auth0|5f7c.x_y-z~1:2@idp+1");
    memset(sub, 'x', sizeof(sub));
    sub[GW_JWT_SUB_MAX] = '\0';
    snprintf(c, sizeof(c), "{\"sub\":\"%s\"}", sub);
    assert_int_equal(check(e1(c)), GW_JWT_OK);
    sub[GW_JWT_SUB_MAX] = 'x';
    sub[GW_JWT_SUB_MAX + 1] = '\0';
    snprintf(c, sizeof(c), "{\"sub\":\"%s\"}", sub);
    assert_int_equal(check(e1(c)), GW_JWT_BAD_SUB);
}

static void exp_rules(void **state)
{
    (void)state;
    assert_int_equal(check(e1("{\"exp\":null}")), GW_JWT_BAD_CLAIMS);
    assert_int_equal(check(e1("{\"exp\":\"1800000600\"}")), GW_JWT_BAD_CLAIMS);
    assert_int_equal(check(e1("{\"exp\":[1800000600]}")), GW_JWT_BAD_CLAIMS);
    assert_int_equal(check(e1("{\"exp\":1e300}")), GW_JWT_OK);
    /* A payload that is an array. */
    assert_int_equal(
        check(tk_token(fx.e1, GW_JWS_ES256, "{\"alg\":\"ES256\",\"kid\":\"e1\"}", "[1]")),
        GW_JWT_MALFORMED);
}

static uint32_t scopes_of(const char *extra)
{
    gw_principal_t p;

    assert_int_equal(check_in(fx.set, e1(extra), &p), GW_JWT_OK);
    return p.scopes;
}

static void scope_and_scp(void **state)
{
    char names[128];

    (void)state;
    assert_int_equal(scopes_of(NULL), 0);
    assert_int_equal(scopes_of("{\"scope\":\"\"}"), 0);
    assert_int_equal(scopes_of("{\"scope\":\"orders:read\"}"), PR_SCOPE_ORDERS_READ);
    assert_int_equal(scopes_of("{\"scope\":\"openid  catalog:write orders:admin profile\"}"),
                     PR_SCOPE_CATALOG_WRITE | PR_SCOPE_ORDERS_ADMIN);
    /* Near misses are not scopes. */
    assert_int_equal(scopes_of("{\"scope\":\"orders:reads Orders:read orders:rea\"}"), 0);
    assert_int_equal(scopes_of("{\"scp\":[\"orders:write\",\"x\"]}"), PR_SCOPE_ORDERS_WRITE);
    assert_int_equal(scopes_of("{\"scp\":\"orders:write orders:read\"}"),
                     PR_SCOPE_ORDERS_WRITE | PR_SCOPE_ORDERS_READ);
    /* scope wins over scp. */
    assert_int_equal(scopes_of("{\"scope\":\"orders:read\",\"scp\":[\"orders:admin\"]}"),
                     PR_SCOPE_ORDERS_READ);
    assert_int_equal(check(e1("{\"scope\":[\"orders:read\"]}")), GW_JWT_BAD_CLAIMS);
    assert_int_equal(check(e1("{\"scp\":[1]}")), GW_JWT_BAD_CLAIMS);
    assert_int_equal(check(e1("{\"scp\":{}}")), GW_JWT_BAD_CLAIMS);
    pr_scopes_format(PR_SCOPE_ORDERS_READ | PR_SCOPE_CATALOG_WRITE, names, sizeof(names));
    assert_string_equal(names, "catalog:write orders:read");
}

static void typ_and_crit(void **state)
{
    const char *pl = "{\"iss\":\"https://idp.test\",\"aud\":\"shopmicro-gateway\",\"sub\":\"c1\","
                     "\"exp\":1800000600}";

    (void)state;
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256,
                                    "{\"alg\":\"ES256\",\"kid\":\"e1\",\"typ\":\"at+jwt\"}", pl)),
                     GW_JWT_OK);
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256, "{\"alg\":\"ES256\",\"kid\":\"e1\"}", pl)),
                     GW_JWT_OK);
    assert_int_equal(
        check(tk_token(fx.e1, GW_JWS_ES256,
                       "{\"alg\":\"ES256\",\"kid\":\"e1\",\"typ\":\"JOSE+JSON\"}", pl)),
        GW_JWT_BAD_HEADER);
    assert_int_equal(check(tk_token(fx.e1, GW_JWS_ES256,
                                    "{\"alg\":\"ES256\",\"kid\":\"e1\",\"crit\":[\"exp\"]}", pl)),
                     GW_JWT_BAD_HEADER);
}

static void rfc6750_mapping(void **state)
{
    (void)state;
    assert_null(gw_jwt_rfc6750_error(GW_JWT_OK));
    assert_null(gw_jwt_rfc6750_error(GW_JWT_MISSING));
    assert_null(gw_jwt_rfc6750_error(GW_JWT_INTERNAL));
    for (int e = GW_JWT_TOO_LONG; e < GW_JWT_INTERNAL; e++)
        assert_string_equal(gw_jwt_rfc6750_error((gw_jwt_err_t)e), "invalid_token");
    assert_string_equal(gw_jwt_reason(GW_JWT_EXPIRED), "expired");
}

static void options(void **state)
{
    gw_jwt_opts_t o;
    char errbuf[SVC_ERRBUF_LEN];

    (void)state;
    gw_jwt_opts_init(&o);
    assert_int_equal(o.leeway_s, GW_JWT_DEFAULT_LEEWAY_S);
    assert_int_equal(gw_jwt_opts_check(&o, errbuf), SVC_EINVAL);
    o.issuer = "i";
    o.audience = "a";
    assert_int_equal(gw_jwt_opts_check(&o, errbuf), SVC_OK);
    o.leeway_s = GW_JWT_MAX_LEEWAY_S + 1;
    assert_int_equal(gw_jwt_opts_check(&o, errbuf), SVC_EINVAL);
}

#define T(f) cmocka_unit_test_setup(f, each)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(valid_es256),
        T(valid_rs256_ps256_es384),
        T(signed_by_another_key),
        T(tampered_payload),
        T(unknown_kid),
        T(rotation_and_missing_kid),
        T(exp_edges),
        T(nbf_and_iat_edges),
        T(issuer_and_audience),
        T(alg_none),
        T(hs256_with_the_public_key_as_secret),
        T(alg_of_the_other_key_type),
        T(malformed),
        T(ecdsa_signature_length),
        T(sub_rules),
        T(exp_rules),
        T(scope_and_scp),
        T(typ_and_crit),
        T(rfc6750_mapping),
        T(options),
    };
    return svc_test_run_group_tests_name("gw_jwt", tests, setup, teardown);
}
