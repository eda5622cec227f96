/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_auth.c - gateway/auth.c and jwt_cache.c: a cache hit returns the same principal without a
 * second verification; a cached token still expires; the cache's LRU and bounds; the JWKS file
 * reloaded when it changes (the new key verifies, the old one's cached tokens are gone, two loops
 * both move), a bad or missing file keeps the old set and logs one line per version of the file;
 * the holder's options; the Authorization header's Bearer token.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth.h"
#include "jwt_cache.h"
#include "jwt_keys.h"
#include "support/capture.h"
#include "support/group.h"

static struct {
    char dir[64], path[128];
    EVP_PKEY *k1, *k2;
    gw_auth_t *a;
    gw_auth_loop_t *l;
} fx;

static void write_jwks(const char *json)
{
    tk_write_file(fx.path, json);
}

static void write_keys(EVP_PKEY *a, const char *kid_a, EVP_PKEY *b, const char *kid_b)
{
    char *json = b != NULL
                     ? tk_jwks(tk_jwk(a, kid_a, GW_JWS_ES256), tk_jwk(b, kid_b, GW_JWS_ES256), NULL)
                     : tk_jwks(tk_jwk(a, kid_a, GW_JWS_ES256), NULL);

    write_jwks(json);
    free(json);
}

static gw_auth_t *make(size_t cache_entries)
{
    gw_auth_opts_t o;
    char errbuf[SVC_ERRBUF_LEN] = "";

    gw_auth_opts_init(&o);
    o.jwks_file = fx.path;
    o.issuer = TK_ISS;
    o.audience = TK_AUD;
    o.cache_entries = cache_entries;
    o.wall_clock = tk_clock();
    tk_clock_set(TK_NOW);
    if (gw_auth_new(&o, &fx.a, errbuf) != SVC_OK)
        fail_msg("gw_auth_new: %s", errbuf);
    assert_int_equal(gw_auth_loop_new(fx.a, &fx.l), SVC_OK);
    return fx.a;
}

static int setup(void **state)
{
    (void)state;
    memset(&fx, 0, sizeof(fx));
    snprintf(fx.dir, sizeof(fx.dir), "/tmp/test_auth.XXXXXX");
    assert_non_null(mkdtemp(fx.dir));
    snprintf(fx.path, sizeof(fx.path), "%s/jwks.json", fx.dir);
    fx.k1 = tk_ec("P-256");
    fx.k2 = tk_ec("P-256");
    write_keys(fx.k1, "k1", NULL, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gw_auth_loop_free(fx.l);
    gw_auth_free(fx.a);
    EVP_PKEY_free(fx.k1);
    EVP_PKEY_free(fx.k2);
    unlink(fx.path);
    rmdir(fx.dir);
    return 0;
}

static gw_jwt_err_t verify(gw_auth_loop_t *l, const char *tok, gw_principal_t *p)
{
    gw_principal_t local;

    return gw_auth_verify(l, tok, strlen(tok), p != NULL ? p : &local);
}

static gw_jwt_cache_stats_t stats(gw_auth_loop_t *l)
{
    gw_jwt_cache_stats_t s;

    gw_auth_loop_cache_stats(l, &s);
    return s;
}

static void cache_hit_returns_the_same_principal(void **state)
{
    char *tok = tk_claims(fx.k1, GW_JWS_ES256, "k1", "{\"sub\":\"c7\",\"scope\":\"orders:read\"}");
    gw_principal_t p1, p2;

    (void)state;
    make(GW_AUTH_DEFAULT_CACHE_ENTRIES);
    assert_int_equal(verify(fx.l, tok, &p1), GW_JWT_OK);
    assert_int_equal(verify(fx.l, tok, &p2), GW_JWT_OK);
    assert_memory_equal(&p1, &p2, sizeof(p1));
    assert_string_equal(p2.sub, "c7");
    assert_int_equal(p2.scopes, PR_SCOPE_ORDERS_READ);
    assert_int_equal(stats(fx.l).misses, 1);
    assert_int_equal(stats(fx.l).hits, 1);
    /* A refused token is never cached: each try is a miss. */
    tok[strlen(tok) - 3] ^= 1;
    assert_int_not_equal(verify(fx.l, tok, NULL), GW_JWT_OK);
    assert_int_not_equal(verify(fx.l, tok, NULL), GW_JWT_OK);
    assert_int_equal(stats(fx.l).hits, 1);
    assert_int_equal(stats(fx.l).misses, 3);
    free(tok);
}

static void cached_token_expires(void **state)
{
    char *tok = tk_claims(fx.k1, GW_JWS_ES256, "k1", NULL); /* exp TK_NOW + 600 */
    gw_principal_t p;

    (void)state;
    make(GW_AUTH_DEFAULT_CACHE_ENTRIES);
    assert_int_equal(verify(fx.l, tok, NULL), GW_JWT_OK);
    /* The last second within the leeway: still a hit. */
    tk_clock_set(TK_NOW + 600 + 29);
    assert_int_equal(verify(fx.l, tok, &p), GW_JWT_OK);
    assert_int_equal(stats(fx.l).hits, 1);
    tk_clock_set(TK_NOW + 600 + 30);
    assert_int_equal(verify(fx.l, tok, &p), GW_JWT_EXPIRED);
    assert_string_equal(p.sub, "");
    assert_int_equal(stats(fx.l).expired, 1);
    assert_int_equal(stats(fx.l).hits, 1);
    free(tok);
}

static void no_cache(void **state)
{
    char *tok = tk_claims(fx.k1, GW_JWS_ES256, "k1", NULL);

    (void)state;
    make(0);
    assert_int_equal(verify(fx.l, tok, NULL), GW_JWT_OK);
    assert_int_equal(verify(fx.l, tok, NULL), GW_JWT_OK);
    assert_int_equal(stats(fx.l).hits, 0);
    assert_int_equal(verify(fx.l, "", NULL), GW_JWT_MISSING);
    free(tok);
}

static void cache_lru_and_bounds(void **state)
{
    gw_jwt_cache_t *c = NULL;
    uint8_t key[5][GW_JWT_CACHE_KEY_LEN];
    gw_principal_t p = {.sub = "x", .exp = TK_NOW + 60}, out;

    (void)state;
    assert_int_equal(gw_jwt_cache_new(0, &c), SVC_EINVAL);
    assert_int_equal(gw_jwt_cache_new(GW_JWT_CACHE_MAX_ENTRIES + 1, &c), SVC_EINVAL);
    assert_int_equal(gw_jwt_cache_new(3, &c), SVC_OK);
    assert_int_equal(gw_jwt_cache_capacity(c), GW_JWT_CACHE_WAYS); /* one set */
    memset(key, 0, sizeof(key));
    for (int i = 0; i < 5; i++)
        key[i][31] = (uint8_t)i; /* same set (the first 8 bytes pick it), different keys */
    for (int i = 0; i < 4; i++) {
        p.sub[0] = (char)('a' + i);
        gw_jwt_cache_put(c, key[i], &p);
    }
    /* Touch 0, so 1 is the least recently used when 4 arrives. */
    assert_true(gw_jwt_cache_get(c, key[0], TK_NOW, 0, &out));
    assert_string_equal(out.sub, "a");
    p.sub[0] = 'e';
    gw_jwt_cache_put(c, key[4], &p);
    assert_false(gw_jwt_cache_get(c, key[1], TK_NOW, 0, &out));
    assert_true(gw_jwt_cache_get(c, key[4], TK_NOW, 0, &out));
    assert_string_equal(out.sub, "e");
    assert_true(gw_jwt_cache_get(c, key[0], TK_NOW, 0, &out));
    /* A put of a key already there replaces it in place. */
    p.sub[0] = 'z';
    gw_jwt_cache_put(c, key[0], &p);
    assert_true(gw_jwt_cache_get(c, key[0], TK_NOW, 0, &out));
    assert_string_equal(out.sub, "z");
    assert_true(gw_jwt_cache_get(c, key[2], TK_NOW, 0, &out));
    assert_true(gw_jwt_cache_get(c, key[3], TK_NOW, 0, &out));
    gw_jwt_cache_clear(c);
    assert_false(gw_jwt_cache_get(c, key[0], TK_NOW, 0, &out));
    gw_jwt_cache_free(c);
}

static void reload_picks_the_new_key_and_flushes_the_cache(void **state)
{
    char *t1 = tk_claims(fx.k1, GW_JWS_ES256, "k1", NULL);
    char *t2 = tk_claims(fx.k2, GW_JWS_ES256, "k2", NULL);
    gw_auth_loop_t *other = NULL;

    (void)state;
    make(GW_AUTH_DEFAULT_CACHE_ENTRIES);
    assert_int_equal(gw_auth_loop_new(fx.a, &other), SVC_OK);
    assert_int_equal(gw_auth_reload_if_changed(fx.a), 0);
    assert_int_equal(verify(fx.l, t1, NULL), GW_JWT_OK);
    assert_int_equal(verify(fx.l, t1, NULL), GW_JWT_OK); /* now cached */
    assert_int_equal(verify(fx.l, t2, NULL), GW_JWT_UNKNOWN_KID);
    assert_int_equal(verify(other, t1, NULL), GW_JWT_OK);

    /* k1 retired, k2 in: k1's cached token must not survive it. */
    write_keys(fx.k2, "k2", NULL, NULL);
    tcap_begin();
    assert_int_equal(gw_auth_reload_if_changed(fx.a), 1);
    assert_non_null(strstr(tcap_end(), "msg=\"JWKS reloaded\""));
    assert_int_equal(gw_auth_generation(fx.a), 2);
    assert_int_equal(gw_auth_reload_if_changed(fx.a), 0);
    assert_int_equal(verify(fx.l, t1, NULL), GW_JWT_UNKNOWN_KID);
    assert_int_equal(verify(fx.l, t2, NULL), GW_JWT_OK);
    assert_int_equal(verify(other, t1, NULL), GW_JWT_UNKNOWN_KID);
    assert_int_equal(verify(other, t2, NULL), GW_JWT_OK);
    assert_int_equal(stats(fx.l).flushes, 2); /* the loop's first take, then the reload */

    /* A rotation: both keys for a while. */
    write_keys(fx.k1, "k1", fx.k2, "k2");
    tcap_begin();
    assert_int_equal(gw_auth_reload_if_changed(fx.a), 1);
    tcap_end();
    assert_int_equal(verify(fx.l, t1, NULL), GW_JWT_OK);
    assert_int_equal(verify(fx.l, t2, NULL), GW_JWT_OK);
    gw_auth_loop_free(other);
    free(t1);
    free(t2);
}

static void bad_file_keeps_the_old_set(void **state)
{
    char *t1 = tk_claims(fx.k1, GW_JWS_ES256, "k1", NULL);
    const char *log;

    (void)state;
    make(GW_AUTH_DEFAULT_CACHE_ENTRIES);
    assert_int_equal(verify(fx.l, t1, NULL), GW_JWT_OK);

    write_jwks("{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}]}");
    tcap_begin();
    assert_int_equal(gw_auth_reload_if_changed(fx.a), -1);
    /* The same bad file again: refused without a second line. */
    assert_int_equal(gw_auth_reload_if_changed(fx.a), -1);
    log = tcap_end();
    assert_non_null(strstr(log, "level=error"));
    assert_non_null(strstr(log, "mod=gateway.auth"));
    assert_non_null(strstr(log, "key 0: kty"));
    assert_non_null(strstr(log, "keys_kept=1"));
    assert_null(strstr(strstr(log, "keys_kept=1"), "level=error"));
    assert_int_equal(gw_auth_generation(fx.a), 1);
    assert_int_equal(verify(fx.l, t1, NULL), GW_JWT_OK);
    assert_int_equal(stats(fx.l).hits, 1); /* the cache was not flushed either */

    /* Missing: the same, once. */
    unlink(fx.path);
    tcap_begin();
    assert_int_equal(gw_auth_reload_if_changed(fx.a), -1);
    assert_int_equal(gw_auth_reload_if_changed(fx.a), -1);
    log = tcap_end();
    assert_non_null(strstr(log, "No such file"));
    assert_null(strstr(strstr(log, "No such file"), "level=error"));
    assert_int_equal(verify(fx.l, t1, NULL), GW_JWT_OK);

    /* Fixed: taken at the next look. */
    write_keys(fx.k1, "k1", fx.k2, "k2");
    tcap_begin();
    assert_int_equal(gw_auth_reload_if_changed(fx.a), 1);
    tcap_end();
    assert_int_equal(gw_auth_generation(fx.a), 2);
    free(t1);
}

/* The reload's lines obey the log level like every other line: at warn, a
 * good reload is silent and a refused one is not. */
static void reload_lines_follow_the_log_level(void **state)
{
    const char *log;

    (void)state;
    make(GW_AUTH_DEFAULT_CACHE_ENTRIES);
    svc_log_set_level(SVC_LOG_WARN);
    write_keys(fx.k2, "k2", NULL, NULL);
    tcap_begin();
    assert_int_equal(gw_auth_reload_if_changed(fx.a), 1);
    write_jwks("{}");
    assert_int_equal(gw_auth_reload_if_changed(fx.a), -1);
    log = tcap_end();
    svc_log_set_level(SVC_LOG_INFO);
    assert_null(strstr(log, "JWKS reloaded"));
    assert_non_null(strstr(log, "JWKS reload refused"));
}

static void options(void **state)
{
    gw_auth_opts_t o;
    gw_auth_t *a = NULL;
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    gw_auth_opts_init(&o);
    assert_int_equal(o.leeway_s, GW_JWT_DEFAULT_LEEWAY_S);
    assert_int_equal(o.cache_entries, GW_AUTH_DEFAULT_CACHE_ENTRIES);
    assert_int_equal(gw_auth_new(&o, &a, errbuf), SVC_EINVAL);
    assert_string_equal(errbuf, "JWKS file is not set");
    o.jwks_file = fx.path;
    assert_int_equal(gw_auth_new(&o, &a, errbuf), SVC_EINVAL);
    assert_string_equal(errbuf, "JWT issuer is not set");
    o.issuer = TK_ISS;
    o.audience = TK_AUD;
    o.jwks_file = "/nonexistent/jwks.json";
    assert_int_equal(gw_auth_new(&o, &a, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "No such file"));
    o.jwks_file = fx.path;
    assert_int_equal(gw_auth_new(&o, &a, errbuf), SVC_OK);
    assert_string_equal(gw_auth_jwt_opts(a)->issuer, TK_ISS);
    gw_auth_free(a);
    assert_null(fx.a);
}
static void bearer_header(void **state)
{
    const char *t;
    size_t n;

    (void)state;
    assert_int_equal(gw_auth_bearer_token("Bearer abc.def.ghi", 18, &t, &n), GW_JWT_OK);
    assert_int_equal(n, 11);
    assert_memory_equal(t, "abc.def.ghi", 11);
    assert_int_equal(gw_auth_bearer_token("bearer   x ", 11, &t, &n), GW_JWT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(gw_auth_bearer_token("Bearer", 6, &t, &n), GW_JWT_MALFORMED);
    assert_int_equal(gw_auth_bearer_token("Bearer   ", 9, &t, &n), GW_JWT_MALFORMED);
    assert_int_equal(gw_auth_bearer_token("Basic dXNlcg==", 14, &t, &n), GW_JWT_MISSING);
    assert_int_equal(gw_auth_bearer_token("Bearerx", 7, &t, &n), GW_JWT_MISSING);
    assert_int_equal(gw_auth_bearer_token("", 0, &t, &n), GW_JWT_MISSING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(cache_hit_returns_the_same_principal, setup, teardown),
        cmocka_unit_test_setup_teardown(cached_token_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(no_cache, setup, teardown),
        cmocka_unit_test(cache_lru_and_bounds),
        cmocka_unit_test_setup_teardown(reload_picks_the_new_key_and_flushes_the_cache, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(bad_file_keeps_the_old_set, setup, teardown),
        cmocka_unit_test_setup_teardown(reload_lines_follow_the_log_level, setup, teardown),
        cmocka_unit_test_setup_teardown(options, setup, teardown),
        cmocka_unit_test(bearer_header),
    };
    return svc_test_run_group_tests_name("gw_auth", tests, NULL, NULL);
}
