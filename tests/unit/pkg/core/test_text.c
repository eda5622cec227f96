/* SPDX-License-Identifier: Apache-2.0 */
/* Result memory and the text checks shared by every service. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "svc/core.h"

static void utf8_counts_characters_not_bytes(void **state)
{
    (void)state;
    assert_int_equal(svc_utf8_chars(""), 0);
    assert_int_equal(svc_utf8_chars("Mug"), 3);
    assert_int_equal(svc_utf8_chars("\xe0\xb8\x81\xe0\xb8\x82"), 2); /* Thai: 3 bytes each */
    assert_int_equal(svc_utf8_chars("caf\xc3\xa9"), 4);
    assert_int_equal(svc_utf8_chars("\xf0\x9f\x98\x80"), 1); /* 4-byte emoji */
}

static void utf8_rejects_broken_text(void **state)
{
    (void)state;
    assert_int_equal(svc_utf8_chars("a\xff"), -1);    /* never valid */
    assert_int_equal(svc_utf8_chars("\xe0\xb8"), -1); /* cut short */
    assert_int_equal(svc_utf8_chars("\xc3\x28"), -1); /* bad continuation */
    assert_int_equal(svc_utf8_chars("\x80"), -1);     /* lone continuation */
}

static void uuid_shape(void **state)
{
    (void)state;
    assert_true(svc_is_uuid("b52d034d-a3bb-4740-8961-85dc70ea09d9"));
    assert_true(svc_is_uuid("B52D034D-A3BB-4740-8961-85DC70EA09D9"));
    assert_false(svc_is_uuid("does-not-exist"));
    assert_false(svc_is_uuid(""));
    assert_false(svc_is_uuid("b52d034da3bb4740896185dc70ea09d9"));
    assert_false(svc_is_uuid("b52d034d-a3bb-4740-8961-85dc70ea09d"));
    assert_false(svc_is_uuid("b52d034d-a3bb-4740-8961-85dc70ea09d9a"));
    assert_false(svc_is_uuid("g52d034d-a3bb-4740-8961-85dc70ea09d9"));
    assert_false(svc_is_uuid("b52d034d_a3bb-4740-8961-85dc70ea09d9"));
}

static void *bump(void *ctx, size_t n)
{
    size_t *left = ctx;

    if (n > *left)
        return NULL;
    *left -= n;
    return malloc(n);
}

static void strdup_uses_the_allocator(void **state)
{
    size_t left = 4;
    svc_alloc_t a = {bump, &left};
    char *p;

    (void)state;
    p = svc_alloc_strdup(&a, "abc");
    assert_string_equal(p, "abc");
    assert_int_equal(left, 0);
    free(p);
    assert_null(svc_alloc_strdup(&a, "x")); /* exhausted: NULL, not a crash */
}

/* Every character the rule allows, at both length limits; every kind of
 * byte it refuses, with the index of the first one. */
static void idempotency_key_rule(void **state)
{
    char every[SVC_IDEMPOTENCY_KEY_LAST - SVC_IDEMPOTENCY_KEY_FIRST + 1];
    char longest[SVC_IDEMPOTENCY_KEY_MAX + 1];

    (void)state;
    for (int c = SVC_IDEMPOTENCY_KEY_FIRST; c <= SVC_IDEMPOTENCY_KEY_LAST; c++)
        every[c - SVC_IDEMPOTENCY_KEY_FIRST] = (char)c;
    assert_int_equal(sizeof every, 94);
    assert_true(svc_idempotency_key_valid(every, sizeof every));
    assert_int_equal(svc_idempotency_key_bad_byte(every, sizeof every), sizeof every);
    memset(longest, 'k', sizeof longest);
    assert_true(svc_idempotency_key_valid("a", 1));
    assert_true(svc_idempotency_key_valid(longest, 255));
    assert_false(svc_idempotency_key_valid(longest, 256)); /* too long */
    assert_false(svc_idempotency_key_valid("", 0));        /* empty */
    assert_false(svc_idempotency_key_valid(NULL, 0));
    /* the length is the caller's: bytes after it are not read */
    assert_true(svc_idempotency_key_valid("ab cd", 2));

    assert_false(svc_idempotency_key_valid("a b", 3)); /* space 0x20 */
    assert_int_equal(svc_idempotency_key_bad_byte("a b", 3), 1);
    assert_false(svc_idempotency_key_valid("ab\x7f", 3)); /* DEL */
    assert_int_equal(svc_idempotency_key_bad_byte("ab\x7f", 3), 2);
    assert_false(svc_idempotency_key_valid("a\0b", 3)); /* NUL inside, not an end */
    assert_int_equal(svc_idempotency_key_bad_byte("a\0b", 3), 1);
    assert_false(svc_idempotency_key_valid("\tk", 2));
    assert_int_equal(svc_idempotency_key_bad_byte("\tk", 2), 0);
    /* raw UTF-8 ("ключ"): refused, not dropped */
    assert_false(svc_idempotency_key_valid("\xd0\xba\xd0\xbb", 4));
    assert_int_equal(svc_idempotency_key_bad_byte("\xd0\xba\xd0\xbb", 4), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(utf8_counts_characters_not_bytes),
        cmocka_unit_test(utf8_rejects_broken_text),
        cmocka_unit_test(uuid_shape),
        cmocka_unit_test(strdup_uses_the_allocator),
        cmocka_unit_test(idempotency_key_rule),
    };
    return cmocka_run_group_tests_name("svc_text", tests, NULL, NULL);
}
