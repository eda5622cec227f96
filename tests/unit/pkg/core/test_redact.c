/* SPDX-License-Identifier: Apache-2.0 */
/* svc_redact_credentials: every DSN form and URLs with credentials. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "svc/core.h"

static void expect(const char *in, const char *want)
{
    char out[512];

    svc_redact_credentials(in, out, sizeof out);
    if (strcmp(out, want) != 0)
        fail_msg("redact(\"%s\") = \"%s\", want \"%s\"", in, out, want);
}

static void postgresql_uri_password(void **state)
{
    (void)state;
    expect("postgresql://app:s3cret@db.internal:5432/orders",
           "postgresql://app:(redacted)@db.internal:5432/orders");
    expect("postgres://app:s3cret@db/catalog?sslmode=verify-full",
           "postgres://app:(redacted)@db/catalog?sslmode=verify-full");
    /* several hosts; a password with '@' and ':' in it */
    expect("postgresql://app:p@ss:w@h1:5432,h2:5432/orders",
           "postgresql://app:(redacted)@h1:5432,h2:5432/orders");
    expect("postgresql://app@db/orders", "postgresql://app@db/orders");
    expect("postgresql:///orders?host=/run/pg", "postgresql:///orders?host=/run/pg");
}

static void uri_query_password(void **state)
{
    (void)state;
    expect("postgresql://app@db/orders?password=s3cret&sslmode=require",
           "postgresql://app@db/orders?password=(redacted)&sslmode=require");
    expect("postgresql://db/orders?sslmode=require&sslpassword=k3y",
           "postgresql://db/orders?sslmode=require&sslpassword=(redacted)");
    expect("https://hooks.example.com/in?token=abc&x=1#frag",
           "https://hooks.example.com/in?token=(redacted)&x=1#frag");
}

static void keyword_value_password(void **state)
{
    (void)state;
    expect("host=db port=5432 dbname=orders user=app password=s3cret",
           "host=db port=5432 dbname=orders user=app password=(redacted)");
    expect("password=s3cret host=db", "password=(redacted) host=db");
    expect("host=db password = 'a secret' dbname=orders",
           "host=db password = (redacted) dbname=orders");
    expect("host=db password='a \\' b' dbname=orders", "host=db password=(redacted) dbname=orders");
    expect("host=db sslpassword=k3y", "host=db sslpassword=(redacted)");
    expect("host=db port=25432 dbname=catalog user=postgres",
           "host=db port=25432 dbname=catalog user=postgres");
}

static void webhook_url_credentials(void **state)
{
    (void)state;
    expect("https://user:pw@hooks.example.com/in", "https://user:(redacted)@hooks.example.com/in");
    expect("http://user:pw@127.0.0.1:8090", "http://user:(redacted)@127.0.0.1:8090");
    expect("http://127.0.0.1:8090/webhooks", "http://127.0.0.1:8090/webhooks");
    /* an '@' after the authority is not userinfo */
    expect("https://hooks.example.com/a@b:c", "https://hooks.example.com/a@b:c");
}

static void other_values_unchanged_and_cut_safely(void **state)
{
    char small[12];

    (void)state;
    expect("", "");
    expect("1000,10000,60000", "1000,10000,60000");
    expect("127.0.0.1:9468", "127.0.0.1:9468");
    svc_redact_credentials("postgresql://app:s3cret@db/orders", small, sizeof small);
    assert_string_equal(small, "postgresql:");
    svc_redact_credentials("https://u:s3cret@h", small, sizeof small);
    assert_null(strstr(small, "s3cret"));
    svc_redact_credentials(NULL, small, sizeof small);
    assert_string_equal(small, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(postgresql_uri_password),
        cmocka_unit_test(uri_query_password),
        cmocka_unit_test(keyword_value_password),
        cmocka_unit_test(webhook_url_credentials),
        cmocka_unit_test(other_values_unchanged_and_cut_safely),
    };
    return cmocka_run_group_tests_name("svc_redact", tests, NULL, NULL);
}
