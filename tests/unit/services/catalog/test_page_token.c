/* SPDX-License-Identifier: Apache-2.0 */
/* ListProducts' page token: round trips, and rejects what it did not make. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "page_token.h"

static void round_trips(void **state)
{
    const int64_t values[] = {0, 1, 7, 250, 123456789, INT64_MAX};
    char tok[CAT_PAGE_TOKEN_MAX];
    int64_t v;

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(values); i++) {
        cat_page_token_encode(values[i], tok);
        assert_true(strlen(tok) > 0 && strlen(tok) < CAT_PAGE_TOKEN_MAX);
        /* URL-safe: no characters a query string would need to escape. */
        assert_int_equal(strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                     "0123456789-_"),
                         strlen(tok));
        assert_int_equal(cat_page_token_decode(tok, &v), SVC_OK);
        assert_int_equal(v, values[i]);
    }
}

static void rejects_garbage(void **state)
{
    const char *bad[] = {
        "garbage",
        "abc",
        "!!!!",
        "djE6NQ", /* "v1:5" without checksum */
        "eHg6NTpkZWFkYmVlZg",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"};
    int64_t v = -1;

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(bad); i++)
        assert_int_equal(cat_page_token_decode(bad[i], &v), SVC_EINVAL);
    assert_int_equal(v, -1);
}

static void rejects_any_single_character_change(void **state)
{
    const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char tok[CAT_PAGE_TOKEN_MAX], t2[CAT_PAGE_TOKEN_MAX];
    int accepted = 0, tried = 0;
    int64_t v;

    (void)state;
    cat_page_token_encode(4242, tok);
    for (size_t pos = 0; pos < strlen(tok); pos++) {
        for (const char *c = alphabet; *c; c++) {
            if (*c == tok[pos])
                continue;
            memcpy(t2, tok, sizeof tok);
            t2[pos] = *c;
            tried++;
            /* The last character carries only partly-used bits: a change
             * there may decode to the same bytes, which is the same token. */
            if (cat_page_token_decode(t2, &v) == SVC_OK && v != 4242)
                accepted++;
        }
    }
    assert_true(tried > 500);
    assert_int_equal(accepted, 0);
}

static void rejects_truncation(void **state)
{
    char tok[CAT_PAGE_TOKEN_MAX];
    int64_t v;

    (void)state;
    cat_page_token_encode(99, tok);
    for (size_t n = strlen(tok) - 1; n > 0; n--) {
        tok[n] = '\0';
        assert_int_equal(cat_page_token_decode(tok, &v), SVC_EINVAL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trips),
        cmocka_unit_test(rejects_garbage),
        cmocka_unit_test(rejects_any_single_character_change),
        cmocka_unit_test(rejects_truncation),
    };
    return cmocka_run_group_tests_name("cat_page_token", tests, NULL, NULL);
}
