/* SPDX-License-Identifier: Apache-2.0 */
/*
 * catalog_it.c - the catalog integration tests' shared fixture and client
 * calls (see catalog_it.h).
 */
#define _GNU_SOURCE /* timegm */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "catalog_it.h"
#include "support/scale.h"

#define METHOD(name) "/shopmicro.catalog.v1.CatalogService/" name
#define ENV_MAX      64 /* entries of the catalog's extra environment */
#define START_TRIES  3

void cat_it_global_init(void)
{
    const char *filter = getenv("SVC_TEST_FILTER");

    if (filter != NULL && filter[0] != '\0')
        cmocka_set_test_filter(filter);
    signal(SIGPIPE, SIG_IGN);
    grpc_init();
}

void cat_it_global_fini(void)
{
    grpc_shutdown();
}

int it_ms(int ms)
{
    return svc_test_ms(ms);
}

uint64_t it_now_ms(void)
{
    return svc_now_ms();
}

const char *cat_it_binary(void)
{
    const char *bin = getenv("CATALOG_BIN");

    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "CATALOG_BIN is not set: run this test through ctest\n");
        exit(2);
    }
    return bin;
}

svc_err_t cat_it_db_create(cat_it_t *t, char errbuf[static SVC_ERRBUF_LEN])
{
    return pgtest_db_create(&t->db, "catalog_it", errbuf);
}

svc_err_t cat_it_start(cat_it_t *t, const char *const *env, char errbuf[static SVC_ERRBUF_LEN])
{
    char listen[64], dsn[PGTEST_DSN_MAX + 32];
    const char *full_env[ENV_MAX];
    spawn_opts_t o;
    svc_err_t err = SVC_EINTERNAL;
    size_t n = 0;

    full_env[n++] = listen;
    full_env[n++] = dsn;
    full_env[n++] = "CATALOG_LOG_LEVEL=info";
    for (size_t i = 0; env != NULL && env[i] != NULL && n < ENV_MAX - 1; i++)
        full_env[n++] = env[i]; /* later entries win: the test's override ours */
    full_env[n] = NULL;
    snprintf(dsn, sizeof dsn, "CATALOG_DB_DSN=%s", t->db.dsn);
    spawn_opts_init(&o);
    o.path = cat_it_binary();
    o.env = full_env;

    /* The free port is not reserved; if another process takes it before
     * the catalog binds it, the catalog exits with "Address already in
     * use" and we pick another one. */
    for (int attempt = 0; attempt < START_TRIES; attempt++) {
        t->port = spawn_free_port();
        snprintf(t->addr, sizeof t->addr, "127.0.0.1:%d", t->port);
        snprintf(listen, sizeof listen, "CATALOG_LISTEN=%s", t->addr);
        err = spawn_start(&o, &t->proc, errbuf);
        if (err != SVC_OK)
            return err;
        err = spawn_log_wait(t->proc, "listening on", it_ms(IT_START_MS));
        if (err == SVC_OK)
            break;
        if (err == SVC_EUNAVAIL && attempt + 1 < START_TRIES &&
            spawn_log_contains(t->proc, "Address already in use")) {
            spawn_free(t->proc);
            t->proc = NULL;
            continue;
        }
        svc_errbuf_set(errbuf, "catalog did not start (%s); log %s",
                       err == SVC_ETIMEDOUT ? "timed out" : "it exited", spawn_log_path(t->proc));
        spawn_log_dump(t->proc, 30);
        return err;
    }
    err = spawn_wait_port(t->proc, "127.0.0.1", t->port, it_ms(2000), errbuf);
    if (err != SVC_OK)
        return err;
    t->ch = rpc_channel_new(t->addr, NULL);
    return t->ch != NULL ? SVC_OK : SVC_EINTERNAL;
}

int cat_it_setup_env(void **state, const char *const *env)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    cat_it_t *t = calloc(1, sizeof *t);

    *state = t;
    if (t == NULL)
        return -1;
    if (cat_it_db_create(t, errbuf) != SVC_OK || cat_it_start(t, env, errbuf) != SVC_OK) {
        fprintf(stderr, "setup failed: %s\n", errbuf);
        /* cmocka runs no teardown after a failed setup: clean up here. */
        cat_it_teardown(state);
        return -1;
    }
    return 0;
}

int cat_it_setup(void **state)
{
    return cat_it_setup_env(state, NULL);
}

int cat_it_stop(cat_it_t *t)
{
    char st[64];
    int wstatus = -1, rc = 0;

    if (t->ch != NULL)
        grpc_channel_destroy(t->ch);
    t->ch = NULL;
    if (t->proc == NULL)
        return 0;
    if (spawn_stopped(t->proc))
        spawn_signal(t->proc, SIGCONT); /* a test left it stopped */
    if (spawn_alive(t->proc))
        spawn_signal(t->proc, SIGTERM);
    if (spawn_wait_exit(t->proc, it_ms(15000), &wstatus) != SVC_OK) {
        fprintf(stderr, "catalog pid %d ignored SIGTERM for %d ms: killing it\n",
                (int)spawn_pid(t->proc), it_ms(15000));
        rc = -1;
    } else if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        spawn_status_text(wstatus, st, sizeof st);
        fprintf(stderr, "catalog pid %d ended with %s, not exit 0\n", (int)spawn_pid(t->proc), st);
        rc = -1;
    }
    if (rc != 0)
        spawn_log_dump(t->proc, 60);
    spawn_free(t->proc);
    t->proc = NULL;
    return rc;
}

int cat_it_teardown(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    cat_it_t *t = *state;
    int rc;

    if (t == NULL)
        return 0;
    rc = cat_it_stop(t);
    if (pgtest_db_drop(&t->db, errbuf) != SVC_OK) {
        fprintf(stderr, "cannot drop %s: %s\n", t->db.name, errbuf);
        rc = -1;
    }
    free(t);
    *state = NULL;
    return rc;
}

int it_stack(const char *cmd)
{
    return it_stack_args(cmd, NULL);
}

int it_stack_args(const char *cmd, const char *arg)
{
    char errbuf[SVC_ERRBUF_LEN] = "", log[512];
    const char *stack = getenv("SVC_IT_STACK_SH");
    const char *argv[4] = {stack, cmd, arg, NULL};
    spawn_opts_t o;
    int wstatus = -1;

    if (stack == NULL || stack[0] == '\0') {
        fprintf(stderr, "SVC_IT_STACK_SH is not set\n");
        return -1;
    }
    spawn_log_path_make("stack.sh", log, sizeof log);
    spawn_opts_init(&o);
    o.path = stack;
    o.argv = argv;
    o.log_path = log;
    if (spawn_run(&o, it_ms(120000), &wstatus, errbuf) != SVC_OK) {
        fprintf(stderr, "stack.sh %s: %s\n", cmd, errbuf);
        return -1;
    }
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        char st[64];
        spawn_status_text(wstatus, st, sizeof st);
        fprintf(stderr, "stack.sh %s %s ended with %s; output in %s\n", cmd, arg ? arg : "", st,
                log);
    }
    return wstatus;
}

int it_teardown_after_pg(void **state, int (*teardown)(void **state))
{
    int st = it_stack("pg-up"); /* first: the fixture's teardown needs the database */
    int rc = teardown(state);

    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "teardown: stack.sh pg-up failed\n");
        rc = -1;
    }
    return rc;
}

void it_random_uuid(char out[37])
{
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b) : -1;

    if (fd >= 0)
        close(fd);
    if (n != (ssize_t)sizeof b) { /* practically unreachable; stay well-formed */
        uint64_t x = svc_now_ns();
        for (size_t i = 0; i < sizeof b; i++, x = x * 6364136223846793005ull + 1)
            b[i] = (unsigned char)(x >> 56);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

bool it_is_uuid(const char *s)
{
    static const char mask[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

    if (s == NULL || strlen(s) != sizeof mask - 1)
        return false;
    for (size_t i = 0; mask[i] != '\0'; i++) {
        bool hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
        if (mask[i] == '-' ? s[i] != '-' : !hex)
            return false;
    }
    return true;
}

static int digits(const char *s, int n)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

bool it_is_recent_rfc3339_utc(const char *s, long max_skew_s)
{
    struct tm tm;
    const char *p;
    time_t t;

    if (s == NULL || strlen(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
        s[16] != ':')
        return false;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = digits(s, 4) - 1900;
    tm.tm_mon = digits(s + 5, 2) - 1;
    tm.tm_mday = digits(s + 8, 2);
    tm.tm_hour = digits(s + 11, 2);
    tm.tm_min = digits(s + 14, 2);
    tm.tm_sec = digits(s + 17, 2);
    if (tm.tm_year < 0 || tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour < 0 || tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 ||
        tm.tm_sec > 60)
        return false;
    p = s + 19;
    if (*p == '.') {
        const char *f = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == f || p - f > 9)
            return false;
    }
    if (strcmp(p, "Z") != 0)
        return false;
    t = timegm(&tm);
    return labs((long)(t - time(NULL))) <= max_skew_s;
}

static uint64_t deadline_after(int timeout_ms)
{
    return svc_now_ns() +
           (uint64_t)(timeout_ms > 0 ? timeout_ms : IT_DEFAULT_CALL_MS) * SVC_NS_PER_MS;
}

static svc_err_t call(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
                      const ProtobufCMessageDescriptor *d, int timeout_ms, ProtobufCMessage **out,
                      rpc_result_t *res)
{
    rpc_call_opts_t o = {.deadline_ns = deadline_after(timeout_ms)};

    return rpc_call_unary(ch, method, req, d, out, &o, res);
}

svc_err_t it_create(grpc_channel *ch, const char *name, const char *description,
                    int64_t price_cents, int32_t stock, int timeout_ms, it_product_t **out,
                    rpc_result_t *res)
{
    Shopmicro__Catalog__V1__CreateProductRequest req =
        SHOPMICRO__CATALOG__V1__CREATE_PRODUCT_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    svc_err_t err;

    req.name = (char *)name;
    req.description = (char *)description;
    req.price_cents = price_cents;
    req.stock = stock;
    err = call(ch, METHOD("CreateProduct"), &req.base, &shopmicro__catalog__v1__product__descriptor,
               timeout_ms, &m, res);
    *out = (it_product_t *)m;
    return err;
}

svc_err_t it_get(grpc_channel *ch, const char *id, int timeout_ms, it_product_t **out,
                 rpc_result_t *res)
{
    Shopmicro__Catalog__V1__GetProductRequest req =
        SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;

    ProtobufCMessage *m = NULL;
    svc_err_t err;

    req.id = (char *)id;
    err = call(ch, METHOD("GetProduct"), &req.base, &shopmicro__catalog__v1__product__descriptor,
               timeout_ms, &m, res);
    *out = (it_product_t *)m;
    return err;
}

svc_err_t it_batch_get(grpc_channel *ch, const char *const *ids, size_t n, int timeout_ms,
                       it_batch_t **out, rpc_result_t *res)
{
    Shopmicro__Catalog__V1__BatchGetProductsRequest req =
        SHOPMICRO__CATALOG__V1__BATCH_GET_PRODUCTS_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    svc_err_t err;

    req.ids = (char **)ids;
    req.n_ids = n;
    err =
        call(ch, METHOD("BatchGetProducts"), &req.base,
             &shopmicro__catalog__v1__batch_get_products_response__descriptor, timeout_ms, &m, res);
    *out = (it_batch_t *)m;
    return err;
}

svc_err_t it_list(grpc_channel *ch, int32_t page_size, const char *page_token, int timeout_ms,
                  it_list_t **out, rpc_result_t *res)
{
    Shopmicro__Catalog__V1__ListProductsRequest req =
        SHOPMICRO__CATALOG__V1__LIST_PRODUCTS_REQUEST__INIT;

    ProtobufCMessage *m = NULL;
    svc_err_t err;

    req.page_size = page_size;
    req.page_token = (char *)(page_token != NULL ? page_token : "");
    err = call(ch, METHOD("ListProducts"), &req.base,
               &shopmicro__catalog__v1__list_products_response__descriptor, timeout_ms, &m, res);
    *out = (it_list_t *)m;
    return err;
}

void it_free(void *msg)
{
    if (msg != NULL)
        protobuf_c_message_free_unpacked(msg, NULL);
}
