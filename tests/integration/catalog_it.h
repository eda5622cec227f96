/* SPDX-License-Identifier: Apache-2.0 */
/*
 * catalog_it.h - what the catalog integration tests share: a fresh test
 * database, the real catalog binary on a free port against it, a gRPC
 * channel to it, and typed wrappers around rpc_call_unary.
 *
 * Environment (set by tests/integration/CMakeLists.txt):
 *   CATALOG_BIN                  the catalog binary under test (required)
 *   SVC_IT_STACK_SH              deploy/local/stack.sh (pg-up, pg-down, ...)
 *   SVC_TEST_TIMEOUT_MULTIPLIER  scales every wait (4 in sanitizer builds)
 *   SVC_TEST_LOG_DIR             where the children's logs go
 *   SHOPMICRO_PG_PORT            the project's Postgres (default 25432)
 *   SVC_TEST_FILTER              optional: run only the matching tests
 */
#ifndef CATALOG_IT_H
#define CATALOG_IT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rpc/rpc.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "support/pgtest.h"
#include "support/group.h"
#include "support/spawn.h"

typedef Shopmicro__Catalog__V1__Product it_product_t;
typedef Shopmicro__Catalog__V1__ListProductsResponse it_list_t;
typedef Shopmicro__Catalog__V1__BatchGetProductsResponse it_batch_t;

#define IT_DEFAULT_CALL_MS 5000  /* deadline of a call that should be quick */
#define IT_START_MS        10000 /* catalog start-up to "listening", unscaled */

/* One catalog under test. Zero-initialise, then cat_it_db_create +
 * cat_it_start (or cat_it_setup for both); cat_it_teardown undoes it all. */
typedef struct cat_it {
    pgtest_db_t db;
    spawn_proc_t *proc; /* owned */
    int port;
    char addr[32];    /* "127.0.0.1:<port>" */
    grpc_channel *ch; /* owned */
} cat_it_t;

/* grpc_init() and SIGPIPE ignored; call first in main(). Runs only the
 * tests matching $SVC_TEST_FILTER (a cmocka pattern, e.g. "sigterm*")
 * when it is set. */
void cat_it_global_init(void);
/* grpc_shutdown(); call last in main(). */
void cat_it_global_fini(void);

/* ms scaled by SVC_TEST_TIMEOUT_MULTIPLIER. */
int it_ms(int ms);
/* The monotonic clock in ms, for measuring. */
uint64_t it_now_ms(void);

/* $CATALOG_BIN; aborts the test program when unset. */
const char *cat_it_binary(void);

/* A fresh database "catalog_it_<pid>_<n>" (no schema: the catalog migrates). */
svc_err_t cat_it_db_create(cat_it_t *t, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Starts the catalog with CATALOG_LISTEN on a free port of 127.0.0.1,
 * CATALOG_DB_DSN=t->db.dsn and CATALOG_LOG_LEVEL=info, then `env`
 * (NULL-terminated "NAME=VALUE", borrowed, may be NULL; it may override
 * those three), waits until it logs "listening on" and opens t->ch.
 * A port taken by someone else between picking and binding is retried.
 */
svc_err_t cat_it_start(cat_it_t *t, const char *const *env, char errbuf[static SVC_ERRBUF_LEN]);

/* cmocka group/test setup: cat_it_db_create + cat_it_start with `env`.
 * Returns 0/-1 and prints the reason; *state gets a new cat_it_t. */
int cat_it_setup_env(void **state, const char *const *env);
int cat_it_setup(void **state);

/*
 * Stops the catalog with SIGTERM and waits for its exit; returns 0 when it
 * exited with status 0 (so, in sanitizer builds, also without leaks), -1
 * otherwise (its log is dumped). Destroys the channel first. Safe to call
 * when nothing runs.
 */
int cat_it_stop(cat_it_t *t);

/* cmocka teardown: cat_it_stop, drop the database, free *state. Returns -1
 * (failing the test) when the catalog did not exit cleanly. */
int cat_it_teardown(void **state);

/* Runs deploy/local/stack.sh <cmd> (pg-up, pg-down, pg-restart) to
 * completion; returns its wait status, or -1 when it cannot run. */
int it_stack(const char *cmd);
/* The same with one argument after cmd (NULL: none), e.g. pg-restart immediate. */
int it_stack_args(const char *cmd, const char *arg);
/* For the teardown of a test that stops or restarts the shared test Postgres:
 * `stack.sh pg-up`, whatever the test did, then the fixture's own teardown
 * (cat_it_teardown, ord_it_teardown, ...); -1 when either failed. */
int it_teardown_after_pg(void **state, int (*teardown)(void **state));

/* A random version-4 UUID in canonical lower-case form (37 bytes). */
void it_random_uuid(char out[37]);
/* True for a canonical lower-case 8-4-4-4-12 hex UUID. */
bool it_is_uuid(const char *s);
/* True for "YYYY-MM-DDTHH:MM:SS[.fraction]Z" within max_skew_s of now. */
bool it_is_recent_rfc3339_utc(const char *s, long max_skew_s);

/*
 * Typed calls. Each returns res->err; on SVC_OK *out is a new message owned
 * by caller (free with it_free), otherwise NULL. timeout_ms 0 means
 * IT_DEFAULT_CALL_MS (not scaled: a call's deadline is part of what a test
 * asserts). Thread-safe (ch is shared).
 */
svc_err_t it_create(grpc_channel *ch, const char *name, const char *description,
                    int64_t price_cents, int32_t stock, int timeout_ms, it_product_t **out,
                    rpc_result_t *res);
svc_err_t it_get(grpc_channel *ch, const char *id, int timeout_ms, it_product_t **out,
                 rpc_result_t *res);
svc_err_t it_list(grpc_channel *ch, int32_t page_size, const char *page_token, int timeout_ms,
                  it_list_t **out, rpc_result_t *res);
svc_err_t it_batch_get(grpc_channel *ch, const char *const *ids, size_t n, int timeout_ms,
                       it_batch_t **out, rpc_result_t *res);
/* Frees a message from the calls above. NULL-safe. */
void it_free(void *msg);

/* Asserts that a call ended with `want`, printing names and the status
 * message (cmocka's integer asserts print hex). */
#define IT_ASSERT_CODE(res, want)                                                                  \
    do {                                                                                           \
        if ((res).err != (want))                                                                   \
            fail_msg("got %s \"%s\" after %.1f ms, want %s", svc_err_name((res).err),              \
                     (res).message, (double)(res).elapsed_ns / 1e6, svc_err_name(want));           \
    } while (0)

/* Asserts that a call failed with `want` and a status message containing
 * `part` (e.g. the name of the offending field). */
#define IT_ASSERT_ERROR(res, want, part)                                                           \
    do {                                                                                           \
        IT_ASSERT_CODE(res, want);                                                                 \
        if (strstr((res).message, (part)) == NULL)                                                 \
            fail_msg("status message \"%s\" does not mention \"%s\"", (res).message, (part));      \
    } while (0)

#endif /* CATALOG_IT_H */
