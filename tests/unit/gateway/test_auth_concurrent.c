/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_auth_concurrent.c - gateway/auth.c as the gateway uses it: loop threads, each with its own
 * gw_auth_loop_t, verify tokens of two keys without pause while the main thread rewrites the JWKS
 * file (k1 alone, k2 alone, both) and reloads it. A token's answer must only ever be "ok" or
 * "unknown key id" (never a bad signature from a half-swapped set, never a crash or a leak: the
 * sets are handed over by reference count), and once the last file (both keys) is loaded every
 * loop must accept both tokens. Run under ThreadSanitizer by build-tsan (the name has
 * "concurrent"), under ASan by build-asan.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth.h"
#include "jwt_keys.h"

#define THREADS 3
#define RELOADS 60

static gw_auth_t *auth;
static char *tokens[2];
static atomic_bool stop;
static _Atomic uint64_t oks, unknown, wrong, after_ok;
static _Atomic int settled; /* the final set is loaded: every answer must now be ok */

static void *loop_thread(void *arg)
{
    gw_auth_loop_t *l = NULL;
    gw_principal_t p;
    unsigned i = (unsigned)(uintptr_t)arg;

    if (gw_auth_loop_new(auth, &l) != SVC_OK) {
        atomic_fetch_add(&wrong, 1);
        return NULL;
    }
    while (!atomic_load(&stop)) {
        int s = atomic_load(&settled);
        const char *t = tokens[i++ % 2];
        gw_jwt_err_t e = gw_auth_verify(l, t, strlen(t), &p);

        if (e == GW_JWT_OK && strcmp(p.sub, "c1") == 0)
            atomic_fetch_add(s ? &after_ok : &oks, 1);
        else if (e == GW_JWT_UNKNOWN_KID && !s)
            atomic_fetch_add(&unknown, 1);
        else
            atomic_fetch_add(&wrong, 1);
    }
    gw_auth_loop_free(l);
    return NULL;
}

static void loops_verify_while_the_main_thread_reloads(void **state)
{
    char dir[] = "/tmp/test_auth_concurrent.XXXXXX", path[256], errbuf[SVC_ERRBUF_LEN] = "";
    EVP_PKEY *k1 = tk_ec("P-256"), *k2 = tk_ec("P-256");
    char *files[3];
    pthread_t th[THREADS];
    gw_auth_opts_t o;
    int reloaded = 0;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/jwks.json", dir);
    files[0] = tk_jwks(tk_jwk(k1, "k1", GW_JWS_ES256), NULL);
    files[1] = tk_jwks(tk_jwk(k2, "k2", GW_JWS_ES256), NULL);
    files[2] = tk_jwks(tk_jwk(k1, "k1", GW_JWS_ES256), tk_jwk(k2, "k2", GW_JWS_ES256), NULL);
    tokens[0] = tk_claims(k1, GW_JWS_ES256, "k1", NULL);
    tokens[1] = tk_claims(k2, GW_JWS_ES256, "k2", NULL);
    tk_write_file(path, files[0]);
    gw_auth_opts_init(&o);
    o.jwks_file = path;
    o.issuer = TK_ISS;
    o.audience = TK_AUD;
    o.cache_entries = 8;
    o.wall_clock = tk_clock();
    tk_clock_set(TK_NOW);
    if (gw_auth_new(&o, &auth, errbuf) != SVC_OK)
        fail_msg("gw_auth_new: %s", errbuf);
    svc_log_set_level(SVC_LOG_WARN); /* the reloads' info lines */
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, loop_thread, (void *)i), 0);
    for (int r = 1; r <= RELOADS; r++) {
        tk_write_file(path, files[r == RELOADS ? 2 : r % 2]);
        reloaded += gw_auth_reload_if_changed(auth) == 1;
        usleep(2000);
    }
    /* A loop reads this flag before it verifies, and the flag is set after
     * the last reload: an answer counted as "after" is of the final set. */
    atomic_store(&settled, 1);
    usleep(50000);
    atomic_store(&stop, true);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    printf("reloads %d, ok %llu, unknown kid %llu, ok after the last reload %llu, wrong %llu\n",
           reloaded, (unsigned long long)oks, (unsigned long long)unknown,
           (unsigned long long)after_ok, (unsigned long long)wrong);
    assert_int_equal(reloaded, RELOADS);
    assert_int_equal(atomic_load(&wrong), 0);
    assert_true(atomic_load(&after_ok) > 0);
    assert_true(atomic_load(&unknown) > 0);
    gw_auth_free(auth);
    for (int i = 0; i < 3; i++)
        free(files[i]);
    free(tokens[0]);
    free(tokens[1]);
    EVP_PKEY_free(k1);
    EVP_PKEY_free(k2);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loops_verify_while_the_main_thread_reloads),
    };
    return cmocka_run_group_tests_name("gw_auth_concurrent", tests, NULL, NULL);
}
