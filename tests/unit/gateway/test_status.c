/* SPDX-License-Identifier: Apache-2.0 */
/* test_status.c - gateway/status.c: the error body (google.rpc.Status in
 * protojson) and its details: the gateway's ErrorInfo and RetryInfo, and
 * what it keeps of an upstream's Status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "google/rpc/error_details.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "status.h"

/* protobuf-c strings are char *; these literals are never written to. */
#define S(lit) ((char *)(lit))

#define TYPE(name) "{\"@type\":\"type.googleapis.com/google.rpc." name "\""
/* The ErrorInfo of an answer the gateway decides, with no metadata. */
#define INFO_OF(reason)                                                                            \
    TYPE("ErrorInfo")                                                                              \
    ",\"reason\":\"" reason "\",\"domain\":\"gateway.shopmicro\",\"metadata\":{"                   \
    "}}"

/* The details of an answer the gateway decides without a reason of its
 * own: one ErrorInfo named after the code. */
static const char *const code_details[] = {
    [3] = ",\"details\":[" INFO_OF("INVALID_ARGUMENT") "]}",
    [5] = ",\"details\":[" INFO_OF("NOT_FOUND") "]}",
    [12] = ",\"details\":[" INFO_OF("UNIMPLEMENTED") "]}",
    [14] = ",\"details\":[" INFO_OF("UNAVAILABLE") "]}",
};

/* want: the body up to the end of its message; the details are the code's. */
static void body_of(int code, const char *msg, const char *want)
{
    char buf[1024], whole[1024];
    size_t n = gw_error_body(buf, sizeof buf, &(gw_error_t){.code = code, .message = msg});

    snprintf(whole, sizeof whole, "%s%s", want, code_details[code]);
    assert_string_equal(buf, whole);
    assert_int_equal(n, strlen(whole));
}

static void error_body_is_compact_status(void **state)
{
    (void)state;
    body_of(5, "Not Found", "{\"code\":5,\"message\":\"Not Found\"");
    body_of(12, "Method Not Allowed", "{\"code\":12,\"message\":\"Method Not Allowed\"");
    body_of(3, "", "{\"code\":3,\"message\":\"\"");
}

static void error_body_escapes_like_protojson(void **state)
{
    (void)state;
    body_of(3, "a\"b\\c", "{\"code\":3,\"message\":\"a\\\"b\\\\c\"");
    body_of(3, "l1\nl2\tx\r\b\f", "{\"code\":3,\"message\":\"l1\\nl2\\tx\\r\\b\\f\"");
    body_of(3, "\x01\x1f", "{\"code\":3,\"message\":\"\\u0001\\u001f\"");
    /* no HTML escaping; valid UTF-8 copied; DEL copied */
    body_of(3, "<a&b> caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \x7f",
            "{\"code\":3,\"message\":\"<a&b> caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \x7f\"");
}

static void error_body_replaces_invalid_utf8(void **state)
{
    (void)state;
    /* a lone continuation byte, a truncated sequence, an overlong form, a
     * surrogate and a byte that never occurs: one U+FFFD per bad byte */
    body_of(3,
            "a\x80"
            "b",
            "{\"code\":3,\"message\":\"a\xef\xbf\xbd"
            "b\"");
    body_of(3, "\xc3", "{\"code\":3,\"message\":\"\xef\xbf\xbd\"");
    body_of(3, "\xc0\xaf", "{\"code\":3,\"message\":\"\xef\xbf\xbd\xef\xbf\xbd\"");
    body_of(3, "\xed\xa0\x80", "{\"code\":3,\"message\":\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    body_of(3, "\xff", "{\"code\":3,\"message\":\"\xef\xbf\xbd\"");
}

static void error_body_sizes_like_snprintf(void **state)
{
    const char *want =
        "{\"code\":14,\"message\":\"circuit open\",\"details\":[" INFO_OF("UNAVAILABLE") "]}";
    const gw_error_t e = {.code = 14, .message = "circuit open"};
    char small[10];
    size_t n;

    (void)state;
    n = gw_error_body(NULL, 0, &e);
    assert_int_equal(n, strlen(want));
    n = gw_error_body(small, sizeof small, &e);
    assert_int_equal(n, strlen(want));
    assert_string_equal(small, "{\"code\":1"); /* truncated, NUL-terminated */
}

static void json_escape_appends(void **state)
{
    char buf[32] = "x=";
    size_t n = gw_json_escape(buf, sizeof buf, 2, "a\"b", 3);

    (void)state;
    assert_int_equal(n, 6);
    assert_string_equal(buf, "x=a\\\"b");
}

static void expect_body(const gw_error_t *e, const char *want)
{
    char buf[2048];
    size_t n = gw_error_body(buf, sizeof buf, e);

    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
}

static void gateway_reason_and_upstream_in_error_info(void **state)
{
    (void)state;
    expect_body(
        &(gw_error_t){
            .code = 14, .message = "circuit open", .reason = "BREAKER_OPEN", .upstream = "catalog"},
        "{\"code\":14,\"message\":\"circuit open\",\"details\":[" TYPE(
            "ErrorInfo") ",\"reason\":\"BREAKER_OPEN\",\"domain\":\"gateway.shopmicro\","
                         "\"metadata\":{\"upstream\":\"catalog\"}}]}");
}

static void retry_info_is_the_retry_after_wait(void **state)
{
    (void)state;
    expect_body(&(gw_error_t){.status = 429,
                              .code = 8,
                              .message = "too many requests",
                              .reason = "RATE_LIMITED",
                              .retry_after_s = 7},
                "{\"code\":8,\"message\":\"too many requests\",\"details\":[" INFO_OF(
                    "RATE_LIMITED") "," TYPE("RetryInfo") ",\"retryDelay\":\"7s\"}]}");
}

/* A google.rpc.Status as an upstream packs it: an ErrorInfo with two
 * metadata entries out of order, a RetryInfo of 1.5 s, a BadRequest, and a
 * detail of a type the gateway does not know. */
static void upstream_status(rpc_status_details_t *out, const char *reason)
{
    Google__Rpc__ErrorInfo__MetadataEntry m1 = GOOGLE__RPC__ERROR_INFO__METADATA_ENTRY__INIT,
                                          m2 = GOOGLE__RPC__ERROR_INFO__METADATA_ENTRY__INIT;
    Google__Rpc__ErrorInfo__MetadataEntry *meta[] = {&m1, &m2};
    Google__Rpc__ErrorInfo info = GOOGLE__RPC__ERROR_INFO__INIT;
    Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
    Google__Rpc__RetryInfo retry = GOOGLE__RPC__RETRY_INFO__INIT;
    Google__Rpc__BadRequest__FieldViolation fv = GOOGLE__RPC__BAD_REQUEST__FIELD_VIOLATION__INIT;
    Google__Rpc__BadRequest__FieldViolation *fvs[] = {&fv};
    Google__Rpc__BadRequest bad = GOOGLE__RPC__BAD_REQUEST__INIT;
    uint8_t b_info[256], b_retry[64], b_bad[256];
    Google__Protobuf__Any any[4] = {GOOGLE__PROTOBUF__ANY__INIT, GOOGLE__PROTOBUF__ANY__INIT,
                                    GOOGLE__PROTOBUF__ANY__INIT, GOOGLE__PROTOBUF__ANY__INIT};
    Google__Protobuf__Any *anys[] = {&any[0], &any[1], &any[2], &any[3]};
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;

    m1.key = S("product_id"), m1.value = S("p-\"1\"");
    m2.key = S("dependency"), m2.value = S("postgres");
    info.reason = (char *)reason, info.domain = S("catalog.shopmicro");
    info.metadata = meta, info.n_metadata = 2;
    d.seconds = 1, d.nanos = 500000000, retry.retry_delay = &d;
    fv.field = S("items[2].quantity"), fv.description = S("items[2].quantity must be 1-1000");
    bad.field_violations = fvs, bad.n_field_violations = 1;
    any[0].type_url = S("type.googleapis.com/google.rpc.RetryInfo");
    any[0].value = (ProtobufCBinaryData){protobuf_c_message_pack(&retry.base, b_retry), b_retry};
    any[1].type_url = S("type.googleapis.com/google.rpc.ErrorInfo");
    any[1].value = (ProtobufCBinaryData){protobuf_c_message_pack(&info.base, b_info), b_info};
    any[2].type_url = S("type.googleapis.com/example.v1.Unknown");
    any[2].value = (ProtobufCBinaryData){3, (uint8_t *)"\x08\x01\x10"};
    any[3].type_url = S("type.googleapis.com/google.rpc.BadRequest");
    any[3].value = (ProtobufCBinaryData){protobuf_c_message_pack(&bad.base, b_bad), b_bad};
    st.code = 3, st.message = S("items[2].quantity must be 1-1000");
    st.details = anys, st.n_details = 4;
    assert_true(protobuf_c_message_get_packed_size(&st.base) <= sizeof out->bytes);
    out->len = protobuf_c_message_pack(&st.base, out->bytes);
}

#define UPSTREAM_INFO(reason)                                                                      \
    TYPE("ErrorInfo")                                                                              \
    ",\"reason\":\"" reason "\",\"domain\":\"catalog.shopmicro\","                                 \
    "\"metadata\":{\"dependency\":\"postgres\",\"product_id\":\"p-\\\"1\\\"\"}}"
#define UPSTREAM_BAD                                                                               \
    TYPE("BadRequest")                                                                             \
    ",\"fieldViolations\":[{\"field\":\"items[2].quantity\","                                      \
    "\"description\":\"items[2].quantity must be 1-1000\"}]}"

static void upstream_error_info_and_bad_request_are_kept(void **state)
{
    rpc_status_details_t d;

    (void)state;
    upstream_status(&d, "QUANTITY_OUT_OF_RANGE");
    /* Its ErrorInfo first, metadata in key order; its BadRequest; not its
     * RetryInfo (no Retry-After here) nor the unknown type. */
    expect_body(
        &(gw_error_t){.code = 3,
                      .message = "items[2].quantity must be 1-1000",
                      .upstream = "order",
                      .details = &d},
        "{\"code\":3,\"message\":\"items[2].quantity must be 1-1000\",\"details\":[" UPSTREAM_INFO(
            "QUANTITY_OUT_OF_RANGE") "," UPSTREAM_BAD "]}");
    /* With a Retry-After, the RetryInfo is the gateway's: the same wait. */
    expect_body(
        &(gw_error_t){
            .code = 3, .message = "m", .upstream = "order", .retry_after_s = 2, .details = &d},
        "{\"code\":3,\"message\":\"m\",\"details\":[" UPSTREAM_INFO(
            "QUANTITY_OUT_OF_RANGE") "," UPSTREAM_BAD
                                     "," TYPE("RetryInfo") ",\"retryDelay\":\"2s\"}]}");
}

static void gateway_decision_replaces_the_upstream_error_info(void **state)
{
    rpc_status_details_t d;

    (void)state;
    upstream_status(&d, "DEPENDENCY_UNAVAILABLE");
    expect_body(&(gw_error_t){.code = 14,
                              .message = "m",
                              .reason = "OUTCOME_UNKNOWN",
                              .upstream = "order",
                              .details = &d},
                "{\"code\":14,\"message\":\"m\",\"details\":[" TYPE(
                    "ErrorInfo") ",\"reason\":\"OUTCOME_UNKNOWN\",\"domain\":\"gateway.shopmicro\","
                                 "\"metadata\":{\"upstream\":\"order\"}}," UPSTREAM_BAD "]}");
}

static void undecodable_upstream_status_is_ignored(void **state)
{
    rpc_status_details_t d = {.len = 5};

    (void)state;
    memcpy(d.bytes, "\xff\xff\xff\xff\xff", 5);
    expect_body(&(gw_error_t){.code = 14, .message = "m", .details = &d},
                "{\"code\":14,\"message\":\"m\",\"details\":[" INFO_OF("UNAVAILABLE") "]}");
}

/* What an upstream writes is escaped like the gateway's own text: a body
 * is valid JSON whatever bytes came. */
static void upstream_strings_are_escaped(void **state)
{
    Google__Rpc__ErrorInfo info = GOOGLE__RPC__ERROR_INFO__INIT;
    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT, *anys[] = {&any};
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    rpc_status_details_t d;
    uint8_t b[64];

    (void)state;
    info.reason = S("A\"\n"), info.domain = S("d\xff");
    any.type_url = S("type.googleapis.com/google.rpc.ErrorInfo");
    any.value = (ProtobufCBinaryData){protobuf_c_message_pack(&info.base, b), b};
    st.details = anys, st.n_details = 1;
    d.len = protobuf_c_message_pack(&st.base, d.bytes);
    expect_body(&(gw_error_t){.code = 13, .message = "m", .details = &d},
                "{\"code\":13,\"message\":\"m\",\"details\":[" TYPE(
                    "ErrorInfo") ",\"reason\":\"A\\\"\\n\",\"domain\":\"d\xef\xbf\xbd\","
                                 "\"metadata\":{}}]}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_body_is_compact_status),
        cmocka_unit_test(error_body_escapes_like_protojson),
        cmocka_unit_test(error_body_replaces_invalid_utf8),
        cmocka_unit_test(error_body_sizes_like_snprintf),
        cmocka_unit_test(json_escape_appends),
        cmocka_unit_test(gateway_reason_and_upstream_in_error_info),
        cmocka_unit_test(retry_info_is_the_retry_after_wait),
        cmocka_unit_test(upstream_error_info_and_bad_request_are_kept),
        cmocka_unit_test(gateway_decision_replaces_the_upstream_error_info),
        cmocka_unit_test(undecodable_upstream_status_is_ignored),
        cmocka_unit_test(upstream_strings_are_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
