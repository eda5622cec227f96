/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_security.c - the rules of docs/gateway.md's "Security" that
 * need a real gateway in front of real upstreams:
 *   - the connection cap: at GATEWAY_MAX_CONNECTIONS a new connection waits
 *     in the listen backlog and is served once another closes; the pauses
 *     are counted on the admin port and logged once per pause;
 *   - CORS (GATEWAY_CORS_ORIGINS): a preflight from an allowed origin is
 *     answered 204 with the route's methods and the listed headers, a
 *     disallowed origin gets no CORS header at all;
 *   - what a client is told when a dependency fails: the dependency and the
 *     request id, never a library's text, an address or a host name; the
 *     detail is in the gateway's log line under the same request id.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw_it.h"

#define CAP 4

/* ---- raw connections ------------------------------------------------------ */

static int raw_connect(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void raw_send_get(int fd, const char *path)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: gw\r\n\r\n", path);

    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
}

/* The status of the response that arrives on fd within ms, 0 when none. */
static int raw_status_within(int fd, int ms)
{
    char buf[4096];
    size_t n = 0;
    uint64_t until = it_now_ms() + (uint64_t)ms;

    buf[0] = '\0';
    while (strstr(buf, "\r\n\r\n") == NULL) {
        int64_t left = (int64_t)until - (int64_t)it_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0 || n == sizeof buf - 1)
            return 0;
        r = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (r <= 0)
            return 0;
        n += (size_t)r;
        buf[n] = '\0';
    }
    return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
}

/* The value of the metrics line that starts with series, -1 when absent. */
static long long admin_metric(CURL *h, const gw_it_t *t, const char *series)
{
    char line[160];
    gw_res_t r;
    const char *p;
    long long v = -1;

    snprintf(line, sizeof line, "\n%s", series);
    gw_admin_get(h, t, "/metrics", &r);
    gw_assert_status(&r, 200);
    p = strstr(r.body, line);
    if (p != NULL)
        v = strtoll(p + strlen(line), NULL, 10);
    gw_res_free(&r);
    return v;
}

/* ---- the connection cap --------------------------------------------------- */

static int cap_setup(void **state)
{
    static const char *const env[] = {"GATEWAY_MAX_CONNECTIONS=4", NULL};

    return gw_it_setup_env(state, false, env);
}

static void connections_past_the_cap_wait_in_the_backlog(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    int fds[CAP], extra;

    /* Four connections, each answered: the gateway holds them (keep-alive). */
    for (int i = 0; i < CAP; i++) {
        fds[i] = raw_connect(t->port);
        raw_send_get(fds[i], "/healthz");
        assert_int_equal(raw_status_within(fds[i], it_ms(2000)), 200);
    }
    assert_int_equal(admin_metric(h, t, "gateway_connections "), CAP);
    assert_int_equal(admin_metric(h, t, "gateway_connections_max "), CAP);
    /* The fifth: the kernel completes its handshake, the gateway does not
     * accept it while four are open. */
    extra = raw_connect(t->port);
    raw_send_get(extra, "/healthz");
    assert_int_equal(raw_status_within(extra, 300), 0);
    /* One closes: the fifth is accepted and answered. */
    close(fds[0]);
    assert_int_equal(raw_status_within(extra, it_ms(2000)), 200);
    if (admin_metric(h, t, "gateway_accept_pauses_total{reason=\"connection_limit\"} ") < 1)
        fail_msg("no pause at the connection limit was counted");
    /* One line per pause, however many 100 ms re-checks it took. */
    assert_int_equal(spawn_log_count(t->gw, "connection limit: 4 connections open"), 1);
    assert_int_equal(spawn_log_count(t->gw, "connection limit: accepting again"), 1);
    close(extra);
    for (int i = 1; i < CAP; i++)
        close(fds[i]);
    curl_easy_cleanup(h);
}

/* ---- CORS ------------------------------------------------------------------ */

#define PAGE "https://shop.example.com"

static int cors_setup(void **state)
{
    static const char *const env[] = {"GATEWAY_CORS_ORIGINS=" PAGE ",http://localhost:3000", NULL};

    return gw_it_setup_env(state, false, env);
}

static bool has_cors_header(const gw_res_t *r)
{
    static const char *const names[] = {
        "Access-Control-Allow-Origin", "Access-Control-Allow-Methods",
        "Access-Control-Allow-Headers", "Access-Control-Expose-Headers", "Access-Control-Max-Age"};
    char v[256];

    for (size_t i = 0; i < SVC_COUNTOF(names); i++)
        if (gw_res_header(r, names[i], v, sizeof v))
            return true;
    return false;
}

static void preflight(CURL *h, const gw_it_t *t, const char *origin, const char *path, gw_res_t *r)
{
    char o[128];
    const char *hdrs[] = {o, "Access-Control-Request-Method: POST",
                          "Access-Control-Request-Headers: content-type, idempotency-key", NULL};

    snprintf(o, sizeof o, "Origin: %s", origin);
    gw_call(h, t, "OPTIONS", path, NULL, hdrs, r);
}

static void an_allowed_origin_gets_its_preflight(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    const char *from_page[] = {"Origin: " PAGE, NULL};
    char v[256];
    gw_res_t r;

    preflight(h, t, PAGE, "/v1/orders", &r);
    gw_assert_status(&r, 204);
    assert_true(gw_res_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_string_equal(v, PAGE);
    assert_true(gw_res_header(&r, "Access-Control-Allow-Methods", v, sizeof v));
    assert_string_equal(v, "POST"); /* the route's methods only */
    assert_true(gw_res_header(&r, "Access-Control-Allow-Headers", v, sizeof v));
    assert_string_equal(v, "Content-Type, Authorization, Idempotency-Key, Grpc-Timeout, "
                           "X-Request-Id");
    assert_true(gw_res_header(&r, "Vary", v, sizeof v));
    assert_string_equal(v, "Origin");
    gw_res_free(&r);
    preflight(h, t, PAGE, "/v1/products", &r);
    gw_assert_status(&r, 204);
    assert_true(gw_res_header(&r, "Access-Control-Allow-Methods", v, sizeof v));
    assert_string_equal(v, "GET, POST");
    gw_res_free(&r);
    /* The request itself: readable by the page, with its request id. */
    gw_call(h, t, "GET", "/v1/products?page_size=1", NULL, from_page, &r);
    gw_assert_status(&r, 200);
    assert_true(gw_res_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_string_equal(v, PAGE);
    assert_true(gw_res_header(&r, "Access-Control-Expose-Headers", v, sizeof v));
    assert_non_null(strstr(v, "X-Request-Id"));
    gw_res_free(&r);
    /* An unknown path has no preflight: 404. */
    preflight(h, t, PAGE, "/v2/nothing", &r);
    gw_assert_status(&r, 404);
    gw_res_free(&r);
    curl_easy_cleanup(h);
}

static void other_origins_get_no_cors_header(void **state)
{
    static const char *const others[] = {"https://evil.example", "http://shop.example.com",
                                         "https://shop.example.com.evil.example", "null"};
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char o[128], v[64];
    const char *hdrs[] = {o, NULL};
    gw_res_t r;

    for (size_t i = 0; i < SVC_COUNTOF(others); i++) {
        preflight(h, t, others[i], "/v1/orders", &r);
        gw_assert_status(&r, 405); /* an OPTIONS like any other */
        if (has_cors_header(&r))
            fail_msg("%s got a CORS header:\n%s", others[i], r.head);
        gw_res_free(&r);
        snprintf(o, sizeof o, "Origin: %s", others[i]);
        gw_call(h, t, "GET", "/v1/products?page_size=1", NULL, hdrs, &r);
        gw_assert_status(&r, 200);
        if (has_cors_header(&r))
            fail_msg("%s got a CORS header:\n%s", others[i], r.head);
        /* the answer depends on Origin all the same */
        assert_true(gw_res_header(&r, "Vary", v, sizeof v));
        gw_res_free(&r);
    }
    curl_easy_cleanup(h);
}

/* Without GATEWAY_CORS_ORIGINS, not one CORS header, whoever asks. */
static void no_cors_by_default(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char v[64];
    gw_res_t r;

    preflight(h, t, PAGE, "/v1/orders", &r);
    gw_assert_status(&r, 405);
    assert_false(has_cors_header(&r));
    assert_false(gw_res_header(&r, "Vary", v, sizeof v));
    gw_res_free(&r);
    curl_easy_cleanup(h);
}

/* ---- what a client is told when a dependency fails ------------------------ */

static int deps_setup(void **state)
{
    static const char *const env[] = {"GATEWAY_STALE_READS=off", NULL};

    return gw_it_setup_env(state, false, env);
}

/* The catalog's database refuses every connection: the catalog's pool
 * reconnects and fails with libpq's text ("connection to server at ...,
 * port ... failed: FATAL: database ... is not currently accepting
 * connections"). */
static void database_refuses_connections(const gw_it_t *t, bool refuse)
{
    char dsn[PGTEST_DSN_MAX], sql[512], errbuf[SVC_ERRBUF_LEN] = "";

    pgtest_dsn("postgres", dsn, sizeof dsn);
    snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS %s", t->cat.db.name,
             refuse ? "false" : "true");
    if (pgtest_exec(dsn, sql, errbuf) != SVC_OK)
        fail_msg("%s: %s", sql, errbuf);
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '%s'",
             t->cat.db.name);
    if (refuse && pgtest_exec(dsn, sql, errbuf) != SVC_OK)
        fail_msg("%s: %s", sql, errbuf);
}

static void assert_says_nothing_of_the_system(const char *what, const char *text)
{
    static const char *const never[] = {"127.0.0.1",
                                        "port",
                                        "connection to server",
                                        "FATAL",
                                        "not currently accepting",
                                        "dbname",
                                        "ipv4:",
                                        "localhost"};

    for (size_t i = 0; i < SVC_COUNTOF(never); i++)
        if (strstr(text, never[i]) != NULL)
            fail_msg("%s says \"%s\": %s", what, never[i], text);
}

static void a_failing_database_is_named_not_quoted(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    const char *id_hdr[] = {"X-Request-Id: sec-db-outage-1", NULL};
    char msg[512];
    it_product_t *p = NULL;
    rpc_result_t res;
    gw_res_t r;

    database_refuses_connections(t, true);
    /* The gateway's client: the dependency and the request id. */
    gw_call(h, t, "POST", "/v1/products", "{\"name\":\"mug\",\"price_cents\":1,\"stock\":1}",
            id_hdr, &r);
    if (r.status != 503 && r.status != 500)
        fail_msg("status %ld, want 503 or 500: %s", r.status, r.body);
    assert_true(gw_json_str(r.body, "message", msg, sizeof msg));
    assert_non_null(strstr(msg, "catalog "));
    assert_non_null(strstr(msg, "(request sec-db-outage-1)"));
    assert_says_nothing_of_the_system("the gateway's answer", r.body);
    gw_res_free(&r);
    /* The catalog's own gRPC clients are told no more. */
    it_create(t->cat.ch, "mug", "", 1, 1, 0, &p, &res);
    assert_int_not_equal(res.err, SVC_OK);
    assert_says_nothing_of_the_system("the catalog's status", res.message);
    it_free(p);
    /* The detail is in the logs, under the request id. */
    assert_true(spawn_log_contains(t->gw, "req=sec-db-outage-1"));
    assert_true(spawn_log_contains(t->cat.proc, "req=sec-db-outage-1"));
    assert_true(spawn_log_contains(t->cat.proc, "not currently accepting connections"));
    database_refuses_connections(t, false);
    curl_easy_cleanup(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(connections_past_the_cap_wait_in_the_backlog, cap_setup,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(a_failing_database_is_named_not_quoted, deps_setup,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(an_allowed_origin_gets_its_preflight, cors_setup,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(other_origins_get_no_cors_header, cors_setup,
                                        gw_it_teardown),
        cmocka_unit_test_setup_teardown(no_cors_by_default, deps_setup, gw_it_teardown),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = svc_test_run_group_tests_name("gateway_security", tests, NULL, NULL);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
