/* SPDX-License-Identifier: Apache-2.0 */
/* test_http.c - pkg/admin's request parser, body buffer and response head. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "internal.h"

static int parse(const char *req, admin__route_t *route)
{
    return admin__parse(req, strlen(req), 8192, route);
}

static void routes_known_paths(void **state)
{
    admin__route_t r = ADMIN__HEALTHZ;

    assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &r), 200);
    assert_int_equal(r, ADMIN__METRICS);
    assert_int_equal(parse("GET /readyz?verbose=1 HTTP/1.0\r\n\r\n", &r), 200);
    assert_int_equal(r, ADMIN__READYZ);
    assert_int_equal(parse("GET /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &r), 200);
    assert_int_equal(r, ADMIN__HEALTHZ);
}

static void statuses_for_bad_requests(void **state)
{
    admin__route_t r;

    assert_int_equal(parse("GET /nope HTTP/1.1\r\n\r\n", &r), 404);
    assert_int_equal(parse("GET /metricsx HTTP/1.1\r\n\r\n", &r), 404);
    assert_int_equal(parse("POST /metrics HTTP/1.1\r\n\r\n", &r), 405);
    assert_int_equal(parse("HEAD /healthz HTTP/1.1\r\n\r\n", &r), 405);
    assert_int_equal(parse("GET /healthz HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &r), 413);
    assert_int_equal(parse("GET /healthz HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n", &r), 413);
    assert_int_equal(parse("GET /healthz\r\n\r\n", &r), 400);
    assert_int_equal(parse("GET healthz HTTP/1.1\r\n\r\n", &r), 400);
    assert_int_equal(parse("GET /healthz HTTP/2.0\r\n\r\n", &r), 400);
    assert_int_equal(parse("G(T /healthz HTTP/1.1\r\n\r\n", &r), 400);
    assert_int_equal(parse("GET /healthz HTTP/1.1\r\nno colon\r\n\r\n", &r), 400);
    assert_int_equal(admin__parse("GET /\0x HTTP/1.1\r\n\r\n", 20, 8192, &r), 400);
}

/* Framing a proxy in front could read differently (pkg/http1 refuses it). */
static void ambiguous_framing_is_400(void **state)
{
    static const char *const rows[] = {
        "GET /healthz HTTP/1.1\r\nHost : a\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nA: b\r\n c: d\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: a\rb\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: a\x01\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 2\r\n\r\n",
    };
    admin__route_t r;

    for (size_t i = 0; i < SVC_COUNTOF(rows); i++)
        if (parse(rows[i], &r) != 400)
            fail_msg("row %zu: %d", i, parse(rows[i], &r));
}

static void incomplete_then_too_large(void **state)
{
    admin__route_t r;
    char big[200];

    assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n", &r), 0);
    memset(big, 'a', sizeof big);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    big[sizeof big - 1] = '\0';
    assert_int_equal(admin__parse(big, strlen(big), 100, &r), 431);
    assert_int_equal(admin__parse(big, 50, 100, &r), 0);
}

static int parse_debug(const char *req, admin__req_t *r)
{
    return admin__parse_req(req, strlen(req), 256, true, r);
}

/* The /debug family: GET, POST and PUT with a Content-Length body, only
 * when the service asked for it; the fixed routes keep their rules. */
static void debug_routes(void **state)
{
    admin__req_t r;
    admin__route_t route;

    (void)state;
    assert_int_equal(parse("POST /debug/fault HTTP/1.1\r\n\r\n", &route), 405);
    assert_int_equal(parse("GET /debug/fault HTTP/1.1\r\n\r\n", &route), 404);
    assert_int_equal(parse_debug("GET /debug/fault?x=1 HTTP/1.1\r\n\r\n", &r), 200);
    assert_int_equal(r.route, ADMIN__DEBUG);
    assert_int_equal(r.path_len, 12);
    assert_memory_equal(r.path, "/debug/fault", 12);
    assert_int_equal(r.query_len, 3);
    assert_memory_equal(r.query, "x=1", 3);
    assert_int_equal(r.body_len, 0);
    assert_int_equal(parse_debug("PUT /debug HTTP/1.1\r\nContent-Length: 9\r\n\r\nlatency=5", &r),
                     200);
    assert_int_equal(r.body_len, 9);
    assert_memory_equal(r.body, "latency=5", 9);
    assert_memory_equal(r.method, "PUT", 3);
    /* The body has not all arrived yet: read more. */
    assert_int_equal(parse_debug("POST /debug/x HTTP/1.1\r\nContent-Length: 9\r\n\r\nlat", &r), 0);
    assert_int_equal(parse_debug("POST /debug/x HTTP/1.1\r\nContent-Length: 999\r\n\r\n", &r), 413);
    assert_int_equal(parse_debug("GET /debug/x HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", &r), 413);
    assert_int_equal(parse_debug("DELETE /debug/x HTTP/1.1\r\n\r\n", &r), 405);
    assert_int_equal(parse_debug("POST /debug/x HTTP/1.1\r\nContent-Length: 2x\r\n\r\n", &r), 400);
    assert_int_equal(parse_debug("POST /debugx HTTP/1.1\r\n\r\n", &r), 405);
    assert_int_equal(parse_debug("GET /debugx HTTP/1.1\r\n\r\n", &r), 404);
    assert_int_equal(parse_debug("GET /metrics HTTP/1.1\r\n\r\n", &r), 200);
    assert_int_equal(r.route, ADMIN__METRICS);
    assert_int_equal(parse_debug("POST /metrics HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", &r), 413);
}

static void buffer_caps_and_escapes(void **state)
{
    admin_buf_t b;
    char line[700];

    admin__buf_init(&b, 1000);
    admin_buf_json_str(&b, "a\"b\\c\n");
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\u000a\"");
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\0';
    admin_buf_printf(&b, "%s", line); /* longer than the small buffer */
    assert_false(b.overflow);
    assert_int_equal(b.len, 15 + 699);
    admin_buf_printf(&b, "%s", line);
    assert_true(b.overflow);
    admin__buf_dispose(&b);
}

static void ready_one_and_listen_none(void **state)
{
    admin_buf_t b;
    admin_opts_t o;
    admin_server_t *srv = (admin_server_t *)&b; /* must be set to NULL */
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    admin__buf_init(&b, 1000);
    assert_false(admin_ready_one(&b, "saga_consumer", false, "broker \"gone\""));
    assert_string_equal(b.data,
                        "{\"status\":\"unavailable\",\"checks\":[{\"name\":"
                        "\"saga_consumer\",\"ok\":false,\"detail\":\"broker \\\"gone\\\"\"}]}");
    admin__buf_dispose(&b);
    admin__buf_init(&b, 1000);
    assert_true(admin_ready_one(&b, "x", true, NULL));
    assert_string_equal(b.data, "{\"status\":\"ok\",\"checks\":[{\"name\":\"x\",\"ok\":true,"
                                "\"detail\":\"\"}]}");
    admin__buf_dispose(&b);
    admin_opts_init(&o);
    o.listen = "none";
    assert_int_equal(admin_server_new(&o, &srv, errbuf), SVC_OK);
    assert_null(srv);
    admin_server_free(srv);
}

static void response_head(void **state)
{
    admin_buf_t b;

    admin__buf_init(&b, 4096);
    admin__response(&b, 405, "text/plain", "no\n", 3);
    assert_non_null(strstr(b.data, "HTTP/1.1 405 Method Not Allowed\r\n"));
    assert_non_null(strstr(b.data, "Allow: GET\r\n"));
    assert_non_null(strstr(b.data, "Content-Length: 3\r\n"));
    assert_non_null(strstr(b.data, "Connection: close\r\n\r\nno\n"));
    admin__buf_dispose(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes_known_paths),
        cmocka_unit_test(statuses_for_bad_requests),
        cmocka_unit_test(ambiguous_framing_is_400),
        cmocka_unit_test(incomplete_then_too_large),
        cmocka_unit_test(debug_routes),
        cmocka_unit_test(buffer_caps_and_escapes),
        cmocka_unit_test(ready_one_and_listen_none),
        cmocka_unit_test(response_head),
    };
    return cmocka_run_group_tests_name("admin_http", tests, NULL, NULL);
}
