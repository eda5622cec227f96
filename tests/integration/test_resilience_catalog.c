/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pkg/resilience's gRPC binding against the real catalog binary: kill it
 * (UNAVAILABLE, retries logged, the breaker opens after 5 failed calls and
 * later calls fail in microseconds), freeze it with SIGSTOP (every attempt
 * ends at its own deadline), and bring it back (recovery within 1 s with the
 * breaker closed; exactly one trial after the cooldown with it open).
 *
 * The binding logs to this process's stderr; phases that assert log lines
 * redirect stderr to a file for their duration.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog_it.h"
#include "rs/grpc.h"

#define GET    "/shopmicro.catalog.v1.CatalogService/GetProduct"
#define CREATE "/shopmicro.catalog.v1.CatalogService/CreateProduct"

#define ATTEMPT_MS  300  /* per-attempt timeout used by these tests */
#define COOLDOWN_MS 1500 /* breaker cooldown used by these tests    */

typedef struct fixture {
    pgtest_db_t db;
    spawn_proc_t *cat;
    int port;
    char addr[32];
    rs_grpc_client_t *cl;
    char product_id[64];
} fixture_t;

/* ------------------------------------------------------------------ */
/* Catalog on a fixed port (a restart must come back on the same one)  */
/* ------------------------------------------------------------------ */

static svc_err_t catalog_start(fixture_t *f)
{
    char listen[64], dsn[PGTEST_DSN_MAX + 16], errbuf[SVC_ERRBUF_LEN];
    const char *env[] = {listen, dsn, "CATALOG_WORKERS=2", NULL};
    spawn_opts_t o;

    snprintf(listen, sizeof listen, "CATALOG_LISTEN=%s", f->addr);
    snprintf(dsn, sizeof dsn, "CATALOG_DB_DSN=%s", f->db.dsn);
    spawn_opts_init(&o);
    o.path = cat_it_binary();
    o.env = env;
    if (spawn_start(&o, &f->cat, errbuf) != SVC_OK) {
        fprintf(stderr, "cannot start catalog: %s\n", errbuf);
        return SVC_EUNAVAIL;
    }
    if (spawn_log_wait(f->cat, "listening on", it_ms(IT_START_MS)) != SVC_OK) {
        spawn_log_dump(f->cat, 40);
        return SVC_EUNAVAIL;
    }
    return SVC_OK;
}

static void catalog_kill(fixture_t *f)
{
    spawn_signal(f->cat, SIGKILL);
    spawn_wait_exit(f->cat, it_ms(5000), NULL);
    spawn_free(f->cat);
    f->cat = NULL;
}

static rs_grpc_client_t *client_new_channels(const char *addr, uint32_t breaker_failures,
                                             int channels)
{
    static const rs_method_t methods[] = {
        {.path = GET, .idempotency = RS_IDEMPOTENT},
        {.path = CREATE, .idempotency = RS_NOT_IDEMPOTENT},
    };
    char errbuf[SVC_ERRBUF_LEN] = "";
    rs_grpc_client_t *cl = NULL;
    rs_grpc_opts_t o;

    rs_grpc_opts_init(&o);
    o.target = addr;
    o.upstream.name = "catalog";
    o.upstream.methods = methods;
    o.upstream.n_methods = SVC_COUNTOF(methods);
    o.upstream.policy.attempt_timeout_ms = ATTEMPT_MS;
    o.upstream.policy.backoff_base_ms = 20;
    o.upstream.policy.backoff_cap_ms = 100;
    o.upstream.breaker.cooldown_ms = COOLDOWN_MS;
    o.upstream.breaker.failures = breaker_failures;
    o.channels = channels;
    if (rs_grpc_client_new(&o, &cl, errbuf) != SVC_OK)
        fail_msg("rs_grpc_client_new: %s", errbuf);
    return cl;
}

static rs_grpc_client_t *client_new(const char *addr, uint32_t breaker_failures)
{
    return client_new_channels(addr, breaker_failures, 1);
}

static int setup(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    fixture_t *f = calloc(1, sizeof *f);
    it_product_t *p = NULL;
    rpc_result_t res;
    grpc_channel *ch;

    if (f == NULL || pgtest_db_create(&f->db, "rs_it", errbuf) != SVC_OK) {
        fprintf(stderr, "setup: %s\n", errbuf);
        free(f);
        return -1;
    }
    f->port = spawn_free_port();
    snprintf(f->addr, sizeof f->addr, "127.0.0.1:%d", f->port);
    if (catalog_start(f) != SVC_OK)
        return -1;
    /* One real product, made without the binding under test. */
    ch = rpc_channel_new(f->addr, NULL);
    if (it_create(ch, "Mug", "", 1299, 3, 0, &p, &res) != SVC_OK) {
        fprintf(stderr, "setup: CreateProduct: %s\n", res.message);
        grpc_channel_destroy(ch);
        return -1;
    }
    snprintf(f->product_id, sizeof f->product_id, "%s", p->id);
    it_free(p);
    grpc_channel_destroy(ch);
    f->cl = client_new(f->addr, 5);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    int rc = 0;

    rs_grpc_client_free(f->cl);
    if (f->cat != NULL) {
        if (spawn_stopped(f->cat)) /* a SIGCONT during LeakSanitizer's exit scan hangs it */
            spawn_signal(f->cat, SIGCONT);
        spawn_signal(f->cat, SIGTERM);
        if (spawn_wait_exit(f->cat, it_ms(15000), NULL) != SVC_OK)
            rc = -1;
        spawn_free(f->cat);
    }
    pgtest_db_drop(&f->db, SVC_ERRBUF_SCRATCH);
    free(f);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

typedef struct call {
    svc_err_t err;
    rs_grpc_result_t res;
    double ms;
} call_t;

static call_t call(fixture_t *f, const char *method, const char *id, int deadline_ms)
{
    Shopmicro__Catalog__V1__GetProductRequest get =
        SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
    Shopmicro__Catalog__V1__CreateProductRequest create =
        SHOPMICRO__CATALOG__V1__CREATE_PRODUCT_REQUEST__INIT;
    rs_grpc_call_opts_t o = {0};
    ProtobufCMessage *resp = NULL;
    uint64_t t0 = svc_now_ns();
    call_t c;

    get.id = (char *)id;
    create.name = (char *)"Cup";
    o.deadline_ns =
        deadline_ms > 0 ? t0 + (uint64_t)deadline_ms * SVC_NS_PER_MS : SVC_DEADLINE_NONE;
    c.err = rs_grpc_call(f->cl, method, strcmp(method, GET) == 0 ? &get.base : &create.base,
                         &shopmicro__catalog__v1__product__descriptor, &resp, &o, &c.res);
    c.ms = (double)(svc_now_ns() - t0) / 1e6;
    if (resp != NULL)
        protobuf_c_message_free_unpacked(resp, NULL);
    return c;
}

#define ASSERT_CALL(c, code, why)                                                                  \
    do {                                                                                           \
        if ((c).err != (code) || (c).res.reason != (why))                                          \
            fail_msg("got %s/%s \"%s\" after %u attempts in %.1f ms, want %s/%s",                  \
                     svc_err_name((c).err), rs_reason_name((c).res.reason), (c).res.message,       \
                     (c).res.attempts, (c).ms, svc_err_name(code), rs_reason_name(why));           \
    } while (0)

/* stderr into a file while a phase runs, so its log lines can be read. */
typedef struct capture {
    int saved;
    FILE *f;
} capture_t;

static capture_t capture_begin(void)
{
    capture_t c = {dup(STDERR_FILENO), tmpfile()};

    assert_non_null(c.f);
    dup2(fileno(c.f), STDERR_FILENO);
    return c;
}

/* Restores stderr, echoes what was captured, returns it (free()). */
static char *capture_end(capture_t c)
{
    long n;
    char *text;

    dup2(c.saved, STDERR_FILENO);
    close(c.saved);
    n = ftell(c.f);
    text = calloc(1, (size_t)n + 1);
    rewind(c.f);
    if (text != NULL && fread(text, 1, (size_t)n, c.f) != (size_t)n)
        text[0] = '\0';
    fclose(c.f);
    fputs(text != NULL ? text : "", stderr);
    return text;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* SIGSTOP takes effect asynchronously: wait until every thread stopped. */
static void freeze(fixture_t *f)
{
    uint64_t until = svc_now_ms() + (uint64_t)it_ms(2000);

    assert_int_equal(spawn_signal(f->cat, SIGSTOP), SVC_OK);
    while (!spawn_stopped(f->cat)) {
        if (svc_now_ms() > until)
            fail_msg("the catalog did not stop");
        sleep_ms(1);
    }
}

/* ------------------------------------------------------------------ */
/* Tests                                                              */
/* ------------------------------------------------------------------ */

static void healthy_calls_pass_and_business_errors_never_trip(void **state)
{
    fixture_t *f = *state;
    call_t c = call(f, GET, f->product_id, 2000);
    char missing[37];

    ASSERT_CALL(c, SVC_OK, RS_REASON_OK);
    assert_int_equal(c.res.attempts, 1);
    it_random_uuid(missing);
    for (int i = 0; i < 10; i++) {
        c = call(f, GET, i % 2 ? missing : "does-not-exist", 2000);
        ASSERT_CALL(c, SVC_ENOTFOUND, RS_REASON_NOT_RETRYABLE);
        assert_int_equal(c.res.attempts, 1); /* a business error is never retried */
        assert_string_equal(c.res.message, "product not found");
    }
    assert_int_equal(rs_upstream_breaker_state(rs_grpc_client_upstream(f->cl)), RS_BREAKER_CLOSED);
}

static void killed_catalog_retries_then_opens_breaker_then_one_trial_heals(void **state)
{
    fixture_t *f = *state;
    rs_upstream_t *up = rs_grpc_client_upstream(f->cl);
    capture_t cap;
    char *log;
    call_t c;

    ASSERT_CALL(call(f, GET, f->product_id, 2000), SVC_OK, RS_REASON_OK);
    catalog_kill(f);

    cap = capture_begin();
    /* CreateProduct is not idempotent: one attempt, never retried. */
    c = call(f, CREATE, NULL, 2000);
    ASSERT_CALL(c, SVC_EUNAVAIL, RS_REASON_NOT_IDEMPOTENT);
    assert_int_equal(c.res.attempts, 1);
    for (int i = 0; i < 4; i++) {
        c = call(f, GET, f->product_id, 5000);
        ASSERT_CALL(c, SVC_EUNAVAIL, RS_REASON_ATTEMPTS_EXHAUSTED);
        assert_int_equal(c.res.attempts, 3);
    }
    log = capture_end(cap);
    /* Each GetProduct logged its two retries; the fifth failed call opened it. */
    assert_int_equal(count(log, GET " failed (attempt 1/3), retrying in"), 4);
    assert_int_equal(count(log, GET " failed (attempt 2/3), retrying in"), 4);
    assert_non_null(strstr(log, "breaker catalog: closed -> open after 5 consecutive failures"));
    free(log);
    assert_int_equal(rs_upstream_breaker_state(up), RS_BREAKER_OPEN);

    /* Open: no attempt, microseconds, and a Retry-After hint. */
    for (int i = 0; i < 3; i++) {
        c = call(f, GET, f->product_id, 5000);
        ASSERT_CALL(c, SVC_EUNAVAIL, RS_REASON_BREAKER_OPEN);
        assert_int_equal(c.res.attempts, 0);
        assert_string_equal(c.res.message, "circuit open");
        assert_true(c.res.retry_after_ms > 0 && c.res.retry_after_ms <= COOLDOWN_MS);
        if (c.ms > (double)it_ms(5)) /* scaled: sanitizer builds are slower */
            fail_msg("an open breaker took %.3f ms to answer", c.ms);
    }

    /* Back on the same port; after the cooldown one trial closes it. */
    assert_int_equal(catalog_start(f), SVC_OK);
    c = call(f, GET, f->product_id, 2000);
    if (c.err == SVC_EUNAVAIL)
        ASSERT_CALL(c, SVC_EUNAVAIL, RS_REASON_BREAKER_OPEN); /* still cooling down */
    sleep_ms((int)rs_upstream_ms_until_trial(up) + 20);
    cap = capture_begin();
    c = call(f, GET, f->product_id, 3000);
    log = capture_end(cap);
    ASSERT_CALL(c, SVC_OK, c.res.attempts > 1 ? RS_REASON_RETRIED : RS_REASON_OK);
    assert_non_null(strstr(log, "breaker catalog: open -> half-open"));
    assert_non_null(strstr(log, "breaker catalog: half-open -> closed"));
    free(log);
    assert_int_equal(rs_upstream_breaker_state(up), RS_BREAKER_CLOSED);
}

static void restart_with_breaker_closed_recovers_within_a_second(void **state)
{
    fixture_t *f = *state;
    uint64_t listening;
    double recovered_ms = -1;
    call_t c;

    /* This test measures the channel, so its breaker must stay closed
     * while it polls for the catalog's return. */
    rs_grpc_client_free(f->cl);
    f->cl = client_new(f->addr, 1000);
    ASSERT_CALL(call(f, GET, f->product_id, 2000), SVC_OK, RS_REASON_OK);
    catalog_kill(f);
    c = call(f, GET, f->product_id, 2000);
    ASSERT_CALL(c, SVC_EUNAVAIL, RS_REASON_ATTEMPTS_EXHAUSTED);
    sleep_ms(1500); /* let the channel settle in its reconnect backoff */
    assert_int_equal(catalog_start(f), SVC_OK);
    listening = svc_now_ns();
    while ((double)(svc_now_ns() - listening) / 1e6 < it_ms(3000)) {
        c = call(f, GET, f->product_id, 500);
        if (c.err == SVC_OK) {
            recovered_ms = (double)(svc_now_ns() - listening) / 1e6;
            break;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "first success %.1f ms after the catalog listened\n", recovered_ms);
    assert_true(recovered_ms >= 0);
    if (recovered_ms > it_ms(1000))
        fail_msg("first success %.1f ms after the catalog listened, want <= %d", recovered_ms,
                 it_ms(1000));
    assert_int_equal(rs_upstream_breaker_state(rs_grpc_client_upstream(f->cl)), RS_BREAKER_CLOSED);
}

static void frozen_catalog_each_attempt_ends_at_its_deadline(void **state)
{
    fixture_t *f = *state;
    call_t c;

    ASSERT_CALL(call(f, GET, f->product_id, 2000), SVC_OK, RS_REASON_OK);
    freeze(f);

    /* No caller deadline: 3 attempts of 300 ms plus two backoffs <= 100 ms. */
    c = call(f, GET, f->product_id, 0);
    ASSERT_CALL(c, SVC_ETIMEDOUT, RS_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(c.res.attempts, 3);
    assert_true(c.ms >= 3 * ATTEMPT_MS - 5);
    assert_true(c.ms <= 3 * ATTEMPT_MS + 2 * 100 + it_ms(300));

    /* A caller deadline shorter than the attempts: it wins, exactly. */
    c = call(f, GET, f->product_id, 450);
    ASSERT_CALL(c, SVC_ETIMEDOUT, RS_REASON_DEADLINE);
    assert_true(c.res.attempts <= 2);
    assert_true(c.ms >= 445 && c.ms <= 450 + it_ms(100));

    assert_int_equal(spawn_signal(f->cat, SIGCONT), SVC_OK);
    c = call(f, GET, f->product_id, 3000);
    assert_int_equal(c.err, SVC_OK);
}

/* Async calls: completion on the client's thread, handed back here. */
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    rs_grpc_result_t res;
    char id[64];
} waiter_t;

static void on_done(void *arg, const rs_grpc_result_t *res, ProtobufCMessage *resp)
{
    waiter_t *w = arg;

    pthread_mutex_lock(&w->mu);
    w->res = *res;
    if (resp != NULL)
        snprintf(w->id, sizeof w->id, "%s", ((Shopmicro__Catalog__V1__Product *)resp)->id);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    protobuf_c_message_free_unpacked(resp, NULL);
}

static void async_wait(waiter_t *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static void wait_in_flight_zero(fixture_t *f)
{
    rs_upstream_t *up = rs_grpc_client_upstream(f->cl);
    uint64_t until = svc_now_ms() + (uint64_t)it_ms(2000);

    while (rs_upstream_in_flight(up) != 0 && svc_now_ms() < until)
        sleep_ms(2);
    assert_int_equal(rs_upstream_in_flight(up), 0);
}

static svc_err_t async_get(fixture_t *f, waiter_t *w, rs_grpc_async_t **h)
{
    Shopmicro__Catalog__V1__GetProductRequest get =
        SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
    rs_grpc_call_opts_t o = {.deadline_ns = svc_now_ns() + 3000 * SVC_NS_PER_MS};

    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    get.id = f->product_id;
    return rs_grpc_call_async(f->cl, GET, &get.base, &shopmicro__catalog__v1__product__descriptor,
                              &o, on_done, w, h, &w->res);
}

static void async_calls_succeed_retry_and_cancel(void **state)
{
    fixture_t *f = *state;
    rs_grpc_async_t *h = NULL;
    waiter_t w;

    assert_int_equal(async_get(f, &w, &h), SVC_OK);
    async_wait(&w);
    assert_int_equal(w.res.err, SVC_OK);
    assert_string_equal(w.id, f->product_id);
    rs_grpc_release(h);

    /* Frozen catalog: the async path retries like the blocking one. */
    freeze(f);
    assert_int_equal(async_get(f, &w, NULL), SVC_OK);
    async_wait(&w);
    assert_int_equal(w.res.err, SVC_ETIMEDOUT);
    assert_int_equal(w.res.attempts, 3);

    /* Cancelled by its caller mid-attempt: done runs once, CANCELLED. */
    assert_int_equal(async_get(f, &w, &h), SVC_OK);
    sleep_ms(50);
    rs_grpc_cancel(h);
    async_wait(&w);
    assert_int_equal(w.res.err, SVC_ECANCELLED);
    assert_int_equal(w.res.reason, RS_REASON_CANCELLED);
    assert_int_equal(spawn_signal(f->cat, SIGCONT), SVC_OK);
    /* The caller was answered at once; the attempt leaves the bulkhead
     * gauge when its wire cancel completes on the client thread. */
    wait_in_flight_zero(f);
}

/*
 * Half-open, two calls at once (an order's two lines): the first is the
 * trial, the second is rejected, and the caller cancels the trial. The
 * caller hears "cancelled" before rs_grpc_cancel returns, but the trial is
 * not cancelled on the wire: its verdict closes the breaker. (Cancelling it
 * handed the permit on, and multi-line orders never healed the breaker.)
 */
static void cancelled_trial_runs_on_and_closes_the_breaker(void **state)
{
    fixture_t *f = *state;
    rs_upstream_t *up = rs_grpc_client_upstream(f->cl);
    uint64_t until;
    rs_grpc_async_t *h = NULL;
    waiter_t trial, sibling;

    catalog_kill(f);
    for (int i = 0; i < 5; i++)
        (void)call(f, GET, f->product_id, 5000);
    assert_int_equal(rs_upstream_breaker_state(up), RS_BREAKER_OPEN);
    assert_int_equal(catalog_start(f), SVC_OK);
    /* Frozen once the channel is back, so the trial is surely on the wire
     * when it is cancelled. */
    until = svc_now_ms() + (uint64_t)it_ms(3000);
    while (strcmp(rs_grpc_client_connectivity(f->cl), "ready") != 0 && svc_now_ms() < until)
        sleep_ms(10);
    sleep_ms((int)rs_upstream_ms_until_trial(up) + 20);
    freeze(f);

    assert_int_equal(async_get(f, &trial, &h), SVC_OK);
    assert_int_equal(rs_upstream_breaker_state(up), RS_BREAKER_HALF_OPEN);
    assert_int_equal(async_get(f, &sibling, NULL), SVC_EUNAVAIL);
    assert_int_equal(sibling.res.reason, RS_REASON_BREAKER_OPEN);
    rs_grpc_cancel(h);
    assert_true(trial.done); /* answered by the cancel itself: nobody waits for the trial */
    assert_int_equal(trial.res.err, SVC_ECANCELLED);
    assert_int_equal(trial.res.reason, RS_REASON_CANCELLED);
    assert_int_equal(rs_upstream_breaker_state(up), RS_BREAKER_HALF_OPEN);

    assert_int_equal(spawn_signal(f->cat, SIGCONT), SVC_OK);
    until = svc_now_ms() + (uint64_t)it_ms(2000);
    while (rs_upstream_breaker_state(up) != RS_BREAKER_CLOSED && svc_now_ms() < until)
        sleep_ms(5);
    assert_int_equal(rs_upstream_breaker_state(up), RS_BREAKER_CLOSED);
    wait_in_flight_zero(f);
}

/*
 * Every client of a process shares one driver thread (client.c). A second
 * client serves while the first, which started the thread, is freed under
 * it, with the second's call on the wire (the catalog frozen); the thread
 * lives on until the last client is gone.
 */
static void clients_share_one_thread_and_leave_in_any_order(void **state)
{
    fixture_t *f = *state;
    rs_grpc_client_t *first = f->cl;
    uint64_t t0;
    waiter_t w;

    f->cl = client_new(f->addr, 5);
    assert_int_equal(async_get(f, &w, NULL), SVC_OK);
    async_wait(&w);
    assert_int_equal(w.res.err, SVC_OK);

    freeze(f);
    assert_int_equal(async_get(f, &w, NULL), SVC_OK);
    t0 = svc_now_ms();
    rs_grpc_client_free(first); /* nothing of its own in flight: at once */
    assert_true(svc_now_ms() - t0 < (uint64_t)it_ms(ATTEMPT_MS / 2));
    assert_int_equal(spawn_signal(f->cat, SIGCONT), SVC_OK);
    async_wait(&w);
    assert_int_equal(w.res.err, SVC_OK);
    assert_string_equal(w.id, f->product_id);

    /* And the thread still serves the one client left. */
    assert_int_equal(async_get(f, &w, NULL), SVC_OK);
    async_wait(&w);
    assert_int_equal(w.res.err, SVC_OK);
    wait_in_flight_zero(f);
}

/* Established TCP connections to port, from /proc/net/tcp and tcp6 (gRPC's
 * sockets may be IPv6 ones with a v4-mapped address). */
static int connections_to(int port)
{
    static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    int n = 0;

    for (size_t i = 0; i < SVC_COUNTOF(files); i++) {
        char line[256];
        FILE *f = fopen(files[i], "r");

        while (f != NULL && fgets(line, sizeof line, f) != NULL) {
            unsigned rport, st;
            if (sscanf(line, " %*d: %*x:%*x %*x:%x %x", &rport, &st) == 2 && (int)rport == port &&
                st == 1)
                n++;
        }
        if (f != NULL)
            fclose(f);
    }
    return n;
}

static bool wait_connections(int port, int want)
{
    uint64_t until = svc_now_ns() + (uint64_t)it_ms(3000) * SVC_NS_PER_MS;

    while (connections_to(port) != want && svc_now_ns() < until)
        usleep(20 * 1000);
    return connections_to(port) == want;
}

/* channels = 3: one upstream over three connections of its own; a call's
 * lane picks one, every lane works, and freeing the client closes them. */
static void channels_carry_calls_on_connections_of_their_own(void **state)
{
    fixture_t *f = *state;
    Shopmicro__Catalog__V1__GetProductRequest get =
        SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
    char errbuf[SVC_ERRBUF_LEN] = "";
    rs_grpc_client_t *cl, *bad = NULL;
    rs_grpc_opts_t o;
    int n0;

    ASSERT_CALL(call(f, GET, f->product_id, 2000), SVC_OK, RS_REASON_OK); /* f->cl connected */
    n0 = connections_to(f->port);
    assert_true(n0 >= 1);
    cl = client_new_channels(f->addr, 5, 3);
    get.id = f->product_id;
    for (unsigned lane = 0; lane < 4; lane++) {
        rs_grpc_call_opts_t co = {.deadline_ns = svc_now_ns() + 3000 * SVC_NS_PER_MS, .lane = lane};
        ProtobufCMessage *resp = NULL;
        rs_grpc_result_t res;

        if (rs_grpc_call(cl, GET, &get.base, &shopmicro__catalog__v1__product__descriptor, &resp,
                         &co, &res) != SVC_OK)
            fail_msg("lane %u: %s", lane, res.message);
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    if (!wait_connections(f->port, n0 + 3))
        fail_msg("%d connections to the catalog, want %d + 3", connections_to(f->port), n0);
    assert_string_equal(rs_grpc_client_connectivity(cl), "ready");
    rs_grpc_client_free(cl);
    if (!wait_connections(f->port, n0))
        fail_msg("%d connections to the catalog after the free, want %d", connections_to(f->port),
                 n0);
    /* 1..RS_GRPC_MAX_CHANNELS */
    rs_grpc_opts_init(&o);
    o.target = f->addr;
    o.upstream.name = "catalog";
    o.channels = RS_GRPC_MAX_CHANNELS + 1;
    assert_int_equal(rs_grpc_client_new(&o, &bad, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "channels must be 1-16"));
    o.channels = 0;
    assert_int_equal(rs_grpc_client_new(&o, &bad, errbuf), SVC_EINVAL);
    assert_null(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(healthy_calls_pass_and_business_errors_never_trip, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            killed_catalog_retries_then_opens_breaker_then_one_trial_heals, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_with_breaker_closed_recovers_within_a_second, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(frozen_catalog_each_attempt_ends_at_its_deadline, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(async_calls_succeed_retry_and_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(cancelled_trial_runs_on_and_closes_the_breaker, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(channels_carry_calls_on_connections_of_their_own, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(clients_share_one_thread_and_leave_in_any_order, setup,
                                        teardown),
    };
    int failed;

    cat_it_global_init();
    failed = cmocka_run_group_tests_name("resilience_catalog", tests, NULL, NULL);
    cat_it_global_fini();
    return failed;
}
