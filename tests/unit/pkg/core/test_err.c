/* SPDX-License-Identifier: Apache-2.0 */
/* Error table: the one mapping between svc_err_t and gRPC status codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "svc/core.h"

static void every_grpc_code_round_trips(void **state)
{
    (void)state;
    for (int code = 0; code <= 16; code++)
        assert_int_equal(svc_err_to_grpc(svc_err_from_grpc(code)), code);
}

static void known_mappings(void **state)
{
    (void)state;
    assert_int_equal(svc_err_to_grpc(SVC_OK), 0);
    assert_int_equal(svc_err_to_grpc(SVC_EINVAL), 3);
    assert_int_equal(svc_err_to_grpc(SVC_ETIMEDOUT), 4);
    assert_int_equal(svc_err_to_grpc(SVC_ENOTFOUND), 5);
    assert_int_equal(svc_err_to_grpc(SVC_EEXIST), 6);
    assert_int_equal(svc_err_to_grpc(SVC_EPRECOND), 9);
    assert_int_equal(svc_err_to_grpc(SVC_EUNAVAIL), 14);
    /* Out of memory is reported as RESOURCE_EXHAUSTED but never produced
     * from the wire: RESOURCE_EXHAUSTED decodes as EEXHAUSTED. */
    assert_int_equal(svc_err_to_grpc(SVC_ENOMEM), 8);
    assert_int_equal(svc_err_from_grpc(8), SVC_EEXHAUSTED);
}

static void unknown_codes(void **state)
{
    (void)state;
    assert_int_equal(svc_err_from_grpc(17), SVC_EUNKNOWN);
    assert_int_equal(svc_err_from_grpc(-1), SVC_EUNKNOWN);
    assert_int_equal(svc_err_to_grpc((svc_err_t)999), 2);
    assert_string_equal(svc_strerror((svc_err_t)999), "invalid error code");
}

static void names_and_texts(void **state)
{
    (void)state;
    assert_string_equal(svc_err_name(SVC_EUNAVAIL), "UNAVAILABLE");
    assert_string_equal(svc_err_name(SVC_ETIMEDOUT), "DEADLINE_EXCEEDED");
    assert_string_equal(svc_err_name(SVC_OK), "OK");
    assert_string_equal(svc_strerror(SVC_ENOTFOUND), "not found");
    for (int e = 0; e < SVC__ERR_LAST; e++) {
        assert_non_null(svc_err_name((svc_err_t)e));
        assert_true(strlen(svc_strerror((svc_err_t)e)) > 0);
    }
}

static void errbuf_truncates_and_tolerates_null(void **state)
{
    char buf[SVC_ERRBUF_LEN];
    char big[600];

    (void)state;
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    svc_errbuf_set(buf, "%s", big);
    assert_int_equal(strlen(buf), SVC_ERRBUF_LEN - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_grpc_code_round_trips),
        cmocka_unit_test(known_mappings),
        cmocka_unit_test(unknown_codes),
        cmocka_unit_test(names_and_texts),
        cmocka_unit_test(errbuf_truncates_and_tolerates_null),
    };
    return cmocka_run_group_tests_name("svc_err", tests, NULL, NULL);
}
