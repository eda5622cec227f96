/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server's and the database's counters bumped from several threads
 * while another renders the page (as workers, the built-in thread and the
 * admin thread do): every count exact at the end, and under TSan no race.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/db.h"
#include "stats.h"

#define THREADS 3
#define ROUNDS  20000

static const rpc__stats_method_t methods[] = {{"/pkg.Svc/Get", "unary"}};
static rpc__stats_t *st;
static db_conn_t *conns[THREADS];
static volatile int done;

static void *bump(void *arg)
{
    size_t shard = (size_t)(uintptr_t)arg;

    for (int i = 0; i < ROUNDS; i++) {
        rpc__stats_started(st, shard, 0);
        rpc__stats_handled(st, shard, 0, i % 2 ? 0 : 14, (uint64_t)i * 1000);
    }
    return NULL;
}

/* Runs a statement on a connection to nowhere: counted as UNAVAILABLE. */
static void *query(void *arg)
{
    char errbuf[SVC_ERRBUF_LEN];
    size_t k = (size_t)(uintptr_t)arg;

    for (int i = 0; i < 20; i++)
        (void)db_run(conns[k], 0, NULL, svc_now_ns() + 50 * SVC_NS_PER_MS, NULL, errbuf);
    return NULL;
}

static void *render(void *arg)
{
    char *buf = malloc(1 << 16);

    (void)arg;
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        svc_text_t t = {buf, 1 << 16, 0};
        size_t len;
        rpc__stats_render(st, 0, &t);
        (void)db_metrics_render(buf, 1 << 16, &len);
    }
    free(buf);
    return NULL;
}

static void counts_are_exact(void **state)
{
    static const db_stmt_t stmts[] = {{"concurrent_probe", "SELECT 1", 0, DB_STMT_IDEMPOTENT}};
    pthread_t th[THREADS], dq[THREADS], r;
    char buf[1 << 16], want[128], errbuf[SVC_ERRBUF_LEN];
    svc_text_t t = {buf, sizeof buf, 0};
    size_t len;

    (void)state;
    st = rpc__stats_new(methods, 1, THREADS);
    for (int i = 0; i < THREADS; i++) /* port 1: refused at once */
        assert_int_equal(db_conn_open("host=127.0.0.1 port=1 dbname=x connect_timeout=1", stmts, 1,
                                      1000, "test", &conns[i], errbuf),
                         SVC_OK);
    pthread_create(&r, NULL, render, NULL);
    for (int i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, bump, (void *)(uintptr_t)i);
        pthread_create(&dq[i], NULL, query, (void *)(uintptr_t)i);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        pthread_join(dq[i], NULL);
    }
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    pthread_join(r, NULL);

    rpc__stats_render(st, 0, &t);
    snprintf(want, sizeof want, "grpc_method=\"Get\"} %d\n", THREADS * ROUNDS);
    assert_non_null(strstr(buf, want));
    snprintf(want, sizeof want, "grpc_code=\"Unavailable\"} %d\n", THREADS * ROUNDS / 2);
    assert_non_null(strstr(buf, want));
    assert_int_equal(db_metrics_render(buf, sizeof buf, &len), SVC_OK);
    snprintf(
        want, sizeof want,
        "shopmicro_db_queries_total{statement=\"concurrent_probe\",outcome=\"UNAVAILABLE\"} %d\n",
        THREADS * 20);
    assert_non_null(strstr(buf, want));
    assert_non_null(strstr(buf, "shopmicro_db_connections_open 0\n"));
    for (int i = 0; i < THREADS; i++)
        db_conn_free(conns[i]);
    rpc__stats_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(counts_are_exact)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
