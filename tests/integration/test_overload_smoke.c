/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_overload_smoke.c - a short version of the overload experiment
 * (docs/overload.md, issue 15) against the real catalog with its fault knobs:
 * the dependency saturated (2 slots, 120 ms a call, 50 originals/s), first
 * through the naive client, then through the guarded one, 4 s each. Asserts
 * ratios only (attempts per original), never times, so that a noisy or
 * sanitizer-slowed machine does not change the verdict: naive retries every
 * rejection (> 2 attempts per original), guarded's bulkhead (as many as
 * the slots) keeps it from being shed at all and at <= 1.2. Also checks the
 * pushback trailer of a rejection on the wire.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "catalog_it.h"
#include "overload.h"

static cat_it_t *it;
static char admin[32], product[64];

static int setup(void **state)
{
    char port_env[64];
    /* Log level info (cat_it_start waits for "listening on"): an access line
     * per call, which the log file takes. */
    const char *env[] = {port_env, "CATALOG_FAULT_KNOBS=on", "CATALOG_WORKERS=16", NULL};
    it_product_t *p = NULL;
    rpc_result_t res;
    int port = spawn_free_port();

    snprintf(admin, sizeof admin, "127.0.0.1:%d", port);
    snprintf(port_env, sizeof port_env, "CATALOG_ADMIN_LISTEN=%s", admin);
    if (cat_it_setup_env(state, env) != 0)
        return -1;
    it = *state;
    if (it_create(it->ch, "smoke", "", 100, 1, 0, &p, &res) != SVC_OK) {
        fprintf(stderr, "create: %s\n", res.message);
        return -1;
    }
    snprintf(product, sizeof product, "%s", p->id);
    it_free(p);
    return 0;
}

static double run(ov_mode_t mode, ov_row_t **rows, int *n)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ov_opts_t o;

    ov_opts_init(&o);
    o.target = it->addr;
    o.admin = admin;
    o.product_id = product;
    o.mode = mode;
    o.deadline_ms = 1000;
    o.slots = 2;
    o.bulkhead = 2;
    o.phases[0] = (ov_phase_t){"slow", 4, 120};
    o.n_phases = 1;
    if (ov_run(&o, rows, n, errbuf) != SVC_OK)
        fail_msg("ov_run: %s", errbuf);
    return ov_amplification(*rows, 0, *n);
}

static void naive_amplifies_guarded_does_not(void **state)
{
    ov_row_t *rows = NULL;
    int n = 0;
    long long orig = 0, rejected = 0;
    double naive, guarded;

    (void)state;
    naive = run(OV_NAIVE, &rows, &n);
    for (int s = 0; s < n; s++) {
        orig += rows[s].originals;
        rejected += rows[s].dep_rejected;
    }
    free(rows);
    assert_int_equal(orig, 4 * OV_DEFAULT_RATE); /* open loop: every arrival was sent */
    assert_true(rejected > 0);                   /* the slots were the limit */
    guarded = run(OV_GUARDED, &rows, &n);
    free(rows);
    printf("attempts per original: naive %.3f, guarded %.3f\n", naive, guarded);
    if (!(naive > 2.0))
        fail_msg("naive made %.3f attempts per original, want > 2", naive);
    if (!(guarded <= 1.2))
        fail_msg("guarded made %.3f attempts per original, want <= 1.2", guarded);
}

static void *slow_call(void *arg)
{
    rpc_result_t res;
    it_product_t *p = NULL;

    (void)arg;
    it_get(it->ch, product, 0, &p, &res);
    it_free(p);
    return NULL;
}

static void rejection_carries_pushback(void **state)
{
    int64_t in_flight, rej;
    rpc_result_t res;
    it_product_t *p = NULL;
    pthread_t t;

    (void)state;
    assert_true(ov_knobs_set(admin, "latency_ms=1500&slots=1&pushback_ms=250", &in_flight, &rej));
    pthread_create(&t, NULL, slow_call, NULL);
    /* Wait until the first call holds the only slot. */
    for (int i = 0; i < 200 && in_flight < 1; i++) {
        usleep(10 * 1000);
        assert_true(ov_knobs_set(admin, "", &in_flight, &rej));
    }
    assert_int_equal(in_flight, 1);
    it_get(it->ch, product, 0, &p, &res);
    IT_ASSERT_CODE(res, SVC_EEXHAUSTED);
    assert_true(res.has_pushback);
    assert_string_equal(res.pushback, "250");
    pthread_join(t, NULL);
    assert_true(ov_knobs_set(admin, "off=1", &in_flight, &rej));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rejection_carries_pushback),
        cmocka_unit_test(naive_amplifies_guarded_does_not),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests_name("overload_smoke", tests, setup, cat_it_teardown);
    cat_it_global_fini();
    return rc;
}
