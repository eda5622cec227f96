/* SPDX-License-Identifier: Apache-2.0 */
/* jwt_keys.c - the JWT tests' keys, sets, tokens and clock (see jwt_keys.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>

#include "jwt_keys.h"
#include "support/fake_clock.h"

static fake_clock_t wall;
static bool wall_ready;

EVP_PKEY *tk_ec(const char *curve)
{
    EVP_PKEY *k = EVP_EC_gen(strcmp(curve, "P-384") == 0 ? "secp384r1" : "prime256v1");

    assert_non_null(k);
    return k;
}

EVP_PKEY *tk_rsa(unsigned bits)
{
    EVP_PKEY *k = EVP_RSA_gen(bits);

    assert_non_null(k);
    return k;
}

char *tk_jwk(EVP_PKEY *key, const char *kid, gw_jws_alg_t alg)
{
    char errbuf[SVC_ERRBUF_LEN] = "", *out = NULL;

    assert_int_equal(gw_jwk_public_json(key, kid, alg, &out, errbuf), SVC_OK);
    return out;
}

char *tk_jwks(const char *first, ...)
{
    json_t *keys = json_array(), *root;
    va_list ap;
    char *out;

    va_start(ap, first);
    for (const char *k = first; k != NULL; k = va_arg(ap, const char *)) {
        json_t *j = json_loads(k, 0, NULL);
        assert_non_null(j);
        json_array_append_new(keys, j);
        free((char *)k);
    }
    va_end(ap);
    root = json_pack("{s:o}", "keys", keys);
    out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    assert_non_null(out);
    return out;
}

gw_jwks_t *tk_set(const char *json)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_jwks_t *s = NULL;

    if (gw_jwks_parse(json, strlen(json), &s, errbuf) != SVC_OK)
        fail_msg("JWKS refused: %s", errbuf);
    return s;
}

char *tk_token(EVP_PKEY *key, gw_jws_alg_t alg, const char *header, const char *payload)
{
    char errbuf[SVC_ERRBUF_LEN] = "", *out = NULL;

    if (gw_jwt_sign_raw(key, alg, header, payload, &out, errbuf) != SVC_OK)
        fail_msg("sign: %s", errbuf);
    return out;
}

char *tk_claims(EVP_PKEY *key, gw_jws_alg_t alg, const char *kid, const char *extra)
{
    json_t *hdr = json_pack("{s:s, s:s}", "alg", gw_jws_alg_name(alg), "typ", "JWT");
    json_t *pl = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", TK_ISS, "aud", TK_AUD, "sub", "c1",
                           "iat", (json_int_t)TK_NOW, "exp", (json_int_t)(TK_NOW + 600));
    char *hs, *ps, *tok;
    const char *name;
    json_t *v;

    if (kid != NULL)
        json_object_set_new(hdr, "kid", json_string(kid));
    if (extra != NULL) {
        json_t *ex = json_loads(extra, 0, NULL);
        assert_non_null(ex);
        json_object_foreach(ex, name, v)
        {
            if (json_is_null(v))
                json_object_del(pl, name);
            else
                json_object_set(pl, name, v);
        }
        json_decref(ex);
    }
    hs = json_dumps(hdr, JSON_COMPACT);
    ps = json_dumps(pl, JSON_COMPACT);
    tok = tk_token(key, alg, hs, ps);
    free(hs);
    free(ps);
    json_decref(hdr);
    json_decref(pl);
    return tok;
}

const svc_clock_t *tk_clock(void)
{
    if (!wall_ready) {
        fake_clock_init(&wall, (uint64_t)TK_NOW * 1000000000ull);
        wall_ready = true;
    }
    return fake_clock_iface(&wall);
}

void tk_clock_set(long long now_s)
{
    (void)tk_clock();
    atomic_store(&wall.now_ns, (uint64_t)now_s * 1000000000ull);
}

void tk_opts(gw_jwt_opts_t *o)
{
    gw_jwt_opts_init(o);
    o->issuer = TK_ISS;
    o->audience = TK_AUD;
    o->leeway_s = 30;
    o->wall_clock = tk_clock();
    tk_clock_set(TK_NOW);
}

void tk_write_file(const char *path, const char *text)
{
    char tmp[512];
    FILE *f;

    assert_true((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) < sizeof tmp);
    f = fopen(tmp, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
}
