/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_catalog_pg_restart.c - Postgres goes away under a running catalog:
 * while it is down every call fails UNAVAILABLE and the process stays up;
 * once it is back, calls succeed again by themselves, without restarting
 * the catalog.
 *
 * These tests stop the project's shared Postgres (deploy/local/stack.sh),
 * so CTest runs them with RUN_SERIAL, and the teardown brings Postgres back
 * whatever happened in the test.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "catalog_it.h"

#define WORKERS 4

typedef enum { OP_GET, OP_LIST, OP_CREATE, OP__COUNT } op_t;
static const char *const op_names[] = {"GetProduct", "ListProducts", "CreateProduct"};

/* One call of kind op; returns its result (the reply is checked and freed). */
static svc_err_t call_op(cat_it_t *t, op_t op, const char *id, rpc_result_t *res)
{
    it_product_t *p = NULL;
    it_list_t *l = NULL;

    switch (op) {
    case OP_GET:
        if (it_get(t->ch, id, 0, &p, res) == SVC_OK && strcmp(p->id, id) != 0)
            fail_msg("GetProduct(%s) returned %s", id, p->id);
        break;
    case OP_LIST:
        if (it_list(t->ch, 200, "", 0, &l, res) == SVC_OK && l->n_products < 1)
            fail_msg("ListProducts returned no products");
        break;
    case OP_CREATE:
        it_create(t->ch, "made while healing", "", 1, 1, 0, &p, res);
        break;
    case OP__COUNT:
        break;
    }
    it_free(p);
    it_free(l);
    return res->err;
}

static void stack_ok(const char *cmd)
{
    int st = it_stack(cmd);

    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("deploy/local/stack.sh %s failed", cmd);
}

/* Calls op until it succeeds, for up to timeout_ms; every failure before
 * that must be UNAVAILABLE. Returns the number of failures. */
static int heal(cat_it_t *t, op_t op, const char *id, int timeout_ms)
{
    uint64_t until = it_now_ms() + (uint64_t)timeout_ms;
    struct timespec pause = {0, 10 * 1000 * 1000};
    int failures = 0;
    rpc_result_t res;

    while (call_op(t, op, id, &res) != SVC_OK) {
        if (res.err != SVC_EUNAVAIL)
            fail_msg("%s after Postgres came back: %s \"%s\"", op_names[op], svc_err_name(res.err),
                     res.message);
        failures++;
        if (it_now_ms() >= until)
            fail_msg("%s still fails %d ms after Postgres came back: %s", op_names[op], timeout_ms,
                     res.message);
        nanosleep(&pause, NULL);
    }
    return failures;
}

static int setup(void **state)
{
    static const char *const env[] = {"CATALOG_WORKERS=4", NULL};
    return cat_it_setup_env(state, env);
}

static int teardown(void **state)
{
    return it_teardown_after_pg(state, cat_it_teardown);
}

static char *create_id(cat_it_t *t, const char *name)
{
    it_product_t *p = NULL;
    rpc_result_t res;
    char *id;

    it_create(t->ch, name, "", 10, 1, 0, &p, &res);
    IT_ASSERT_CODE(res, SVC_OK);
    id = strdup(p->id);
    it_free(p);
    return id;
}

static void calls_fail_unavailable_while_down_then_heal(void **state)
{
    cat_it_t *t = *state;
    char *id = create_id(t, "survivor"), errbuf[SVC_ERRBUF_LEN] = "";
    int64_t one = 0, n = 0;
    rpc_result_t res;
    int failures;

    for (int i = 0; i < 40; i++) { /* give every worker a connection */
        call_op(t, (op_t)(i % 2), id, &res);
        IT_ASSERT_CODE(res, SVC_OK);
    }

    stack_ok("pg-down");
    assert_int_equal(pgtest_scalar_int(t->db.dsn, "SELECT 1", &one, errbuf), SVC_EUNAVAIL);
    for (int i = 0; i < 5 * WORKERS * OP__COUNT; i++) {
        op_t op = (op_t)(i % OP__COUNT);
        call_op(t, op, id, &res);
        if (res.err != SVC_EUNAVAIL)
            fail_msg("%s with Postgres down: %s \"%s\", want UNAVAILABLE", op_names[op],
                     svc_err_name(res.err), res.message);
        /* Refused at once: nothing waits for a connect timeout. */
        assert_true(res.elapsed_ns / SVC_NS_PER_MS <= (uint64_t)it_ms(1000));
    }
    assert_true(spawn_alive(t->proc));

    stack_ok("pg-up");
    /* Reads are idempotent: a worker whose connection died re-makes it and
     * retries, so the very first read after the restart succeeds. */
    for (op_t op = OP_GET; op <= OP_LIST; op++)
        if (call_op(t, op, id, &res) != SVC_OK)
            fail_msg("first %s after Postgres came back: %s \"%s\"", op_names[op],
                     svc_err_name(res.err), res.message);
    /* A write is never retried: it may fail once on each worker that still
     * holds a dead connection (one that served no call during the outage). */
    failures = heal(t, OP_CREATE, id, it_ms(2000));
    print_message("  CreateProduct failed %d times after Postgres came back\n", failures);
    assert_true(failures <= WORKERS);
    for (int i = 0; i < 10 * WORKERS * OP__COUNT; i++) {
        op_t op = (op_t)(i % OP__COUNT);
        if (call_op(t, op, id, &res) != SVC_OK)
            fail_msg("%s after healing: %s \"%s\"", op_names[op], svc_err_name(res.err),
                     res.message);
    }
    assert_int_equal(pgtest_scalar_int(t->db.dsn, "SELECT count(*) FROM products", &n, errbuf),
                     SVC_OK);
    assert_int_equal(n, 1 + 1 + 10 * WORKERS);
    free(id);
}

/* Background readers that keep calling through the restart. */
typedef struct reader {
    pthread_t thread;
    cat_it_t *t;
    const char *id;
    atomic_bool *stop;
    atomic_size_t calls, ok, unavailable;
    char bad[SVC_ERRBUF_LEN];
} reader_t;

static void *reader_main(void *arg)
{
    reader_t *r = arg;

    for (size_t i = 0; !atomic_load(r->stop); i++) {
        it_product_t *p = NULL;
        rpc_result_t res;

        if (i % 2 == 0) {
            it_get(r->t->ch, r->id, 0, &p, &res);
        } else {
            it_list_t *l = NULL;
            it_list(r->t->ch, 10, "", 0, &l, &res);
            it_free(l);
        }
        it_free(p);
        if (res.err == SVC_OK)
            atomic_fetch_add(&r->ok, 1);
        else if (res.err == SVC_EUNAVAIL)
            atomic_fetch_add(&r->unavailable, 1);
        else if (r->bad[0] == '\0')
            snprintf(r->bad, sizeof r->bad, "%s \"%.200s\"", svc_err_name(res.err), res.message);
        atomic_fetch_add(&r->calls, 1);
    }
    return NULL;
}

#define READERS 2

static void restart_under_running_service_heals(void **state)
{
    cat_it_t *t = *state;
    char *id = create_id(t, "survivor");
    static reader_t rs[READERS];
    static atomic_bool stop;
    struct timespec pause = {0, 2 * 1000 * 1000};
    uint64_t until = it_now_ms() + (uint64_t)it_ms(5000);
    size_t ok = 0, unavailable = 0;
    int st, failures;
    rpc_result_t res;

    atomic_store(&stop, false);
    for (int i = 0; i < READERS; i++) {
        rs[i] = (reader_t){.t = t, .id = id, .stop = &stop};
        atomic_store(&rs[i].calls, 0);
        atomic_store(&rs[i].ok, 0);
        atomic_store(&rs[i].unavailable, 0);
        assert_int_equal(pthread_create(&rs[i].thread, NULL, reader_main, &rs[i]), 0);
    }
    while ((atomic_load(&rs[0].ok) < 20 || atomic_load(&rs[1].ok) < 20) && it_now_ms() < until)
        nanosleep(&pause, NULL);

    st = it_stack("pg-restart");
    /* Stop the readers before asserting anything, so none outlives the test. */
    atomic_store(&stop, true);
    for (int i = 0; i < READERS; i++) {
        pthread_join(rs[i].thread, NULL);
        ok += atomic_load(&rs[i].ok);
        unavailable += atomic_load(&rs[i].unavailable);
        if (rs[i].bad[0] != '\0')
            fail_msg("reader %d during the restart: %s", i, rs[i].bad);
    }
    print_message("  readers during the restart: %zu OK, %zu UNAVAILABLE\n", ok, unavailable);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("deploy/local/stack.sh pg-restart failed");
    assert_true(ok >= 2 * 20);
    assert_true(spawn_alive(t->proc));

    /* Reads: a connection found dead is re-made and the read retried, so
     * no read fails once Postgres is back. */
    for (int i = 0; i < 10 * WORKERS; i++) {
        op_t op = (op_t)(i % 2);
        if (call_op(t, op, id, &res) != SVC_OK)
            fail_msg("%s #%d after the restart: %s \"%s\"", op_names[op], i, svc_err_name(res.err),
                     res.message);
    }
    /* Writes: nothing left to heal. */
    failures = heal(t, OP_CREATE, id, it_ms(2000));
    print_message("  CreateProduct failed %d times before succeeding\n", failures);
    assert_int_equal(failures, 0);
    for (int i = 0; i < 4 * WORKERS; i++) {
        if (call_op(t, (op_t)(i % OP__COUNT), id, &res) != SVC_OK)
            fail_msg("%s after healing: %s \"%s\"", op_names[i % OP__COUNT], svc_err_name(res.err),
                     res.message);
    }
    free(id);
}

/* Writes right after a restart, with no read first to heal the connections:
 * pkg/db notices an idle connection the server closed before sending, so
 * not even a non-idempotent INSERT fails. */
static void restart_then_writes_succeed_at_once(void **state)
{
    cat_it_t *t = *state;
    rpc_result_t res;
    it_product_t *p = NULL;
    int st;

    for (int i = 0; i < 4 * WORKERS; i++) { /* every worker has a connection */
        assert_int_equal(it_create(t->ch, "before", "", 1, 1, 0, &p, &res), SVC_OK);
        it_free(p);
    }
    st = it_stack("pg-restart");
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("deploy/local/stack.sh pg-restart failed");
    for (int i = 0; i < 2 * WORKERS; i++) {
        if (it_create(t->ch, "after", "", 1, 1, 0, &p, &res) != SVC_OK)
            fail_msg("CreateProduct #%d after the restart: %s \"%s\"", i, svc_err_name(res.err),
                     res.message);
        it_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(calls_fail_unavailable_while_down_then_heal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(restart_under_running_service_heals, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_then_writes_succeed_at_once, setup, teardown),
    };
    int failed;

    cat_it_global_init();
    failed = cmocka_run_group_tests_name("catalog_pg_restart", tests, NULL, NULL);
    cat_it_global_fini();
    return failed;
}
