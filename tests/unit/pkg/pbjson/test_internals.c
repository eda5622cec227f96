/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbjson internals with tables of cases: Go's strconv, Go's base64, UTF-8,
 * protojson's integer normalisation and error-text helpers.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "pbj_test.h"

static void parse_int_like_go(void **state)
{
    static const struct {
        const char *s;
        int base;
        unsigned bits;
        pbj__numerr_t r;
        int64_t v;
    } cases[] = {
        {"0", 10, 64, PBJ__NUM_OK, 0},
        {"-0", 10, 64, PBJ__NUM_OK, 0},
        {"+12", 10, 64, PBJ__NUM_OK, 12},
        {"007", 10, 64, PBJ__NUM_OK, 7},
        {"", 10, 64, PBJ__NUM_SYNTAX, 0},
        {"-", 10, 64, PBJ__NUM_SYNTAX, 0},
        {"1_0", 10, 64, PBJ__NUM_SYNTAX, 0},
        {"0x10", 10, 64, PBJ__NUM_SYNTAX, 0},
        {"9223372036854775807", 10, 64, PBJ__NUM_OK, INT64_MAX},
        {"-9223372036854775808", 10, 64, PBJ__NUM_OK, INT64_MIN},
        {"9223372036854775808", 10, 64, PBJ__NUM_RANGE, 0},
        {"-9223372036854775809", 10, 64, PBJ__NUM_RANGE, 0},
        {"2147483647", 10, 32, PBJ__NUM_OK, INT32_MAX},
        {"-2147483648", 10, 32, PBJ__NUM_OK, INT32_MIN},
        {"2147483648", 10, 32, PBJ__NUM_RANGE, 0},
        /* Overflow is found before the junk that follows it, as in Go. */
        {"99999999999x", 10, 32, PBJ__NUM_RANGE, 0},
        {"0x1F", 0, 64, PBJ__NUM_OK, 31},
        {"0X1f", 0, 64, PBJ__NUM_OK, 31},
        {"0o17", 0, 64, PBJ__NUM_OK, 15},
        {"017", 0, 64, PBJ__NUM_OK, 15},
        {"0b101", 0, 64, PBJ__NUM_OK, 5},
        {"-0x8000000000000000", 0, 64, PBJ__NUM_OK, INT64_MIN},
        {"0x_1", 0, 64, PBJ__NUM_OK, 1},
        {"1_000_000", 0, 64, PBJ__NUM_OK, 1000000},
        {"1__0", 0, 64, PBJ__NUM_SYNTAX, 0},
        {"_1", 0, 64, PBJ__NUM_SYNTAX, 0},
        {"1_", 0, 64, PBJ__NUM_SYNTAX, 0},
        {"0x", 0, 64, PBJ__NUM_SYNTAX, 0},
        {"08", 0, 64, PBJ__NUM_SYNTAX, 0},
        {"0b2", 0, 64, PBJ__NUM_SYNTAX, 0},
        {" 1", 0, 64, PBJ__NUM_SYNTAX, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = -1;
        pbj__numerr_t r =
            pbj__parse_int(cases[i].s, strlen(cases[i].s), cases[i].base, cases[i].bits, &v);
        if (r != cases[i].r || (r == PBJ__NUM_OK && v != cases[i].v))
            fail_msg("ParseInt(%s, %d, %u) = %d %lld", cases[i].s, cases[i].base, cases[i].bits,
                     (int)r, (long long)v);
    }
}

static void parse_uint_like_go(void **state)
{
    uint64_t v;

    (void)state;
    assert_int_equal(pbj__parse_uint("18446744073709551615", 20, 10, 64, &v), PBJ__NUM_OK);
    assert_true(v == UINT64_MAX);
    assert_int_equal(pbj__parse_uint("18446744073709551616", 20, 10, 64, &v), PBJ__NUM_RANGE);
    assert_int_equal(pbj__parse_uint("4294967296", 10, 10, 32, &v), PBJ__NUM_RANGE);
    assert_int_equal(pbj__parse_uint("+1", 2, 10, 64, &v), PBJ__NUM_SYNTAX);
    assert_int_equal(pbj__parse_uint("-1", 2, 0, 64, &v), PBJ__NUM_SYNTAX);
    assert_int_equal(pbj__parse_uint("0", 1, 0, 64, &v), PBJ__NUM_OK);
    assert_true(v == 0);
}

static void parse_bool_and_float_like_go(void **state)
{
    static const char *const good[] = {"1.5",  "-1.5",  "+.5",       "1.",     "1e5",
                                       "1E-5", "1_0.5", "0x1p4",     "0x.8p1", "0X1P-2",
                                       "inf",  "+Inf",  "-infinity", "NaN",    "1e400x"};
    double d;
    bool b, nomem;

    (void)state;
    assert_true(pbj__parse_bool("True", 4, &b) && b);
    assert_true(pbj__parse_bool("f", 1, &b) && !b);
    assert_false(pbj__parse_bool("tRUE", 4, &b));
    assert_false(pbj__parse_bool("", 0, &b));
    for (size_t i = 0; i + 1 < sizeof(good) / sizeof(good[0]); i++)
        if (pbj__parse_float(NULL, good[i], strlen(good[i]), 64, &d, &nomem) != PBJ__NUM_OK)
            fail_msg("ParseFloat(%s) failed", good[i]);
    assert_int_equal(pbj__parse_float(NULL, "1e400x", 6, 64, &d, &nomem), PBJ__NUM_SYNTAX);
    assert_int_equal(pbj__parse_float(NULL, "1e400", 5, 64, &d, &nomem), PBJ__NUM_RANGE);
    assert_int_equal(pbj__parse_float(NULL, "1e-400", 6, 64, &d, &nomem), PBJ__NUM_OK);
    assert_true(d == 0);
    assert_int_equal(pbj__parse_float(NULL, "3.5e38", 6, 32, &d, &nomem), PBJ__NUM_RANGE);
    assert_int_equal(pbj__parse_float(NULL, "0x10", 4, 64, &d, &nomem), PBJ__NUM_SYNTAX);
    assert_int_equal(pbj__parse_float(NULL, ".", 1, 64, &d, &nomem), PBJ__NUM_SYNTAX);
    assert_int_equal(pbj__parse_float(NULL, "1e", 2, 64, &d, &nomem), PBJ__NUM_SYNTAX);
    assert_int_equal(pbj__parse_float(NULL, "infinit", 7, 64, &d, &nomem), PBJ__NUM_SYNTAX);
    assert_int_equal(pbj__parse_float(NULL, "_1", 2, 64, &d, &nomem), PBJ__NUM_SYNTAX);
    assert_int_equal(pbj__parse_float(NULL, " 1", 2, 64, &d, &nomem), PBJ__NUM_SYNTAX);
}

static void json_integers(void **state)
{
    static const struct {
        const char *s;
        bool ok, neg;
        uint64_t mag;
    } cases[] = {
        {"0", true, false, 0},
        {"-0", true, false, 0},
        {"0.000", true, false, 0},
        {"0e-99999999999", true, false, 0},
        {"12", true, false, 12},
        {"-12", true, true, 12},
        {"1.5e1", true, false, 15},
        {"1.50e1", true, false, 15},
        {"150e-1", true, false, 15},
        {"1500e-2", true, false, 15},
        {"15e-1", false, false, 0},
        {"1e-1", false, false, 0},
        {"0.5", false, false, 0},
        {"1.5", false, false, 0},
        {"18446744073709551615", true, false, UINT64_MAX},
        {"18446744073709551616", false, false, 0},
        {"1e20", false, false, 0}, /* 21 digits: Go refuses before parsing */
        {"1e19", true, false, 10000000000000000000ull},
        {"1e2147483648", false, false, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool neg = false;
        uint64_t mag = 0;
        bool ok = pbj__json_integer(cases[i].s, strlen(cases[i].s), &neg, &mag);
        if (ok != cases[i].ok || (ok && (neg != cases[i].neg || mag != cases[i].mag)))
            fail_msg("json_integer(%s) = %d %d %llu", cases[i].s, ok, neg, (unsigned long long)mag);
    }
    assert_int_equal(pbj__json_number_len("-0.5e+3,", 8), 7);
    assert_int_equal(pbj__json_number_len("01", 2), 1);
    assert_int_equal(pbj__json_number_len("-", 1), 0);
    assert_int_equal(pbj__json_number_len("1.", 2), 0);
    assert_int_equal(pbj__json_number_len("1e+", 3), 0);
    assert_int_equal(pbj__json_number_len(".5", 2), 0);
}

static void base64_like_go(void **state)
{
    static const struct {
        const char *in;
        bool url, padded, ok;
        const char *out;
    } cases[] = {
        {"", false, true, true, ""},
        {"Zg==", false, true, true, "f"},
        {"Zg", false, false, true, "f"},
        {"Zg", false, true, false, ""},
        {"Zg==", false, false, false, ""},
        {"Z", false, false, false, ""},
        {"Zm9v\r\nYmFy", false, true, true, "foobar"},
        {"Zg=\n=", false, true, true, "f"},
        {"Zg==\n", false, true, true, "f"},
        {"Zg==x", false, true, false, ""},
        {"Z===", false, true, false, ""},
        {"Zm8=", false, true, true, "fo"},
        {"Zm9=", false, true, true, "fo"}, /* unused bits ignored */
        {"-_8=", true, true, true, "\xfb\xff"},
        {"+/8=", true, true, false, ""},
    };
    uint8_t out[32];
    size_t n;
    char enc[16];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool ok = pbj__b64_decode(cases[i].in, strlen(cases[i].in), cases[i].url, cases[i].padded,
                                  out, &n);
        if (ok != cases[i].ok ||
            (ok && (n != strlen(cases[i].out) || memcmp(out, cases[i].out, n) != 0)))
            fail_msg("base64 case %zu (%s): ok=%d n=%zu", i, cases[i].in, ok, n);
    }
    assert_int_equal(pbj__b64_encoded_len(0), 0);
    assert_int_equal(pbj__b64_encoded_len(4), 8);
    pbj__b64_encode((const uint8_t *)"foob", 4, enc);
    assert_memory_equal(enc, "Zm9vYg==", 8);
}

static void utf8(void **state)
{
    (void)state;
    assert_true(pbj__utf8_valid("", 0));
    assert_true(pbj__utf8_valid(
        "a\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 20));
    assert_false(pbj__utf8_valid("\x80", 1));
    assert_false(pbj__utf8_valid("\xc1\xbf", 2));         /* overlong */
    assert_false(pbj__utf8_valid("\xe0\x9f\xbf", 3));     /* overlong */
    assert_false(pbj__utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(pbj__utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(pbj__utf8_valid("\xf5\x80\x80\x80", 4));
    assert_false(pbj__utf8_valid("\xe2\x82", 2)); /* truncated */
}

static void error_text_stays_utf8(void **state)
{
    char buf[SVC_ERRBUF_LEN], q[PBJ__ERR_PIECE];
    char long_euro[400] = "";

    (void)state;
    for (int i = 0; i < 100; i++)
        strcat(long_euro, "\xe2\x82\xac");
    pbj__errf(buf, "x%s", long_euro); /* cut by the 256-byte buffer */
    assert_true(pbj__utf8_valid(buf, strlen(buf)));
    assert_true(strlen(buf) >= SVC_ERRBUF_LEN - 4);
    pbj__quote("a\"\\\n\x01\xff\xc3\xa9", 8, q, sizeof(q));
    assert_string_equal(q, "\"a\\\"\\\\\\n\\x01\\xff\xc3\xa9\"");
    pbj__quote(long_euro, strlen(long_euro), q, sizeof(q));
    assert_true(pbj__utf8_valid(q, strlen(q)));
    assert_non_null(strstr(q, "\"..."));
    pbj__excerpt("ab\xff", 3, q, sizeof(q));
    assert_string_equal(q, "ab...");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_int_like_go),
        cmocka_unit_test(parse_uint_like_go),
        cmocka_unit_test(parse_bool_and_float_like_go),
        cmocka_unit_test(json_integers),
        cmocka_unit_test(base64_like_go),
        cmocka_unit_test(utf8),
        cmocka_unit_test(error_text_stays_utf8),
    };
    return cmocka_run_group_tests_name("pbj_internals", tests, NULL, NULL);
}
