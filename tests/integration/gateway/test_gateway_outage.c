/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_outage.c - the gateway when things go wrong: the catalog
 * killed (503, then the breaker answers at once with Retry-After), frozen
 * (504 at the Grpc-Timeout deadline; a client that gives up cancels its
 * call), SIGTERM with requests in flight (drained, or cancelled at the
 * drain deadline; exit 0), and a second gateway on the same address.
 * Every test has its own catalog and gateway; the teardown requires exit 0
 * of both (in the ASan build: no leaks).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gw_it.h"

static int setup_env(void **state, const char *const *env)
{
    return gw_it_setup_env(state, false, env);
}

static int setup_fast_retries(void **state)
{
    /* Failing calls retry quickly, so five of them take well under a
     * second; the breaker keeps its defaults (5 failures, 10 s). */
    static const char *const env[] = {"GATEWAY_BACKOFF_BASE_MS=10", "GATEWAY_BACKOFF_CAP_MS=20",
                                      NULL};
    return setup_env(state, env);
}

static int setup_drain_3s(void **state)
{
    static const char *const env[] = {"GATEWAY_DRAIN_MS=3000", NULL};
    return setup_env(state, env);
}

static int setup_drain_300ms(void **state)
{
    static const char *const env[] = {"GATEWAY_DRAIN_MS=300", NULL};
    return setup_env(state, env);
}

static int setup_plain(void **state)
{
    return setup_env(state, NULL);
}

static void kill_catalog(gw_it_t *t)
{
    spawn_signal(t->cat.proc, SIGKILL);
    spawn_wait_exit(t->cat.proc, it_ms(5000), NULL);
    spawn_free(t->cat.proc);
    t->cat.proc = NULL; /* the teardown must not expect an exit 0 from it */
}

static void expect_404(CURL *h, gw_it_t *t)
{
    gw_res_t r;

    gw_call(h, t, "GET", "/v1/products/does-not-exist", NULL, NULL, &r);
    gw_assert_error(&r, 404, 5, "not found");
    gw_res_free(&r);
}

/* Adds up, over the gateway's log, the breaker-open 503 lines of GET
 * /v1/products/{id} written and the counts of those left out ("repeated=N"
 * on a written line or on the limiter's summary line of that key). */
static void breaker_open_lines(const gw_it_t *t, size_t *written, size_t *accounted)
{
    static const char key[] = "repeat_key=\"GET /v1/products/{id} 503 breaker-open\"";
    char *log = spawn_log_read(t->gw), *line, *save = NULL;

    assert_non_null(log);
    *written = *accounted = 0;
    for (line = strtok_r(log, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        const char *rep = strstr(line, " repeated=");
        bool access = strstr(line, "mod=gateway.access") != NULL &&
                      strstr(line, "route=\"/v1/products/{id}\"") != NULL &&
                      strstr(line, "reason=breaker-open") != NULL;
        if (access)
            (*written)++;
        if (access || strstr(line, key) != NULL)
            *accounted += (access ? 1 : 0) + (rep != NULL ? strtoul(rep + 10, NULL, 10) : 0);
    }
    free(log);
}

/* In an outage every request fails the same way: the access log writes the
 * first 503 of a kind and then one a second with the count of those left
 * out, and the tick writes the count of a kind that has gone quiet. */
static void breaker_open_lines_are_limited(gw_it_t *t, CURL *h, int already)
{
    size_t written, accounted;
    gw_res_t r;

    for (int i = 0; i < 50; i++) {
        gw_call(h, t, "GET", "/v1/products/does-not-exist", NULL, NULL, &r);
        gw_assert_error(&r, 503, 14, "circuit open");
        gw_res_free(&r);
    }
    /* The tick may write a summary while the calls still run (a slow call
     * lets a window end), so wait for the counts to add up, not for a line. */
    for (uint64_t until = it_now_ms() + (uint64_t)it_ms(3000);;) {
        breaker_open_lines(t, &written, &accounted);
        if (accounted >= (size_t)(already + 50) || it_now_ms() >= until)
            break;
        usleep(100 * 1000);
    }
    print_message("  %d breaker-open 503s: %zu access lines, the rest counted\n", already + 50,
                  written);
    assert_int_equal(accounted, (size_t)(already + 50));
    assert_true(written >= 1 && written <= 5);
}

static void catalog_down_then_breaker_open(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char v[64];
    gw_res_t r;

    expect_404(h, t);
    kill_catalog(t);
    /* Five failed calls (each retried, as GetProduct is idempotent) ... */
    for (int i = 0; i < 5; i++) {
        gw_call(h, t, "GET", "/v1/products/does-not-exist", NULL, NULL, &r);
        gw_assert_error(&r, 503, 14, "");
        if (r.connects != 0)
            fail_msg("503 number %d closed the connection", i + 1);
        gw_res_free(&r);
    }
    /* ... open the breaker: from now on answers take microseconds, carry
     * Retry-After and never reach the network. */
    for (int i = 0; i < 3; i++) {
        gw_call(h, t, "GET", "/v1/products/does-not-exist", NULL, NULL, &r);
        gw_assert_error(&r, 503, 14, "circuit open");
        assert_true(gw_res_header(&r, "Retry-After", v, sizeof v));
        assert_true(atoi(v) >= 1 && atoi(v) <= 10);
        gw_assert_error_info(&r, "BREAKER_OPEN", "gateway.shopmicro");
        assert_non_null(strstr(r.body, "\"metadata\":{\"upstream\":\"catalog\"}}"));
        gw_assert_retry_info(&r);
        if (r.ms >= (double)it_ms(10))
            fail_msg("breaker-open answer took %.2f ms", r.ms);
        assert_int_equal(r.connects, 0);
        gw_res_free(&r);
    }
    breaker_open_lines_are_limited(t, h, 3);
    /* not idempotent, same breaker: also refused at once */
    gw_call(h, t, "POST", "/v1/products", "{\"name\":\"x\"}", NULL, &r);
    gw_assert_error(&r, 503, 14, "circuit open");
    assert_true(gw_res_header(&r, "Retry-After", v, sizeof v));
    gw_res_free(&r);

    gw_admin_get(h, t, "/readyz", &r);
    gw_assert_status(&r, 503);
    assert_non_null(strstr(r.body, "{\"name\":\"catalog\",\"target\":\""));
    assert_non_null(strstr(r.body, "\"breaker\":\"open\""));
    gw_res_free(&r);
    gw_admin_get(h, t, "/metrics", &r);
    assert_non_null(strstr(r.body, "gateway_http_requests_total{route=\"/v1/products/{id}\","
                                   "method=\"GET\",code=\"503\"} 58\n"));
    assert_non_null(strstr(r.body, "reason=\"breaker-open\""));
    gw_res_free(&r);
    curl_easy_cleanup(h);
}

static int setup_with_order(void **state)
{
    return gw_it_setup_env(state, true, NULL);
}

/* The catalog is down, the order service is up: order answers 503 "catalog
 * unavailable" and marks it a dependency failure, so the gateway neither
 * retries it nor opens ITS breaker for order - GetOrder keeps working. */
static void catalog_down_does_not_open_the_gateways_order_breaker(void **state)
{
    static const char body[] = "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":"
                               "\"00000000-0000-4000-8000-000000000001\",\"quantity\":1}]}";
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    gw_res_t r;

    kill_catalog(t);
    for (int i = 0; i < 8; i++) {
        gw_call(h, t, "POST", "/v1/orders", body, NULL, &r);
        gw_assert_error(&r, 503, 14, "catalog unavailable");
        gw_res_free(&r);
    }
    /* By now order's own breaker for the catalog is open: its refusal says
     * when the catalog will be tried again (grpc-retry-pushback-ms), and the
     * gateway passes that on as Retry-After. */
    gw_call(h, t, "POST", "/v1/orders", body, NULL, &r);
    gw_assert_error(&r, 503, 14, "circuit open");
    /* order's own verdict (its breaker for its dependency), passed on; the
     * RetryInfo is the gateway's Retry-After */
    gw_assert_error_info(&r, "BREAKER_OPEN", "order.shopmicro");
    assert_non_null(strstr(r.body, "\"metadata\":{\"dependency\":\"catalog\"}}"));
    gw_assert_retry_info(&r);
    {
        char v[64];
        assert_true(gw_res_header(&r, "Retry-After", v, sizeof v));
        assert_true(atoi(v) >= 1 && atoi(v) <= 10);
    }
    gw_res_free(&r);
    gw_call(h, t, "GET", "/v1/orders/00000000-0000-4000-8000-000000000002", NULL, NULL, &r);
    gw_assert_error(&r, 404, 5, "order not found");
    gw_res_free(&r);
    gw_admin_get(h, t, "/readyz", &r);
    assert_non_null(strstr(r.body, "{\"name\":\"order\",\"target\":\""));
    if (strstr(r.body, "\"breaker\":\"open\",\"connectivity\":\"ready\"") != NULL)
        fail_msg("a breaker is open with its upstream ready: %s", r.body);
    gw_res_free(&r);
    assert_false(spawn_log_contains(t->gw, "breaker order: closed -> open"));
    curl_easy_cleanup(h);
}

static void frozen_catalog_deadline_and_disconnect(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    const char *deadline[] = {"Grpc-Timeout: 500m", NULL};
    const char *gone[] = {"X-Request-Id: gw-it-gone", NULL};
    gw_req_t rq = {"GET", "/v1/products/p-gone", NULL, 0, gone, 300, false};
    gw_res_t r;

    expect_404(h, t);
    gw_it_freeze(t->cat.proc);

    /* The call's deadline comes from Grpc-Timeout: 504 at 500 ms. */
    gw_call(h, t, "GET", "/v1/products/does-not-exist", NULL, deadline, &r);
    gw_assert_error(&r, 504, 4, "");
    if (r.ms < 480 || r.ms > 500 + it_ms(500))
        fail_msg("504 after %.1f ms, want about 500", r.ms);
    assert_int_equal(r.connects, 0);
    gw_res_free(&r);

    /* A client that gives up after 300 ms (default deadline 10 s): the
     * gateway notices the closed connection and cancels the call. */
    gw_do(h, t, &rq, &r);
    assert_int_equal(r.rc, CURLE_OPERATION_TIMEDOUT);
    gw_res_free(&r);
    if (spawn_log_wait(t->gw, "req=gw-it-gone msg=\"GET /v1/products/p-gone 499", it_ms(2000)) !=
        SVC_OK) {
        spawn_log_dump(t->gw, 20);
        fail_msg("no 499 access line for the abandoned request");
    }

    /* Still healthy and quick while the catalog is frozen. */
    gw_call(h, t, "GET", "/healthz", NULL, NULL, &r);
    gw_assert_status(&r, 200);
    assert_true(r.ms < (double)it_ms(100));
    gw_res_free(&r);
    gw_admin_get(h, t, "/metrics", &r);
    if (strstr(r.body, "shopmicro_resilience_calls_total{upstream=\"catalog\",method="
                       "\"GetProduct\",result=\"cancelled\"} 1\n") == NULL)
        fail_msg("the abandoned call was not cancelled:\n%s", r.body);
    gw_res_free(&r);

    spawn_signal(t->cat.proc, SIGCONT);
    expect_404(h, t);
    curl_easy_cleanup(h);
}

/* A request made from a helper thread while the main thread signals. */
typedef struct bg {
    gw_it_t *t;
    pthread_t tid;
    gw_res_t r;
    char connection[32];
} bg_t;

static void *bg_main(void *arg)
{
    bg_t *b = arg;
    CURL *h = curl_easy_init();

    gw_call(h, b->t, "GET", "/v1/products/does-not-exist", NULL, NULL, &b->r);
    if (!gw_res_header(&b->r, "Connection", b->connection, sizeof b->connection))
        b->connection[0] = '\0';
    curl_easy_cleanup(h);
    return NULL;
}

/* Waits until the gateway has the background request in flight. */
static void wait_in_flight(gw_it_t *t, bg_t *b)
{
    CURL *h = curl_easy_init();
    uint64_t until = it_now_ms() + (uint64_t)it_ms(5000);

    b->t = t;
    assert_int_equal(pthread_create(&b->tid, NULL, bg_main, b), 0);
    for (;;) {
        gw_res_t r;
        bool busy;
        gw_admin_get(h, t, "/metrics", &r);
        /* the admin port's /metrics is not an API request: it is not counted */
        busy = strstr(r.body, "gateway_http_in_flight 1\n") != NULL;
        gw_res_free(&r);
        if (busy)
            break;
        if (it_now_ms() > until)
            fail_msg("the background request never got in flight");
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    curl_easy_cleanup(h);
}

static int wait_gateway_exit(gw_it_t *t, int timeout_ms)
{
    int wstatus = -1;

    if (spawn_wait_exit(t->gw, timeout_ms, &wstatus) != SVC_OK)
        fail_msg("the gateway did not exit within %d ms of SIGTERM", timeout_ms);
    return wstatus;
}

static void sigterm_drains_in_flight_requests(void **state)
{
    gw_it_t *t = *state;
    bg_t b;
    int wstatus;

    memset(&b, 0, sizeof b);
    gw_it_freeze(t->cat.proc);
    wait_in_flight(t, &b);
    spawn_signal(t->gw, SIGTERM);
    assert_int_equal(spawn_log_wait(t->gw, "received SIGTERM", it_ms(2000)), SVC_OK);
    /* The gateway waits for the call; the catalog then answers it. */
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    assert_true(spawn_alive(t->gw));
    spawn_signal(t->cat.proc, SIGCONT);
    pthread_join(b.tid, NULL);
    gw_assert_error(&b.r, 404, 5, "not found");
    assert_string_equal(b.connection, "close");
    gw_res_free(&b.r);
    wstatus = wait_gateway_exit(t, it_ms(3000));
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    assert_true(spawn_log_contains(t->gw, "stopped after a clean drain"));
    assert_false(spawn_port_open("127.0.0.1", t->port));
}

static void sigterm_cancels_at_the_drain_deadline(void **state)
{
    gw_it_t *t = *state;
    uint64_t t0;
    bg_t b;
    int wstatus;

    memset(&b, 0, sizeof b);
    gw_it_freeze(t->cat.proc);
    wait_in_flight(t, &b);
    t0 = it_now_ms();
    spawn_signal(t->gw, SIGTERM);
    pthread_join(b.tid, NULL);
    gw_assert_error(&b.r, 503, 14, "shutting down");
    gw_res_free(&b.r);
    wstatus = wait_gateway_exit(t, it_ms(3000));
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    if (it_now_ms() - t0 < 250)
        fail_msg("the drain ended after %llu ms, before its 300 ms",
                 (unsigned long long)(it_now_ms() - t0));
    assert_true(spawn_log_contains(t->gw, "drain timed out"));
    spawn_signal(t->cat.proc, SIGCONT);
}

/* Runs a second gateway on t's address; returns its wait status. */
static int second_gateway(gw_it_t *t, const char *extra, spawn_proc_t **out)
{
    char listen[64], cat[64];
    const char *env[] = {
        listen, cat, "GATEWAY_THREADS=2", "GATEWAY_ADMIN_LISTEN=127.0.0.1:0", gw_it_lock_dir_env(),
        extra,  NULL};
    char errbuf[SVC_ERRBUF_LEN] = "";
    spawn_opts_t o;
    int wstatus = -1;

    snprintf(listen, sizeof listen, "GATEWAY_LISTEN=127.0.0.1:%d", t->port);
    snprintf(cat, sizeof cat, "GATEWAY_CATALOG_ADDR=%s", t->cat.addr);
    spawn_opts_init(&o);
    o.path = getenv("GATEWAY_BIN");
    o.env = env;
    assert_int_equal(spawn_start(&o, out, errbuf), SVC_OK);
    if (spawn_wait_exit(*out, it_ms(5000), &wstatus) != SVC_OK) {
        spawn_log_dump(*out, 20);
        fail_msg("a second gateway on %s kept running", listen);
    }
    return wstatus;
}

static void second_instance_fails_loudly(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    spawn_proc_t *p = NULL;
    gw_res_t r;
    int wstatus;

    /* the lock file catches it ... */
    wstatus = second_gateway(t, "GATEWAY_LOG_LEVEL=info", &p);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 1);
    assert_true(spawn_log_contains(p, "another gateway (pid "));
    assert_true(spawn_log_contains(p, "is already serving"));
    spawn_free(p);
    /* ... and without it, the probe bind without SO_REUSEPORT does */
    wstatus = second_gateway(t, "GATEWAY_LOCK_DIR=none", &p);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 1);
    assert_true(spawn_log_contains(p, "address already in use"));
    spawn_free(p);
    /* the first one never noticed */
    gw_call(h, t, "GET", "/healthz", NULL, NULL, &r);
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    curl_easy_cleanup(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(catalog_down_then_breaker_open, setup_fast_retries,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(catalog_down_does_not_open_the_gateways_order_breaker,
                                        setup_with_order, gw_it_teardown),
        cmocka_unit_test_setup_teardown(frozen_catalog_deadline_and_disconnect, setup_plain,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(sigterm_drains_in_flight_requests, setup_drain_3s,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(sigterm_cancels_at_the_drain_deadline, setup_drain_300ms,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(second_instance_fails_loudly, setup_plain, gw_it_teardown),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests_name("gateway_outage", tests, NULL, NULL);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
