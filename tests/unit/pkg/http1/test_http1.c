/* SPDX-License-Identifier: Apache-2.0 */
/* test_http1.c - pkg/http1's request-head parser: what it takes, what it
 * refuses (the framing tricks of request smuggling), and its bounds. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "http1/http1.h"

static h1_result_t parse(const char *s, h1_request_t *r)
{
    return h1_parse_request(s, strlen(s), 4096, r);
}

static void slice_is(h1_str_t s, const char *want)
{
    assert_non_null(s.p);
    assert_int_equal(s.len, strlen(want));
    assert_memory_equal(s.p, want, s.len);
}

static void request_line_and_fields(void **state)
{
    h1_request_t r;
    const char *req = "POST /webhooks?x=1&y HTTP/1.1\r\nHost: a\r\n"
                      "Content-Length:  5 \r\nX-Sig:\tv1=ab \t\r\nEmpty:\r\n\r\nhello";

    assert_int_equal(parse(req, &r), H1_OK);
    slice_is(r.method, "POST");
    slice_is(r.path, "/webhooks");
    slice_is(r.query, "x=1&y");
    assert_int_equal(r.minor_version, 1);
    assert_int_equal(r.head_len, strlen(req) - 5);
    assert_true(r.has_content_length);
    assert_int_equal(r.content_length, 5);
    assert_false(r.transfer_encoding);
    assert_int_equal(r.n_headers, 4);
    slice_is(h1_header_find(&r, "x-sig")->value, "v1=ab");
    assert_int_equal(h1_header_find(&r, "EMPTY")->value.len, 0);
    assert_null(h1_header_find(&r, "Host2"));
    assert_true(h1_str_is(r.method, "POST"));
    assert_false(h1_str_is(r.method, "POS"));
}

static void no_query_and_leading_empty_lines(void **state)
{
    h1_request_t r;

    assert_int_equal(parse("\r\n\r\nGET / HTTP/1.0\r\n\r\n", &r), H1_OK);
    slice_is(r.path, "/");
    assert_null(r.query.p);
    assert_int_equal(r.minor_version, 0);
    assert_int_equal(r.head_len, 4 + strlen("GET / HTTP/1.0\r\n\r\n"));
    assert_int_equal(parse("GET /a? HTTP/1.1\r\n\r\n", &r), H1_OK);
    assert_non_null(r.query.p);
    assert_int_equal(r.query.len, 0);
}

static void keep_alive_by_version_and_connection(void **state)
{
    static const struct {
        const char *req;
        bool keep;
    } rows[] = {
        {"GET / HTTP/1.1\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nConnection: Upgrade, CLOSE\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nConnection: closer\r\n\r\n", true},
        {"GET / HTTP/1.0\r\n\r\n", false},
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
        {"GET / HTTP/1.0\r\nConnection: te , Keep-Alive\r\n\r\n", true},
    };
    h1_request_t r;

    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(parse(rows[i].req, &r), H1_OK);
        if (r.keep_alive != rows[i].keep)
            fail_msg("row %zu: keep_alive %d", i, r.keep_alive);
    }
}

/* Each row is malformed in one way; all but the first two are framing tricks
 * that let a server and a proxy disagree on where a request ends. */
static void malformed_heads_are_400(void **state)
{
    static const char *const rows[] = {
        "GET /\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET x HTTP/1.1\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length:\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
    };
    h1_request_t r;

    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (parse(rows[i], &r) != H1_BAD)
            fail_msg("row %zu was not refused: %s", i, rows[i]);
}

static void nul_in_head_is_400(void **state)
{
    static const char req[] = "GET /a\0b HTTP/1.1\r\n\r\n";
    h1_request_t r;

    assert_int_equal(h1_parse_request(req, sizeof req - 1, 4096, &r), H1_BAD);
}

static void same_content_length_twice_and_transfer_encoding(void **state)
{
    h1_request_t r;

    assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n", &r),
                     H1_OK);
    assert_int_equal(r.content_length, 7);
    assert_int_equal(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r), H1_OK);
    assert_true(r.transfer_encoding);
    assert_false(r.has_content_length);
}

static void incomplete_then_too_large(void **state)
{
    char big[600];
    h1_request_t r;

    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n", &r), H1_INCOMPLETE);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n\r", &r), H1_INCOMPLETE);
    assert_int_equal(parse("", &r), H1_INCOMPLETE);
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /", 5);
    /* No end of head within max_head bytes. */
    assert_int_equal(h1_parse_request(big, sizeof big, 512, &r), H1_TOO_LARGE);
    assert_int_equal(h1_parse_request(big, 100, 512, &r), H1_INCOMPLETE);
    /* A complete head one byte longer than the bound. */
    const char *req = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_int_equal(h1_parse_request(req, strlen(req), strlen(req), &r), H1_OK);
    assert_int_equal(h1_parse_request(req, strlen(req), strlen(req) - 1, &r), H1_TOO_LARGE);
}

static void too_many_fields_is_431(void **state)
{
    char req[4096];
    size_t n = (size_t)snprintf(req, sizeof req, "GET / HTTP/1.1\r\n");
    h1_request_t r;

    for (int i = 0; i <= H1_MAX_HEADERS; i++)
        n += (size_t)snprintf(req + n, sizeof req - n, "X-%d: v\r\n", i);
    snprintf(req + n, sizeof req - n, "\r\n");
    assert_int_equal(parse(req, &r), H1_TOO_LARGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_line_and_fields),
        cmocka_unit_test(no_query_and_leading_empty_lines),
        cmocka_unit_test(keep_alive_by_version_and_connection),
        cmocka_unit_test(malformed_heads_are_400),
        cmocka_unit_test(nul_in_head_is_400),
        cmocka_unit_test(same_content_length_twice_and_transfer_encoding),
        cmocka_unit_test(incomplete_then_too_large),
        cmocka_unit_test(too_many_fields_is_431),
    };
    return cmocka_run_group_tests_name("http1", tests, NULL, NULL);
}
