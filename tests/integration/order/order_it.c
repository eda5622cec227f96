/* SPDX-License-Identifier: Apache-2.0 */
/*
 * order_it.c - the order integration tests' shared fixture and client calls
 * (see order_it.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "order_it.h"

#define METHOD(name) "/shopmicro.order.v1.OrderService/" name
#define ENV_MAX      64
#define START_TRIES  3

static const char *order_binary(void)
{
    const char *bin = getenv("ORDER_BIN");

    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "ORDER_BIN is not set: run this test through ctest\n");
        exit(2);
    }
    return bin;
}

/* Starts `path` with env and waits for "listening on". SVC_EEXIST when the
 * port was taken meanwhile (the caller picks another). */
static svc_err_t start(const char *path, const char *const *env, spawn_proc_t **out)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    spawn_opts_t o;
    svc_err_t err;

    spawn_opts_init(&o);
    o.path = path;
    o.env = env;
    err = spawn_start(&o, out, errbuf);
    if (err != SVC_OK) {
        fprintf(stderr, "cannot start %s: %s\n", path, errbuf);
        return err;
    }
    err = spawn_log_wait(*out, "listening on", it_ms(IT_START_MS));
    if (err == SVC_OK)
        return SVC_OK;
    if (err == SVC_EUNAVAIL && spawn_log_contains(*out, "Address already in use")) {
        spawn_free(*out);
        *out = NULL;
        return SVC_EEXIST;
    }
    fprintf(stderr, "%s did not start (%s)\n", path, err == SVC_ETIMEDOUT ? "timed out" : "exited");
    spawn_log_dump(*out, 40);
    return err;
}

/* A catalog on addr, on the test's catalog database. */
static svc_err_t catalog_start_at(ord_it_t *t, const char *addr, spawn_proc_t **out)
{
    char listen[64], dsn[PGTEST_DSN_MAX + 32];
    /* No saga consumer in this catalog: it would join a user's broker on
     * the default port (see order_start). */
    const char *env[] = {listen,
                         dsn,
                         "CATALOG_LOG_LEVEL=info",
                         "CATALOG_WORKERS=16",
                         "CATALOG_KAFKA_BROKERS=none",
                         "CATALOG_ADMIN_LISTEN=127.0.0.1:0",
                         NULL};

    snprintf(listen, sizeof listen, "CATALOG_LISTEN=%s", addr);
    snprintf(dsn, sizeof dsn, "CATALOG_DB_DSN=%s", t->cat_db.dsn);
    return start(cat_it_binary(), env, out);
}

svc_err_t ord_it_catalog_start(ord_it_t *t)
{
    return catalog_start_at(t, t->cat_addr, &t->cat);
}

/* A catalog on a free port (kept in addr, cap bytes), picked again if it was
 * taken meanwhile. */
static svc_err_t catalog_start_free(ord_it_t *t, char *addr, size_t cap, spawn_proc_t **out)
{
    svc_err_t err = SVC_EINTERNAL;

    for (int i = 0; i < START_TRIES; i++) {
        snprintf(addr, cap, "127.0.0.1:%d", spawn_free_port());
        err = catalog_start_at(t, addr, out);
        if (err != SVC_EEXIST)
            break;
    }
    return err;
}

void ord_it_catalog_kill(ord_it_t *t)
{
    spawn_signal(t->cat, SIGKILL);
    spawn_wait_exit(t->cat, it_ms(5000), NULL);
    spawn_free(t->cat);
    t->cat = NULL;
}

static svc_err_t order_start(ord_it_t *t, const char *const *extra)
{
    char listen[64], dsn[PGTEST_DSN_MAX + 32], cat[128];
    const char *env[ENV_MAX];
    size_t n = 0;
    svc_err_t err = SVC_EINTERNAL;

    env[n++] = listen;
    env[n++] = dsn;
    env[n++] = cat;
    env[n++] = "ORDER_LOG_LEVEL=info";
    /* No saga consumer unless a test names its own broker in extra: the
     * default would join a user's broker on 127.0.0.1:19092 and take the
     * user's events (and commit the user's group's offsets). */
    env[n++] = "ORDER_KAFKA_BROKERS=none";       /* "": the default, 19092 */
    env[n++] = "ORDER_ADMIN_LISTEN=127.0.0.1:0"; /* many orders run at once */
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < ENV_MAX - 1; i++)
        env[n++] = extra[i];
    env[n] = NULL;
    snprintf(dsn, sizeof dsn, "ORDER_DB_DSN=%s", t->ord_db.dsn);
    snprintf(cat, sizeof cat, "ORDER_CATALOG_ADDR=%s",
             t->cat_target[0] ? t->cat_target : t->cat_addr);
    for (int i = 0; i < START_TRIES; i++) {
        snprintf(t->ord_addr, sizeof t->ord_addr, "127.0.0.1:%d", spawn_free_port());
        snprintf(listen, sizeof listen, "ORDER_LISTEN=%s", t->ord_addr);
        err = start(order_binary(), env, &t->ord);
        if (err != SVC_EEXIST)
            break;
    }
    if (err == SVC_OK)
        t->ord_ch = rpc_channel_new(t->ord_addr, NULL);
    return err;
}

int ord_it_setup(void **state, const char *catalog_addr, const char *const *ord_env)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ord_it_t *t = calloc(1, sizeof *t);
    svc_err_t err = SVC_EINTERNAL;

    *state = t;
    if (t == NULL)
        return -1;
    if (pgtest_db_create(&t->ord_db, "order_it_ord", errbuf) != SVC_OK ||
        (catalog_addr == NULL && pgtest_db_create(&t->cat_db, "order_it_cat", errbuf) != SVC_OK)) {
        fprintf(stderr, "setup: %s\n", errbuf);
        goto fail;
    }
    if (catalog_addr != NULL) {
        snprintf(t->cat_addr, sizeof t->cat_addr, "%s", catalog_addr);
    } else {
        /* The catalog keeps its address across restarts, so it is picked once. */
        err = catalog_start_free(t, t->cat_addr, sizeof t->cat_addr, &t->cat);
        if (err != SVC_OK)
            goto fail;
        t->cat_ch = rpc_channel_new(t->cat_addr, NULL);
    }
    if (order_start(t, ord_env) != SVC_OK)
        goto fail;
    return 0;
fail:
    ord_it_teardown(state); /* cmocka runs no teardown after a failed setup */
    return -1;
}

int ord_it_setup_replicas(void **state, const char *const *ord_env)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ord_it_t *t = calloc(1, sizeof *t);

    *state = t;
    if (t == NULL)
        return -1;
    if (pgtest_db_create(&t->ord_db, "order_it_ord", errbuf) != SVC_OK ||
        pgtest_db_create(&t->cat_db, "order_it_cat", errbuf) != SVC_OK) {
        fprintf(stderr, "setup: %s\n", errbuf);
        goto fail;
    }
    if (catalog_start_free(t, t->cat_addr, sizeof t->cat_addr, &t->cat) != SVC_OK ||
        catalog_start_free(t, t->cat2_addr, sizeof t->cat2_addr, &t->cat2) != SVC_OK)
        goto fail;
    snprintf(t->cat_target, sizeof t->cat_target, "ipv4:%s,%s", t->cat_addr, t->cat2_addr);
    t->cat_ch = rpc_channel_new(t->cat_addr, NULL);
    if (order_start(t, ord_env) != SVC_OK)
        goto fail;
    return 0;
fail:
    ord_it_teardown(state);
    return -1;
}

/* SIGTERM, then require exit status 0 (in sanitizer builds: no leaks). */
static int stop(spawn_proc_t **p, const char *what)
{
    char st[64];
    int wstatus = -1, rc = 0;

    if (*p == NULL)
        return 0;
    spawn_signal(*p, SIGCONT); /* a test may have left it stopped */
    spawn_signal(*p, SIGTERM);
    if (spawn_wait_exit(*p, it_ms(15000), &wstatus) != SVC_OK) {
        fprintf(stderr, "%s ignored SIGTERM for %d ms: killing it\n", what, it_ms(15000));
        rc = -1;
    } else if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        spawn_status_text(wstatus, st, sizeof st);
        fprintf(stderr, "%s ended with %s, not exit 0\n", what, st);
        rc = -1;
    }
    if (rc != 0)
        spawn_log_dump(*p, 60);
    spawn_free(*p);
    *p = NULL;
    return rc;
}

int ord_it_order_stop(ord_it_t *t)
{
    if (t->ord_ch != NULL)
        grpc_channel_destroy(t->ord_ch);
    t->ord_ch = NULL;
    return stop(&t->ord, "order");
}

int ord_it_teardown(void **state)
{
    ord_it_t *t = *state;
    int rc = 0;

    if (t == NULL)
        return 0;
    if (ord_it_order_stop(t) != 0)
        rc = -1;
    if (t->cat_ch != NULL)
        grpc_channel_destroy(t->cat_ch);
    if (stop(&t->cat, "catalog") != 0 || stop(&t->cat2, "catalog replica 2") != 0)
        rc = -1;
    if (pgtest_db_drop(&t->cat_db, SVC_ERRBUF_SCRATCH) != SVC_OK ||
        pgtest_db_drop(&t->ord_db, SVC_ERRBUF_SCRATCH) != SVC_OK)
        rc = -1;
    free(t);
    *state = NULL;
    return rc;
}

void ord_it_product(ord_it_t *t, const char *name, int64_t price_cents, char id[37])
{
    it_product_t *p = NULL;
    rpc_result_t res;

    if (it_create(t->cat_ch, name, "", price_cents, 100, 0, &p, &res) != SVC_OK)
        fail_msg("CreateProduct %s: %s %s", name, svc_err_name(res.err), res.message);
    snprintf(id, 37, "%s", p->id);
    it_free(p);
}

static uint64_t deadline_after(int timeout_ms)
{
    return svc_now_ns() +
           (uint64_t)(timeout_ms > 0 ? timeout_ms : IT_DEFAULT_CALL_MS) * SVC_NS_PER_MS;
}

size_t it_caller_md(rpc_md_t *out, size_t cap, const char *subject, const char *scopes,
                    const rpc_md_t *more, size_t n_more)
{
    size_t n = 0;

    if (subject != NULL && n + 2 <= cap) {
        out[n++] = (rpc_md_t){PR_MD_SUBJECT, subject};
        out[n++] = (rpc_md_t){PR_MD_SCOPES, scopes};
    }
    for (size_t i = 0; i < n_more && n < cap; i++)
        out[n++] = more[i];
    return n;
}

svc_err_t it_order_create_as(grpc_channel *ch, const char *subject, const char *scopes,
                             const char *customer, const it_item_t *items, size_t n,
                             const rpc_md_t *md, size_t n_md, int timeout_ms, it_created_t **out,
                             rpc_result_t *res)
{
    Shopmicro__Order__V1__CreateOrderRequest req = SHOPMICRO__ORDER__V1__CREATE_ORDER_REQUEST__INIT;
    Shopmicro__Order__V1__OrderItem it[128], *ptrs[128];
    rpc_md_t all[RPC_UNARY_MAX_MD];
    rpc_call_opts_t o = {.deadline_ns = deadline_after(timeout_ms), .md = all};
    ProtobufCMessage *m = NULL;
    svc_err_t err;

    o.n_md = it_caller_md(all, RPC_UNARY_MAX_MD, subject, scopes, md, n_md);
    if (n > 128)
        n = 128;
    for (size_t i = 0; i < n; i++) {
        shopmicro__order__v1__order_item__init(&it[i]);
        it[i].product_id = (char *)items[i].product_id;
        it[i].quantity = items[i].quantity;
        ptrs[i] = &it[i];
    }
    req.customer_id = (char *)customer;
    req.items = ptrs;
    req.n_items = n;
    err = rpc_call_unary(ch, METHOD("CreateOrder"), &req.base,
                         &shopmicro__order__v1__create_order_response__descriptor, &m, &o, res);
    *out = (it_created_t *)m;
    return err;
}

svc_err_t it_order_create_md(grpc_channel *ch, const char *customer, const it_item_t *items,
                             size_t n, const rpc_md_t *md, size_t n_md, int timeout_ms,
                             it_created_t **out, rpc_result_t *res)
{
    return it_order_create_as(ch, customer, "orders:write orders:read", customer, items, n, md,
                              n_md, timeout_ms, out, res);
}

svc_err_t it_order_create(grpc_channel *ch, const char *customer, const it_item_t *items, size_t n,
                          const char *key, int timeout_ms, it_created_t **out, rpc_result_t *res)
{
    rpc_md_t md = {"idempotency-key", key};

    return it_order_create_md(ch, customer, items, n, &md, key != NULL ? 1 : 0, timeout_ms, out,
                              res);
}

svc_err_t it_order_get_as(grpc_channel *ch, const char *subject, const char *scopes, const char *id,
                          int timeout_ms, it_order_t **out, rpc_result_t *res)
{
    Shopmicro__Order__V1__GetOrderRequest req = SHOPMICRO__ORDER__V1__GET_ORDER_REQUEST__INIT;
    rpc_md_t md[2];
    rpc_call_opts_t o = {.deadline_ns = deadline_after(timeout_ms), .md = md};
    ProtobufCMessage *m = NULL;
    svc_err_t err;

    o.n_md = it_caller_md(md, 2, subject, scopes, NULL, 0);
    req.id = (char *)id;
    err = rpc_call_unary(ch, METHOD("GetOrder"), &req.base,
                         &shopmicro__order__v1__order__descriptor, &m, &o, res);
    *out = (it_order_t *)m;
    return err;
}

svc_err_t it_order_get(grpc_channel *ch, const char *id, int timeout_ms, it_order_t **out,
                       rpc_result_t *res)
{
    /* The tests read any order they placed, whoever for: as an admin. */
    return it_order_get_as(ch, "it-admin", "orders:admin", id, timeout_ms, out, res);
}

int64_t ord_it_int(const ord_it_t *t, const char *sql)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    int64_t v = -1;

    if (pgtest_scalar_int(t->ord_db.dsn, sql, &v, errbuf) != SVC_OK)
        fail_msg("%s: %s", sql, errbuf);
    return v;
}

void ord_it_text(const ord_it_t *t, const char *sql, char *out, size_t len)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    if (pgtest_scalar(t->ord_db.dsn, sql, out, len, errbuf) != SVC_OK)
        fail_msg("%s: %s", sql, errbuf);
}

ord_it_counts_t ord_it_counts(const ord_it_t *t)
{
    ord_it_counts_t c;

    c.orders = ord_it_int(t, "SELECT count(*) FROM orders");
    c.items = ord_it_int(t, "SELECT count(*) FROM order_items");
    c.outbox = ord_it_int(t, "SELECT count(*) FROM outbox");
    c.keys = ord_it_int(t, "SELECT count(*) FROM idempotency_keys");
    return c;
}

void ord_it_assert_counts(ord_it_counts_t got, ord_it_counts_t want)
{
    if (got.orders != want.orders || got.items != want.items || got.outbox != want.outbox ||
        got.keys != want.keys)
        fail_msg("rows (orders, order_items, outbox, idempotency_keys) are (%lld, %lld, %lld, "
                 "%lld), want (%lld, %lld, %lld, %lld)",
                 (long long)got.orders, (long long)got.items, (long long)got.outbox,
                 (long long)got.keys, (long long)want.orders, (long long)want.items,
                 (long long)want.outbox, (long long)want.keys);
}

double ord_it_ms_since(uint64_t t0_ns)
{
    return (double)(svc_now_ns() - t0_ns) / 1e6;
}

void ord_it_sleep_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}
