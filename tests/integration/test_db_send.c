/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_db_send.c - pkg/db's statement in two halves (db_send, db_receive),
 * which the relay uses to read its next batch while it produces this one,
 * against the project's Postgres:
 *   - a sent statement's rows come with db_receive, and the connection is
 *     free again after it;
 *   - while a result waits, every other call on the connection is refused
 *     (SVC_EINTERNAL) and the result is still there afterwards;
 *   - a receive with nothing sent is refused;
 *   - db_pump takes the result in without waiting: false while the
 *     statement runs, true once it is in, and db_receive then has it;
 *   - a statement that fails on the server fails at db_receive, with
 *     Postgres' message, and the connection goes on;
 *   - the backend terminated while the statement runs: db_receive says
 *     SVC_EUNAVAIL and the next call connects again;
 * a DB_STMT_BINARY statement's result comes in binary format (parameters
 * still text); and the session's settings: the environment's PGOPTIONS and the caller's
 * server_options both reach it, beside statement_timeout (libpq alone would
 * drop PGOPTIONS, as the connection names its options itself).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "support/group.h"

#include "db/db.h"
#include "support/pgtest.h"

enum { ST_SLOW, ST_PLAIN, ST_DIVIDE, ST_PID, ST_SETTINGS, ST_BINARY };

static const db_stmt_t stmts[] = {
    [ST_SLOW] = {"t_slow", "SELECT $1::int + 1 FROM pg_sleep(0.2)", 1, DB_STMT_IDEMPOTENT},
    [ST_PLAIN] = {"t_plain", "SELECT 2", 0, DB_STMT_IDEMPOTENT},
    [ST_DIVIDE] = {"t_divide", "SELECT 1 / $1::int", 1, DB_STMT_IDEMPOTENT},
    [ST_PID] = {"t_pid", "SELECT pg_backend_pid()", 0, DB_STMT_IDEMPOTENT},
    [ST_BINARY] = {"t_binary", "SELECT $1::int8", 1, DB_STMT_IDEMPOTENT | DB_STMT_BINARY},
    [ST_SETTINGS] = {"t_settings",
                     "SELECT concat_ws(' ', current_setting('bytea_output'), "
                     "current_setting('jit'), current_setting('enable_seqscan'), "
                     "current_setting('statement_timeout'))",
                     0, DB_STMT_IDEMPOTENT},
};

typedef struct fixture {
    pgtest_db_t db;
    db_conn_t *c;
} fixture_t;

static int setup(void **state)
{
    char errbuf[SVC_ERRBUF_LEN];
    fixture_t *f = calloc(1, sizeof *f);

    *state = f;
    if (f == NULL || pgtest_db_create(&f->db, "db_send", errbuf) != SVC_OK ||
        db_conn_open(f->db.dsn, stmts, sizeof stmts / sizeof stmts[0], 5000, "test_db_send", &f->c,
                     errbuf) != SVC_OK) {
        fprintf(stderr, "set-up: %s\n", errbuf);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN];
    int rc = 0;

    db_conn_free(f->c);
    if (pgtest_db_drop(&f->db, errbuf) != SVC_OK) {
        fprintf(stderr, "tear-down: %s\n", errbuf);
        rc = -1;
    }
    free(f);
    return rc;
}

/* Runs a statement that answers one integer, which it returns. */
static int exec_int(db_conn_t *c, size_t idx)
{
    char errbuf[SVC_ERRBUF_LEN];
    PGresult *r = NULL;
    int v;

    if (db_exec(c, idx, NULL, SVC_DEADLINE_NONE, &r, errbuf) != SVC_OK)
        fail_msg("statement %zu: %s", idx, errbuf);
    v = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static void sent_rows_come_with_receive(void **state)
{
    fixture_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN];
    const char *p[] = {"41"};
    PGresult *r = NULL;

    assert_false(db_sent(f->c));
    assert_int_equal(db_send(f->c, ST_SLOW, p, errbuf), SVC_OK);
    assert_true(db_sent(f->c));
    assert_int_equal(db_receive(f->c, SVC_DEADLINE_NONE, &r, errbuf), SVC_OK);
    assert_false(db_sent(f->c));
    assert_int_equal(PQntuples(r), 1);
    assert_string_equal(PQgetvalue(r, 0, 0), "42");
    PQclear(r);
    assert_int_equal(exec_int(f->c, ST_PLAIN), 2);
}

static void pump_takes_the_result_in_without_waiting(void **state)
{
    fixture_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN];
    const char *p[] = {"9"};
    PGresult *r = NULL;
    int looks = 0;

    assert_true(db_pump(f->c)); /* nothing sent: nothing to wait for */
    assert_int_equal(db_send(f->c, ST_SLOW, p, errbuf), SVC_OK);
    assert_false(db_pump(f->c)); /* the statement sleeps 0.2 s first */
    while (!db_pump(f->c) && looks++ < 500)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    assert_true(db_pump(f->c));
    assert_true(db_sent(f->c)); /* in, but still to be received */
    assert_int_equal(db_receive(f->c, SVC_DEADLINE_NONE, &r, errbuf), SVC_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), "10");
    PQclear(r);
    printf("[db] db_pump: false while the statement ran, true after %d looks 10 ms apart\n", looks);
}

static void a_binary_statement_answers_in_binary(void **state)
{
    fixture_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN];
    const char *p[] = {"258"};
    PGresult *r = NULL;

    assert_int_equal(db_exec(f->c, ST_BINARY, p, SVC_DEADLINE_NONE, &r, errbuf), SVC_OK);
    assert_int_equal(PQfformat(r, 0), 1);
    assert_int_equal(PQgetlength(r, 0, 0), 8);
    assert_memory_equal(PQgetvalue(r, 0, 0), "\0\0\0\0\0\0\x01\x02", 8);
    PQclear(r);
    assert_int_equal(exec_int(f->c, ST_PLAIN), 2); /* the others still in text */
}

static void other_calls_wait_for_the_receive(void **state)
{
    fixture_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN];
    const char *p[] = {"6"};
    PGresult *r = NULL;

    assert_int_equal(db_send(f->c, ST_SLOW, p, errbuf), SVC_OK);
    assert_int_equal(db_exec(f->c, ST_PLAIN, NULL, SVC_DEADLINE_NONE, &r, errbuf), SVC_EINTERNAL);
    assert_null(r);
    assert_non_null(strstr(errbuf, "t_slow sent and not received"));
    assert_int_equal(db_send(f->c, ST_PLAIN, NULL, errbuf), SVC_EINTERNAL);
    assert_int_equal(db_receive(f->c, SVC_DEADLINE_NONE, &r, errbuf), SVC_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), "7");
    PQclear(r);
    assert_int_equal(db_receive(f->c, SVC_DEADLINE_NONE, &r, errbuf), SVC_EINTERNAL);
    assert_null(r);
    assert_int_equal(exec_int(f->c, ST_PLAIN), 2);
}

static void a_failed_statement_fails_at_receive(void **state)
{
    fixture_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN];
    const char *p[] = {"0"};
    PGresult *r = NULL;

    assert_int_equal(db_send(f->c, ST_DIVIDE, p, errbuf), SVC_OK);
    assert_int_not_equal(db_receive(f->c, SVC_DEADLINE_NONE, &r, errbuf), SVC_OK);
    assert_null(r);
    assert_non_null(strstr(errbuf, "division by zero"));
    assert_int_equal(exec_int(f->c, ST_PLAIN), 2);
}

static void a_lost_backend_is_unavailable_then_replaced(void **state)
{
    fixture_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN], sql[96];
    const char *p[] = {"1"};
    int pid = exec_int(f->c, ST_PID);
    PGresult *r = NULL;

    assert_int_equal(db_send(f->c, ST_SLOW, p, errbuf), SVC_OK);
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d)", pid);
    assert_int_equal(pgtest_exec(f->db.dsn, sql, errbuf), SVC_OK);
    assert_int_equal(db_receive(f->c, SVC_DEADLINE_NONE, &r, errbuf), SVC_EUNAVAIL);
    assert_null(r);
    assert_int_not_equal(exec_int(f->c, ST_PID), pid); /* a new session */
}

static void pgoptions_and_server_options_reach_the_session(void **state)
{
    fixture_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN];
    db_opts_t o;
    db_conn_t *c = NULL;
    PGresult *r = NULL;

    db_opts_fill(&o, f->db.dsn, stmts, sizeof stmts / sizeof stmts[0], 4000, "test_db_send");
    o.server_options = "-c jit=off -c enable_seqscan=off";
    assert_int_equal(setenv("PGOPTIONS", "-c bytea_output=escape", 1), 0);
    assert_int_equal(db_conn_new(&o, &c, errbuf), SVC_OK);
    unsetenv("PGOPTIONS");
    if (db_exec(c, ST_SETTINGS, NULL, SVC_DEADLINE_NONE, &r, errbuf) != SVC_OK)
        fail_msg("settings: %s", errbuf);
    assert_string_equal(PQgetvalue(r, 0, 0), "escape off off 4s");
    PQclear(r);
    db_conn_free(c);
    /* Without either: the server's defaults. */
    o.server_options = NULL;
    assert_int_equal(db_conn_new(&o, &c, errbuf), SVC_OK);
    if (db_exec(c, ST_SETTINGS, NULL, SVC_DEADLINE_NONE, &r, errbuf) != SVC_OK)
        fail_msg("settings: %s", errbuf);
    assert_string_equal(PQgetvalue(r, 0, 0), "hex on on 4s");
    PQclear(r);
    db_conn_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sent_rows_come_with_receive),
        cmocka_unit_test(pump_takes_the_result_in_without_waiting),
        cmocka_unit_test(a_binary_statement_answers_in_binary),
        cmocka_unit_test(other_calls_wait_for_the_receive),
        cmocka_unit_test(a_failed_statement_fails_at_receive),
        cmocka_unit_test(a_lost_backend_is_unavailable_then_replaced),
        cmocka_unit_test(pgoptions_and_server_options_reach_the_session),
    };

    return svc_test_run_group_tests(tests, setup, teardown);
}
