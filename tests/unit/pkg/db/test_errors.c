/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pkg/db without a server: SQLSTATE mapping, and that a connection to a
 * port where nothing listens is UNAVAILABLE (never a crash) and that an
 * expired deadline is refused before any I/O.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "db/db.h"

static void sqlstates(void **state)
{
    (void)state;
    assert_int_equal(db_err_from_sqlstate("23505"), SVC_EEXIST);
    assert_int_equal(db_err_from_sqlstate("23514"), SVC_EINVAL);
    assert_int_equal(db_err_from_sqlstate("22P02"), SVC_EINVAL);
    assert_int_equal(db_err_from_sqlstate("40001"), SVC_EABORTED);
    assert_int_equal(db_err_from_sqlstate("40P01"), SVC_EABORTED);
    assert_int_equal(db_err_from_sqlstate("57014"), SVC_ETIMEDOUT);
    assert_int_equal(db_err_from_sqlstate("57P01"), SVC_EUNAVAIL);
    assert_int_equal(db_err_from_sqlstate("08006"), SVC_EUNAVAIL);
    assert_int_equal(db_err_from_sqlstate("53300"), SVC_EUNAVAIL);
    assert_int_equal(db_err_from_sqlstate("42P01"), SVC_EINTERNAL);
    assert_int_equal(db_err_from_sqlstate(NULL), SVC_EUNAVAIL);
    assert_int_equal(db_err_from_sqlstate(""), SVC_EUNAVAIL);
}

static const db_stmt_t stmts[] = {{"one", "SELECT 1", 0, DB_STMT_IDEMPOTENT}};

static db_conn_t *conn_to_nowhere(void)
{
    db_opts_t o;
    db_conn_t *c = NULL;

    db_opts_init(&o);
    /* Port 1 on loopback: nothing listens, the kernel refuses at once. */
    o.dsn = "host=127.0.0.1 port=1 dbname=x user=x";
    o.stmts = stmts;
    o.n_stmts = 1;
    assert_int_equal(db_conn_new(&o, &c, SVC_ERRBUF_SCRATCH), SVC_OK);
    return c;
}

static void refused_connection_is_unavailable(void **state)
{
    char err[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn_to_nowhere();
    PGresult *r = (PGresult *)1;

    (void)state;
    for (int i = 0; i < 3; i++) { /* and stays so, call after call */
        assert_int_equal(db_exec(c, 0, NULL, svc_now_ns() + 1000 * SVC_NS_PER_MS, &r, err),
                         SVC_EUNAVAIL);
        assert_null(r);
        assert_non_null(strstr(err, "database unavailable"));
        assert_false(db_conn_ok(c));
    }
    db_conn_free(c);
}

static void expired_deadline_is_refused_before_io(void **state)
{
    char err[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn_to_nowhere();
    PGresult *r = NULL;

    (void)state;
    assert_int_equal(db_exec(c, 0, NULL, svc_now_ns() - 1, &r, err), SVC_ETIMEDOUT);
    assert_non_null(strstr(err, "deadline"));
    assert_int_equal(db_exec(c, 5, NULL, SVC_DEADLINE_NONE, &r, err), SVC_EINTERNAL);
    db_conn_free(c);
}

static void migrate_without_server_is_unavailable(void **state)
{
    char err[SVC_ERRBUF_LEN] = "";

    (void)state;
    assert_int_equal(
        db_migrate("host=127.0.0.1 port=1 dbname=x connect_timeout=2", NULL, 0, "test", err),
        SVC_EUNAVAIL);
    assert_non_null(strstr(err, "database unavailable"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sqlstates),
        cmocka_unit_test(refused_connection_is_unavailable),
        cmocka_unit_test(expired_deadline_is_refused_before_io),
        cmocka_unit_test(migrate_without_server_is_unavailable),
    };
    db_conn_free(NULL);
    return cmocka_run_group_tests_name("db", tests, NULL, NULL);
}
