/* SPDX-License-Identifier: Apache-2.0 */
/* test_principal.c - scopes and subjects as the internal plane carries them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "principal/principal.h"

#define S(lit) lit, sizeof(lit) - 1

static void scopes_parse_known_names_only(void **state)
{
    assert_int_equal(pr_scopes_parse(S("")), 0);
    assert_int_equal(pr_scopes_parse(S("orders:write orders:read")),
                     PR_SCOPE_ORDERS_WRITE | PR_SCOPE_ORDERS_READ);
    assert_int_equal(pr_scopes_parse(S("openid  profile catalog:write ")), PR_SCOPE_CATALOG_WRITE);
    assert_int_equal(pr_scopes_parse(S("Orders:Read orders:readx orders:rea")), 0);
    assert_int_equal(pr_scopes_parse(S("orders:admin")), PR_SCOPE_ORDERS_ADMIN);
    /* len bounds the list: "orders:read" cut to "orders:r" is no scope */
    assert_int_equal(pr_scopes_parse("orders:read", 8), 0);
}

static void scopes_format_round_trip(void **state)
{
    char out[PR_SCOPES_TEXT_MAX];
    pr_scopes_t all = PR_SCOPE_CATALOG_WRITE | PR_SCOPE_ORDERS_WRITE | PR_SCOPE_ORDERS_READ |
                      PR_SCOPE_ORDERS_ADMIN;

    assert_int_equal(pr_scopes_format(0, out, sizeof out), 0);
    assert_string_equal(out, "");
    size_t n = pr_scopes_format(all, out, sizeof out);
    assert_int_equal(n, strlen(out));
    assert_string_equal(out, "catalog:write orders:write orders:read orders:admin");
    assert_int_equal(pr_scopes_parse(out, strlen(out)), all);
    /* too small a buffer keeps whole names only */
    pr_scopes_format(all, out, 20);
    assert_string_equal(out, "catalog:write");
    assert_string_equal(pr_scope_name(PR_SCOPE_ORDERS_READ), "orders:read");
    assert_string_equal(pr_scope_name((pr_scope_t)0), "");
}

static void subjects(void **state)
{
    char longest[PR_SUBJECT_MAX + 1];

    assert_true(pr_subject_valid(S("c1")));
    assert_true(pr_subject_valid(S("auth0|5f7c8ec7c33c6c004bbafe82")));
    assert_true(pr_subject_valid(S("jane.doe+shop@example.com")));
    assert_true(pr_subject_valid(S("248289761001")));
    assert_false(pr_subject_valid(S("")));
    assert_false(pr_subject_valid(NULL, 0));
    assert_false(pr_subject_valid(S("a b")));
    assert_false(pr_subject_valid(S("a\"b")));
    assert_false(pr_subject_valid(S("a\nb")));
    assert_false(pr_subject_valid(S("a\0b")));
    assert_false(pr_subject_valid(S("caf\xc3\xa9")));
    memset(longest, 'x', sizeof longest);
    assert_true(pr_subject_valid(longest, PR_SUBJECT_MAX));
    assert_false(pr_subject_valid(longest, PR_SUBJECT_MAX + 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scopes_parse_known_names_only),
        cmocka_unit_test(scopes_format_round_trip),
        cmocka_unit_test(subjects),
    };
    return cmocka_run_group_tests_name("principal", tests, NULL, NULL);
}
