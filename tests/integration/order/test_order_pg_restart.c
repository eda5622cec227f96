/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Postgres restarted under a running order service: the orders placed right
 * after it, before anything else has used the workers' connections, all
 * succeed. CreateOrder's write is one statement, never re-run by pkg/db
 * (it may have committed), so this rests on pkg/db noticing, before it
 * sends, that an idle connection was closed by the server; there is no
 * BEGIN any more whose re-run would hide a dead connection.
 *
 * The test restarts the shared test Postgres (deploy/local/stack.sh), so
 * CTest runs it with RUN_SERIAL, and the teardown brings Postgres back
 * whatever happened.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "order_it.h"

#define WORKERS 4

static int setup(void **state)
{
    static const char *const env[] = {"ORDER_WORKERS=4", NULL};

    return ord_it_setup(state, NULL, env);
}

static int teardown(void **state)
{
    return it_teardown_after_pg(state, ord_it_teardown);
}

static void orders_right_after_a_restart_succeed(void **state)
{
    ord_it_t *t = *state;
    char a[37], b[37];
    it_item_t items[2] = {{a, 1}, {b, 2}};
    it_created_t *c = NULL;
    rpc_result_t res;
    int st;

    ord_it_product(t, "Mug", 1299, a);
    ord_it_product(t, "Tea", 250, b);
    for (int i = 0; i < 4 * WORKERS; i++) { /* every worker has a connection */
        it_order_create(t->ord_ch, "cust-1", items, 2, NULL, 0, &c, &res);
        IT_ASSERT_CODE(res, SVC_OK);
        it_free(c);
    }
    st = it_stack("pg-restart");
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("deploy/local/stack.sh pg-restart failed");
    for (int i = 0; i < 2 * WORKERS; i++) {
        if (it_order_create(t->ord_ch, "cust-1", items, 2, NULL, 0, &c, &res) != SVC_OK)
            fail_msg("CreateOrder #%d after the restart: %s \"%s\"", i, svc_err_name(res.err),
                     res.message);
        it_free(c);
    }
    assert_int_equal(ord_it_counts(t).orders, 6 * WORKERS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(orders_right_after_a_restart_succeed, setup, teardown),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests_name("order_pg_restart", tests, NULL, NULL);
    cat_it_global_fini();
    return rc;
}
