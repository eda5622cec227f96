/* SPDX-License-Identifier: Apache-2.0 */
/* test_dlq.c - notify-dlq's pure parts without a broker: the command line and the body
 * printer (the verbs against a real node: tests/integration/mq/test_notify_dlq.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dlq.h"

static svc_err_t parse(dlq_args_t *a, const char *const *args)
{
    static char words[8][64];
    char *argv[8] = {words[0]};
    int argc = 1;

    snprintf(words[0], sizeof words[0], "notify-dlq");
    for (; args[argc - 1] != NULL && argc < 8; argc++) {
        snprintf(words[argc], sizeof words[argc], "%s", args[argc - 1]);
        argv[argc] = words[argc];
    }
    return dlq_parse_args(argc, argv, a, SVC_ERRBUF_SCRATCH);
}

static void args_are_checked(void **state)
{
    dlq_args_t a;

    (void)state;
    assert_int_equal(parse(&a, (const char *[]){"list", NULL}), SVC_OK);
    assert_int_equal(a.verb, DLQ_LIST);
    assert_int_equal(a.limit, DLQ_DEFAULT_LIMIT);
    assert_int_equal(parse(&a, (const char *[]){"list", "--limit=7", NULL}), SVC_OK);
    assert_int_equal(a.limit, 7);
    assert_int_equal(parse(&a, (const char *[]){"list", "--limit", "0", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"list", "--limit", "10001", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"list", "--limit", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"show", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"show", "x", NULL}), SVC_OK);
    assert_string_equal(a.id, "x");
    assert_int_equal(parse(&a, (const char *[]){"show", "x", "y", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"replay", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"replay", "x", "--all", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"replay", "--all", NULL}), SVC_OK);
    assert_true(a.all);
    assert_int_equal(parse(&a, (const char *[]){"purge", NULL}), SVC_OK);
    assert_false(a.yes);
    assert_int_equal(parse(&a, (const char *[]){"purge", "--yes", NULL}), SVC_OK);
    assert_true(a.yes);
    assert_int_equal(parse(&a, (const char *[]){"purge", "--all", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"drop", NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){NULL}), SVC_EINVAL);
    assert_int_equal(parse(&a, (const char *[]){"purge", "--help", NULL}), SVC_OK);
    assert_int_equal(a.verb, DLQ_HELP);
}

static void body_printed(const char *in, bool json, const char *want)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    dlq_print_body(f, in, strlen(in), json);
    fclose(f);
    assert_string_equal(buf, want);
    free(buf);
}

static void body_is_pretty_enough(void **state)
{
    (void)state;
    body_printed("{\"a\":1,\"b\":[true,{}],\"c\":\"x, {y}: \\\"z\\\"\"}", true,
                 "{\n  \"a\": 1,\n  \"b\": [\n    true,\n    {}\n  ],\n"
                 "  \"c\": \"x, {y}: \\\"z\\\"\"\n}\n");
    body_printed("[]", true, "[]\n");
    body_printed("not json {", true, "not json {\n");
    body_printed("bin\x01\xff\n", false, "bin\\x01\\xff\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(args_are_checked),
        cmocka_unit_test(body_is_pretty_enough),
    };
    return cmocka_run_group_tests_name("notify_dlq", tests, NULL, NULL);
}
