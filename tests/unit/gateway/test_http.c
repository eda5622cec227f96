/* SPDX-License-Identifier: Apache-2.0 */
/* test_http.c - gateway/http.c: the status table, Grpc-Timeout (and its
 * error bodies), request ids, Retry-After, the HTTP/1 framing check and
 * idempotency keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "http.h"

/* The ErrorInfo of an answer the gateway decides, named after its code. */
#define INFO_OF(reason)                                                                            \
    "{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"" reason                 \
    "\",\"domain\":\"gateway.shopmicro\",\"metadata\":{}}"

static void status_table_matches_grpc_gateway(void **state)
{
    /* runtime/errors.go HTTPStatusFromCode, CANCELLED as since v2.13. */
    static const int want[17] = {200, 499, 500, 400, 504, 404, 409, 403, 429,
                                 400, 409, 400, 501, 500, 503, 500, 401};

    (void)state;
    for (int code = 0; code <= 16; code++)
        assert_int_equal(gw_http_status_from_grpc(code), want[code]);
    assert_int_equal(gw_http_status_from_grpc(-1), 500);
    assert_int_equal(gw_http_status_from_grpc(17), 500);
    assert_int_equal(gw_http_status_from_grpc(1000), 500);
}

static void status_table_agrees_with_svc_errors(void **state)
{
    (void)state;
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_ENOTFOUND)), 404);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EINVAL)), 400);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EPRECOND)), 400);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_ERANGE)), 400);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EEXIST)), 409);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EABORTED)), 409);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EEXHAUSTED)), 429);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EUNAVAIL)), 503);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_ETIMEDOUT)), 504);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EUNIMPL)), 501);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_ECANCELLED)), 499);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EPERM)), 403);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EUNAUTH)), 401);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EINTERNAL)), 500);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EUNKNOWN)), 500);
    assert_int_equal(gw_http_status_from_grpc(svc_err_to_grpc(SVC_EDATALOSS)), 500);
}

static void reasons(void **state)
{
    (void)state;
    assert_string_equal(gw_http_reason(404), "Not Found");
    assert_string_equal(gw_http_reason(501), "Not Implemented");
    assert_string_equal(gw_http_reason(499), "Client Closed Request");
    assert_string_equal(gw_http_reason(413), "Request Entity Too Large");
    assert_string_equal(gw_http_reason(431), "Request Header Fields Too Large");
    assert_string_equal(gw_http_reason(299), "Unknown");
}

static void timeout_ok(const char *s, int64_t want)
{
    int64_t got = 42;

    if (!gw_grpc_timeout_parse(s, strlen(s), &got))
        fail_msg("\"%s\" was rejected", s);
    if (got != want)
        fail_msg("\"%s\": got %lld ns, want %lld", s, (long long)got, (long long)want);
}

static void timeout_bad(const char *s)
{
    int64_t got = 42;

    if (gw_grpc_timeout_parse(s, strlen(s), &got))
        fail_msg("\"%s\" was accepted (%lld ns)", s, (long long)got);
}

static void grpc_timeout_units(void **state)
{
    (void)state;
    timeout_ok("1H", INT64_C(3600000000000));
    timeout_ok("2M", INT64_C(120000000000));
    timeout_ok("5S", INT64_C(5000000000));
    timeout_ok("500m", INT64_C(500000000));
    timeout_ok("250u", INT64_C(250000));
    timeout_ok("7n", 7);
    timeout_ok("0S", 0);
    timeout_ok("00000001S", INT64_C(1000000000));
}

static void grpc_timeout_signs_and_limits(void **state)
{
    (void)state;
    /* strconv.ParseInt accepts a sign; a negative timeout is already expired */
    timeout_ok("+5S", INT64_C(5000000000));
    timeout_ok("-5S", INT64_C(-5000000000));
    timeout_ok("9223372036854775807n", INT64_MAX);
    timeout_ok("-9223372036854775808n", INT64_MIN);
    /* in range for ParseInt, overflowing once multiplied: saturated */
    timeout_ok("9223372036854775807H", INT64_MAX);
    timeout_ok("-9223372036854775807S", INT64_MIN);
    timeout_bad("9223372036854775808n"); /* ParseInt range error */
    timeout_bad("-9223372036854775809n");
    timeout_bad("99999999999999999999999S");
}

static void grpc_timeout_malformed(void **state)
{
    (void)state;
    timeout_bad("");
    timeout_bad("S");
    timeout_bad("5");   /* no unit */
    timeout_bad("5s");  /* units are case-sensitive */
    timeout_bad("5ms"); /* "s" is no unit */
    timeout_bad("5x");
    timeout_bad(" 5S");
    timeout_bad("5 S");
    timeout_bad("5.5S");
    timeout_bad("+S");
    timeout_bad("-m");
    timeout_bad("0x10S");
    timeout_bad("1e3m");
}

/* The table of Grpc-Timeout values against grpc-gateway v2 (runtime/
 * context.go: timeoutDecode, then context.WithTimeout unless it is 0). The
 * request arrived at START and is forwarded 50 us later, at NOW. */
#define START       (UINT64_C(1000) * 1000000000)
#define NOW         (START + 50000)
#define AT(ns)      (START + (uint64_t)(ns))
#define DEFAULT_MS  10000
#define NO_DEADLINE SVC_DEADLINE_NONE
#define REFUSED     0 /* no deadline to compare: an answer replaces the call */

typedef struct timeout_row {
    const char *value; /* NULL: no header */
    gw_timeout_verdict_t verdict;
    uint64_t deadline;
} timeout_row_t;

static const timeout_row_t timeout_table[] = {
    /* no value: the configured default (grpc-gateway's Header.Get gives "") */
    {NULL, GW_TIMEOUT_OK, AT(DEFAULT_MS *SVC_NS_PER_MS)},
    {"", GW_TIMEOUT_OK, AT(DEFAULT_MS *SVC_NS_PER_MS)},
    /* zero in every unit and spelling: no deadline at all, not the default */
    {"0H", GW_TIMEOUT_OK, NO_DEADLINE},
    {"0M", GW_TIMEOUT_OK, NO_DEADLINE},
    {"0S", GW_TIMEOUT_OK, NO_DEADLINE},
    {"0m", GW_TIMEOUT_OK, NO_DEADLINE},
    {"0u", GW_TIMEOUT_OK, NO_DEADLINE},
    {"0n", GW_TIMEOUT_OK, NO_DEADLINE},
    {"-0S", GW_TIMEOUT_OK, NO_DEADLINE},
    {"+0m", GW_TIMEOUT_OK, NO_DEADLINE},
    {"0000000000n", GW_TIMEOUT_OK, NO_DEADLINE},
    /* already expired: a context born done, or done before the call */
    {"1n", GW_TIMEOUT_EXPIRED, REFUSED},
    {"-1n", GW_TIMEOUT_EXPIRED, REFUSED},
    {"-1S", GW_TIMEOUT_EXPIRED, REFUSED},
    {"-5m", GW_TIMEOUT_EXPIRED, REFUSED},
    {"-2H", GW_TIMEOUT_EXPIRED, REFUSED},
    {"50u", GW_TIMEOUT_EXPIRED, REFUSED}, /* ends at NOW: Go's "dur <= 0" */
    {"-9223372036854775808n", GW_TIMEOUT_EXPIRED, REFUSED},
    {"-9223372036854775807H", GW_TIMEOUT_EXPIRED, REFUSED},
    /* a deadline from the request's arrival, in each unit */
    {"51u", GW_TIMEOUT_OK, AT(51000)},
    {"100000007n", GW_TIMEOUT_OK, AT(100000007)},
    {"250u", GW_TIMEOUT_OK, AT(250000)},
    {"500m", GW_TIMEOUT_OK, AT(500000000)},
    {"5S", GW_TIMEOUT_OK, AT(INT64_C(5000000000))},
    {"+5S", GW_TIMEOUT_OK, AT(INT64_C(5000000000))},
    {"00000001S", GW_TIMEOUT_OK, AT(INT64_C(1000000000))},
    {"2M", GW_TIMEOUT_OK, AT(INT64_C(120000000000))},
    {"17H", GW_TIMEOUT_OK, AT(INT64_C(61200000000000))},
    /* more than gRPC's 8 digits: ParseInt takes them, so do we */
    {"123456789S", GW_TIMEOUT_OK, AT(INT64_C(123456789000000000))},
    /* huge: clamped to the longest deadline (Go's product wraps, e.g. to -1h) */
    {"9223372036854775807n", GW_TIMEOUT_OK, AT(INT64_MAX)},
    {"9223372036854775807H", GW_TIMEOUT_OK, AT(INT64_MAX)},
    {"2562048H", GW_TIMEOUT_OK, AT(INT64_MAX)},
    /* malformed: 400, as timeoutDecode's and ParseInt's errors */
    {"5", GW_TIMEOUT_INVALID, REFUSED},
    {"S", GW_TIMEOUT_INVALID, REFUSED},
    {"5x", GW_TIMEOUT_INVALID, REFUSED},
    {"5s", GW_TIMEOUT_INVALID, REFUSED},
    {"5ms", GW_TIMEOUT_INVALID, REFUSED},
    {" 5S", GW_TIMEOUT_INVALID, REFUSED},
    {"5 S", GW_TIMEOUT_INVALID, REFUSED},
    {"5.5S", GW_TIMEOUT_INVALID, REFUSED},
    {"-m", GW_TIMEOUT_INVALID, REFUSED},
    {"0x10S", GW_TIMEOUT_INVALID, REFUSED},
    {"1e3m", GW_TIMEOUT_INVALID, REFUSED},
    {"1_000m", GW_TIMEOUT_INVALID, REFUSED},
    {"9223372036854775808n", GW_TIMEOUT_INVALID, REFUSED},
    {"-9223372036854775809n", GW_TIMEOUT_INVALID, REFUSED},
    {"99999999999999999999999S", GW_TIMEOUT_INVALID, REFUSED},
};

/* "none" or "START+<ns>", for a failure's message. */
static const char *deadline_str(uint64_t d, char out[32])
{
    if (d == NO_DEADLINE)
        return "none";
    snprintf(out, 32, "START%+lld ns", (long long)(d - START));
    return out;
}

/* The body the gateway answers a refused row with. */
static void expect_answer(const timeout_row_t *row, const char *errbuf)
{
    char body[512], want[512];

    if (row->verdict == GW_TIMEOUT_EXPIRED)
        snprintf(want, sizeof want,
                 "{\"code\":4,\"message\":\"deadline exceeded\",\"details\":[" INFO_OF(
                     "DEADLINE_EXCEEDED") "]}");
    else
        snprintf(want, sizeof want,
                 "{\"code\":3,\"message\":\"invalid grpc-timeout: %s\",\"details\":[" INFO_OF(
                     "INVALID_ARGUMENT") "]}",
                 row->value);
    gw_error_body(body, sizeof body, &(gw_error_t){.code = (int)row->verdict, .message = errbuf});
    if (strcmp(body, want) != 0)
        fail_msg("\"%s\": body %s, want %s", row->value, body, want);
    assert_int_equal(gw_http_status_from_grpc((int)row->verdict),
                     row->verdict == GW_TIMEOUT_EXPIRED ? 504 : 400);
}

static void grpc_timeout_table_matches_grpc_gateway(void **state)
{
    size_t failed = 0;

    (void)state;
    for (size_t i = 0; i < sizeof timeout_table / sizeof timeout_table[0]; i++) {
        const timeout_row_t *row = &timeout_table[i];
        const char *v = row->value != NULL ? row->value : "(none)";
        size_t len = row->value != NULL ? strlen(row->value) : 0;
        uint64_t deadline = 42;
        char errbuf[SVC_ERRBUF_LEN] = "";
        gw_timeout_verdict_t got =
            gw_grpc_timeout_deadline(row->value, len, DEFAULT_MS, START, NOW, &deadline, errbuf);

        if (got != row->verdict) {
            print_error("\"%s\": verdict %d, want %d\n", v, (int)got, (int)row->verdict);
            failed++;
        } else if (got == GW_TIMEOUT_OK && deadline != row->deadline) {
            char a[32], b[32];
            print_error("\"%s\": deadline %s, want %s\n", v, deadline_str(deadline, a),
                        deadline_str(row->deadline, b));
            failed++;
        } else if (got != GW_TIMEOUT_OK) {
            expect_answer(row, errbuf);
        }
    }
    if (failed > 0)
        fail_msg("%zu of %zu Grpc-Timeout rows differ from grpc-gateway", failed,
                 sizeof timeout_table / sizeof timeout_table[0]);
}

static void request_id_sanitising(void **state)
{
    char out[GW_REQUEST_ID_MAX + 1];
    char longid[200];

    (void)state;
    assert_int_equal(gw_request_id_sanitize("abc-123_X.Y:z", 13, out), 13);
    assert_string_equal(out, "abc-123_X.Y:z");
    assert_int_equal(gw_request_id_sanitize("a b\"c\n\\d", 8, out), 4);
    assert_string_equal(out, "abcd");
    assert_int_equal(gw_request_id_sanitize("  \"\"\t", 5, out), 0);
    assert_string_equal(out, "");
    memset(longid, 'a', sizeof longid);
    assert_int_equal(gw_request_id_sanitize(longid, sizeof longid, out), GW_REQUEST_ID_MAX);
    assert_int_equal(strlen(out), GW_REQUEST_ID_MAX);
    assert_int_equal(gw_request_id_sanitize("550e8400-e29b-41d4-a716-446655440000", 36, out), 36);
}

static void retry_after_rounds_up(void **state)
{
    (void)state;
    assert_int_equal(gw_retry_after_seconds(0), 1);
    assert_int_equal(gw_retry_after_seconds(1), 1);
    assert_int_equal(gw_retry_after_seconds(999), 1);
    assert_int_equal(gw_retry_after_seconds(1000), 1);
    assert_int_equal(gw_retry_after_seconds(1001), 2);
    assert_int_equal(gw_retry_after_seconds(9500), 10);
    assert_int_equal(gw_retry_after_seconds(10000), 10);
}

/* One request head and what the framing check must say of it: NULL for
 * "accepted", else a part of the message. */
typedef struct framing_case {
    const char *head;
    bool http10;
    const char *refused;
} framing_case_t;

#define REQ "POST /v1/products HTTP/1.1\r\nHost: x\r\n"

static const framing_case_t framing_cases[] = {
    {REQ "Content-Length: 46\r\n\r\n{}", false, NULL},
    {REQ "Content-Length: 46\r\nContent-Length: 46\r\n\r\n", false, NULL},
    {REQ "content-length:  46 \t\r\nCONTENT-LENGTH: 46\r\n\r\n", false, NULL},
    {REQ "Transfer-Encoding: chunked\r\n\r\n5\r\n", false, NULL},
    {"GET / HTTP/1.1\nHost: x\nX-A: b c\n\n", false, NULL}, /* bare LF, as h2o takes it */
    {"GET / HTTP/1.0\r\n\r\n", true, NULL},
    {REQ "Content-Length: 46\r\nContent-Length: 3\r\n\r\n", false,
     "conflicting Content-Length headers: 46 and 3"},
    {REQ "Content-Length: 3\r\nX-A: b\r\ncontent-length: 46\r\n\r\n", false,
     "conflicting Content-Length headers: 3 and 46"},
    {REQ "Content-Length: 46\r\nContent-Length: 046\r\n\r\n", false, "conflicting"},
    {REQ "Content-Length: 3, 46\r\n\r\n", false, "one decimal number, not \"3, 46\""},
    {REQ "Content-Length: 46\r\nContent-Length: 46, 46\r\n\r\n", false, "not \"46, 46\""},
    {REQ "Content-Length: +3\r\n\r\n", false, "one decimal number"},
    {REQ "Content-Length:\r\n\r\n", false, "one decimal number, not \"\""},
    {REQ "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", false, "both"},
    {REQ "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", false, "ambiguous"},
    {REQ "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", false,
     "more than one Transfer-Encoding"},
    {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", true, "HTTP/1.0"},
    {REQ "X-A: b\r\n c\r\n\r\n", false, "obsolete line folding"},
    {REQ "Content-Length: 3\r\n\t46\r\n\r\n", false, "obsolete line folding"},
    {REQ "X A: b\r\n\r\n", false, "invalid header name \"X A\""},
    {REQ "Content-Length : 3\r\n\r\n", false, "invalid header name \"Content-Length \""},
    {REQ "X-A\t: b\r\n\r\n", false, "invalid header name"},
    {REQ "X-A(b): c\r\n\r\n", false, "invalid header name"},
    {REQ ": b\r\n\r\n", false, "without a name"},
    {REQ "X-A b\r\n\r\n", false, "invalid header name"},
    {REQ "X-A: b\r\n", false, "no end"},
    {"GET / HTTP/1.1", false, "no end"},
};

static void framing_rules_of_rfc9112(void **state)
{
    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(framing_cases); i++) {
        const framing_case_t *c = &framing_cases[i];
        char err[SVC_ERRBUF_LEN] = "";
        bool ok = gw_http1_framing_check(c->head, strlen(c->head), c->http10, err);

        if (c->refused == NULL && !ok)
            fail_msg("case %zu refused (%s): %s", i, err, c->head);
        if (c->refused != NULL && (ok || strstr(err, c->refused) == NULL))
            fail_msg("case %zu: %s, message \"%s\", want \"%s\": %s", i,
                     ok ? "accepted" : "refused", err, c->refused, c->head);
    }
}

static void framing_reads_only_the_head(void **state)
{
    /* What follows the empty line is the body: header-like text there is
     * not a header, and a head that ends before len is judged alone. */
    static const char h[] = REQ "Content-Length: 40\r\n\r\nContent-Length: 3\r\n X\r\n\r\n";
    char err[SVC_ERRBUF_LEN] = "";

    (void)state;
    assert_true(gw_http1_framing_check(h, sizeof h - 1, false, err));
    /* cut before the empty line: not a complete head */
    assert_false(gw_http1_framing_check(h, strlen(REQ) + 10, false, err));
    assert_non_null(strstr(err, "no end"));
}

static void idempotency_keys(void **state)
{
    char key[SVC_IDEMPOTENCY_KEY_MAX + 2], err[SVC_ERRBUF_LEN] = "";
    char every[0x7e - 0x21 + 1];

    (void)state;
    for (int c = 0x21; c <= 0x7e; c++)
        every[c - 0x21] = (char)c;
    assert_true(gw_idempotency_key_check("Idempotency-Key", every, sizeof every, err));
    memset(key, 'k', sizeof key);
    assert_true(gw_idempotency_key_check("K", key, SVC_IDEMPOTENCY_KEY_MAX, err));
    assert_true(gw_idempotency_key_check("K", "a", 1, err));

    assert_false(
        gw_idempotency_key_check("Idempotency-Key", key, SVC_IDEMPOTENCY_KEY_MAX + 1, err));
    assert_string_equal(err, "Idempotency-Key must be 1-255 printable ASCII characters, not 256 "
                             "bytes");
    assert_false(gw_idempotency_key_check("Idempotency-Key", "", 0, err));
    assert_non_null(strstr(err, "not 0 bytes"));
    assert_false(gw_idempotency_key_check("Idempotency-Key", "\xd0\xba\xd0\xbb", 4, err));
    assert_string_equal(err, "Idempotency-Key must be printable ASCII without spaces "
                             "(0x21-0x7E): byte 0 is 0xD0");
    assert_false(gw_idempotency_key_check("Grpc-Metadata-Idempotency-Key", "a b", 3, err));
    assert_string_equal(err, "Grpc-Metadata-Idempotency-Key must be printable ASCII without "
                             "spaces (0x21-0x7E): byte 1 is 0x20");
    assert_false(gw_idempotency_key_check("K", "ab\x7f", 3, err));
    assert_non_null(strstr(err, "byte 2 is 0x7F"));
    assert_false(gw_idempotency_key_check("K", "a\0b", 3, err));
    assert_non_null(strstr(err, "byte 1 is 0x00"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_table_matches_grpc_gateway),
        cmocka_unit_test(status_table_agrees_with_svc_errors),
        cmocka_unit_test(reasons),
        cmocka_unit_test(grpc_timeout_units),
        cmocka_unit_test(grpc_timeout_signs_and_limits),
        cmocka_unit_test(grpc_timeout_malformed),
        cmocka_unit_test(grpc_timeout_table_matches_grpc_gateway),
        cmocka_unit_test(request_id_sanitising),
        cmocka_unit_test(retry_after_rounds_up),
        cmocka_unit_test(framing_rules_of_rfc9112),
        cmocka_unit_test(framing_reads_only_the_head),
        cmocka_unit_test(idempotency_keys),
    };
    return cmocka_run_group_tests_name("gateway_http", tests, NULL, NULL);
}
