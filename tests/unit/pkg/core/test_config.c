/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration table: defaults, parsing, bounds and the error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "svc/core.h"
#include "support/capture.h"

typedef struct cfg {
    char listen[SVC_CFG_STR_MAX];
    int64_t workers;
    bool verbose;
    char level[SVC_CFG_STR_MAX];
    char dsn[SVC_CFG_STR_MAX];
} cfg_t;

#define OFF(f) SVC_CFG_OFF(cfg_t, f)
static const svc_cfg_entry_t table[] = {
    {"T_LISTEN", SVC_CFG_STR, 1, 64, "127.0.0.1:1", OFF(listen), "listen"},
    {"T_WORKERS", SVC_CFG_INT, 1, 64, "4", OFF(workers), "workers"},
    {"T_VERBOSE", SVC_CFG_BOOL, 0, 0, "false", OFF(verbose), "verbose"},
    {"T_LEVEL", SVC_CFG_LOG_LEVEL, 0, 0, "info", OFF(level), "level"},
    {"T_DSN", SVC_CFG_STR, 0, 0, NULL, OFF(dsn), "database"},
};

/* A tiny fake environment: NAME=VALUE strings. */
static const char *const *fake_env;
static const char *fake_getenv(const char *name)
{
    size_t n = strlen(name);

    for (const char *const *e = fake_env; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static svc_err_t load(const char *const *env, cfg_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    fake_env = env;
    memset(c, 0, sizeof *c);
    return svc_cfg_load(table, SVC_COUNTOF(table), c, fake_getenv, errbuf);
}

static void defaults_apply(void **state)
{
    const char *const env[] = {"T_DSN=dbname=x", NULL};
    char err[SVC_ERRBUF_LEN] = "";
    cfg_t c;

    (void)state;
    assert_int_equal(load(env, &c, err), SVC_OK);
    assert_string_equal(c.listen, "127.0.0.1:1");
    assert_int_equal(c.workers, 4);
    assert_false(c.verbose);
    assert_string_equal(c.level, "info");
    assert_string_equal(c.dsn, "dbname=x");
}

static void values_parse(void **state)
{
    const char *const env[] = {"T_DSN=d",       "T_WORKERS=64",       "T_VERBOSE=yes",
                               "T_LEVEL=debug", "T_LISTEN=0.0.0.0:9", NULL};
    char err[SVC_ERRBUF_LEN] = "";
    cfg_t c;

    (void)state;
    assert_int_equal(load(env, &c, err), SVC_OK);
    assert_int_equal(c.workers, 64);
    assert_true(c.verbose);
    assert_string_equal(c.level, "debug");
    assert_string_equal(c.listen, "0.0.0.0:9");
}

static void expect_error(const char *const *env, const char *needle)
{
    char err[SVC_ERRBUF_LEN] = "";
    cfg_t c;

    assert_int_equal(load(env, &c, err), SVC_EINVAL);
    if (strstr(err, needle) == NULL)
        fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
}

static void bad_values_are_errors_naming_the_variable(void **state)
{
    (void)state;
    expect_error((const char *const[]){"T_DSN=d", "T_WORKERS=4x", NULL}, "T_WORKERS=4x");
    expect_error((const char *const[]){"T_DSN=d", "T_WORKERS=0", NULL}, "1..64");
    expect_error((const char *const[]){"T_DSN=d", "T_WORKERS=65", NULL}, "T_WORKERS");
    expect_error((const char *const[]){"T_DSN=d", "T_WORKERS=99999999999999999999", NULL},
                 "T_WORKERS");
    expect_error((const char *const[]){"T_DSN=d", "T_VERBOSE=maybe", NULL}, "T_VERBOSE");
    expect_error((const char *const[]){"T_DSN=d", "T_LEVEL=loud", NULL}, "T_LEVEL");
    expect_error((const char *const[]){NULL}, "T_DSN is required");
}

static void string_bounds(void **state)
{
    char longv[100];

    (void)state;
    memset(longv, 'a', sizeof longv);
    memcpy(longv, "T_LISTEN=", 9);
    longv[sizeof longv - 1] = '\0';
    expect_error((const char *const[]){"T_DSN=d", longv, NULL}, "T_LISTEN");
}

static void empty_value_means_default(void **state)
{
    const char *const env[] = {"T_DSN=d", "T_WORKERS=", NULL};
    char err[SVC_ERRBUF_LEN] = "";
    cfg_t c;

    (void)state;
    assert_int_equal(load(env, &c, err), SVC_OK);
    assert_int_equal(c.workers, 4);
}

static void help_lists_every_variable(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    (void)state;
    svc_cfg_print_help(f, table, SVC_COUNTOF(table));
    fclose(f);
    for (size_t i = 0; i < SVC_COUNTOF(table); i++)
        assert_non_null(strstr(buf, table[i].env));
    assert_non_null(strstr(buf, "range 1..64"));
    assert_non_null(strstr(buf, "required"));
    free(buf);
}

/* The start-up config line names every variable but never shows a password or a secret. */
static const svc_cfg_entry_t secret_table[] = {
    {"T_DSN", SVC_CFG_STR, 0, 0, "host=h password=pw1", OFF(listen), "dsn with a password"},
    {"T_PLAIN_DSN", SVC_CFG_STR, 0, 0, "host=plainhost", OFF(dsn), "dsn without one"},
    {"T_PASSWORD", SVC_CFG_STR, 0, 0, "hunter2", OFF(level), "a password"},
};

static void secrets_are_redacted_in_the_config_log(void **state)
{
    static const char *const env[] = {NULL};
    char err[SVC_ERRBUF_LEN] = "";
    cfg_t c;
    const char *out;

    (void)state;
    fake_env = env;
    memset(&c, 0, sizeof c);
    assert_int_equal(svc_cfg_load(secret_table, SVC_COUNTOF(secret_table), &c, fake_getenv, err),
                     SVC_OK);
    tcap_begin();
    svc_cfg_log("t", secret_table, SVC_COUNTOF(secret_table), &c);
    out = tcap_end();
    assert_non_null(strstr(out, "T_DSN=host=h password=(redacted)"));
    assert_non_null(strstr(out, "T_PASSWORD=(redacted)"));
    assert_non_null(strstr(out, "T_PLAIN_DSN=host=plainhost"));
    assert_null(strstr(out, "pw1"));
    assert_null(strstr(out, "hunter2"));
}

/* Every DSN form and a URL with credentials: the password goes, the rest stays readable. */
static const svc_cfg_entry_t uri_table[] = {
    {"T_URI_DSN", SVC_CFG_STR, 0, 0, "postgresql://app:pw2@db.internal:5432/orders", OFF(listen),
     "URI DSN"},
    {"T_SHORT_DSN", SVC_CFG_STR, 0, 0, "postgres://app:pw3@db/catalog?sslmode=verify-full",
     OFF(dsn), "postgres:// DSN"},
    {"T_WEBHOOK_URL", SVC_CFG_STR, 0, 0, "https://hook:pw4@hooks.example.com/in", OFF(level),
     "webhook URL"},
};

static void uri_credentials_are_redacted_in_the_config_log(void **state)
{
    static const char *const env[] = {NULL};
    char err[SVC_ERRBUF_LEN] = "";
    cfg_t c;
    const char *out;

    (void)state;
    fake_env = env;
    memset(&c, 0, sizeof c);
    assert_int_equal(svc_cfg_load(uri_table, SVC_COUNTOF(uri_table), &c, fake_getenv, err), SVC_OK);
    tcap_begin();
    svc_cfg_log("t", uri_table, SVC_COUNTOF(uri_table), &c);
    out = tcap_end();
    assert_null(strstr(out, "pw2"));
    assert_null(strstr(out, "pw3"));
    assert_null(strstr(out, "pw4"));
    assert_non_null(strstr(out, "T_URI_DSN=postgresql://app:(redacted)@db.internal:5432/orders"));
    assert_non_null(strstr(out, "T_SHORT_DSN=postgres://app:(redacted)@db/catalog?sslmode="));
    assert_non_null(strstr(out, "T_WEBHOOK_URL=https://hook:(redacted)@hooks.example.com/in"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_apply),
        cmocka_unit_test(values_parse),
        cmocka_unit_test(bad_values_are_errors_naming_the_variable),
        cmocka_unit_test(string_bounds),
        cmocka_unit_test(empty_value_means_default),
        cmocka_unit_test(help_lists_every_variable),
        cmocka_unit_test(secrets_are_redacted_in_the_config_log),
        cmocka_unit_test(uri_credentials_are_redacted_in_the_config_log),
    };
    return cmocka_run_group_tests_name("svc_cfg", tests, NULL, NULL);
}
