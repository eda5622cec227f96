/* SPDX-License-Identifier: Apache-2.0 */
/*
 * order_it.h - what the order integration tests share: two fresh test
 * databases (catalog's and orders'), the real catalog binary on a port that
 * survives its restarts, the real order binary pointed at it, gRPC channels
 * to both, typed OrderService calls, and row counts.
 *
 * Environment (set by tests/integration/order/CMakeLists.txt):
 *   ORDER_BIN, CATALOG_BIN       the binaries under test (required)
 *   SVC_TEST_TIMEOUT_MULTIPLIER  scales every wait (4 in sanitizer builds)
 *   SVC_TEST_LOG_DIR             where the children's logs go
 *   SHOPMICRO_PG_PORT            the project's Postgres (default 25432)
 *   SVC_TEST_FILTER              optional: run only the matching tests
 * The catalog helpers (it_create, it_ms, IT_ASSERT_*) come from catalog_it.h.
 */
#ifndef ORDER_IT_H
#define ORDER_IT_H

#include "catalog_it.h"
#include "principal/principal.h"
#include "shopmicro/order/v1/order.pb-c.h"

typedef Shopmicro__Order__V1__CreateOrderResponse it_created_t;
typedef Shopmicro__Order__V1__Order it_order_t;

#define ORD_IT_PENDING   SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_PENDING
#define ORD_IT_CONFIRMED SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_CONFIRMED
#define ORD_IT_CANCELLED SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_CANCELLED

/* One catalog + one order under test. Zero-initialise; ord_it_setup fills it. */
typedef struct ord_it {
    pgtest_db_t cat_db, ord_db;
    spawn_proc_t *cat, *ord; /* owned */
    spawn_proc_t *cat2;      /* owned; the second replica (ord_it_setup_replicas) */
    char cat_addr[32], ord_addr[32];
    char cat2_addr[32];
    char cat_target[80];           /* order's ORDER_CATALOG_ADDR when not cat_addr */
    grpc_channel *cat_ch, *ord_ch; /* owned */
} ord_it_t;

/* An item of a CreateOrder request. */
typedef struct it_item {
    const char *product_id;
    int32_t quantity;
} it_item_t;

/* Row counts of the orders database. */
typedef struct ord_it_counts {
    int64_t orders, items, outbox, keys;
} ord_it_counts_t;

/*
 * cmocka setup: the orders database and the order service, pointed at
 * catalog_addr; with catalog_addr NULL, first a catalog database and the real
 * catalog (16 workers, no saga consumer: CATALOG_KAFKA_BROKERS empty) on a
 * port of its own. ord_env (NULL-terminated
 * "NAME=VALUE", may be NULL) is added to the order service's environment
 * after the defaults (ORDER_LISTEN on a free port, ORDER_DB_DSN,
 * ORDER_CATALOG_ADDR, ORDER_LOG_LEVEL=info, and ORDER_KAFKA_BROKERS empty:
 * no saga consumer unless a test names its broker), so it may override them.
 * Returns 0/-1; *state gets a new ord_it_t.
 */
int ord_it_setup(void **state, const char *catalog_addr, const char *const *ord_env);
/* ord_it_setup with two catalog replicas (cat on cat_addr, cat2 on
 * cat2_addr) on one catalog database; the order service is pointed at both
 * ("ipv4:A,B": round robin, health-checked). cat_ch talks to the first. */
int ord_it_setup_replicas(void **state, const char *const *ord_env);
/* cmocka teardown: SIGTERM both, require exit 0 of each, drop the databases. */
int ord_it_teardown(void **state);

/* The catalog again, on the same address and database (after a kill). */
svc_err_t ord_it_catalog_start(ord_it_t *t);
/* SIGKILL the catalog and reap it. */
void ord_it_catalog_kill(ord_it_t *t);
/* SIGTERM the order service; 0 when it exited with status 0 (its log is
 * dumped otherwise). Safe when it is not running. */
int ord_it_order_stop(ord_it_t *t);

/* A product in the catalog; its id is copied into id (37 bytes). */
void ord_it_product(ord_it_t *t, const char *name, int64_t price_cents, char id[37]);

/* The principal the gateway would pass (pkg/principal: subject and scopes;
 * subject NULL: none) followed by more, into out (cap entries); returns how
 * many. The order service refuses a call without one. */
size_t it_caller_md(rpc_md_t *out, size_t cap, const char *subject, const char *scopes,
                    const rpc_md_t *more, size_t n_more);
/*
 * CreateOrder on t->ord_ch. key NULL: no idempotency-key metadata.
 * timeout_ms 0: IT_DEFAULT_CALL_MS. On SVC_OK *out is owned by caller
 * (it_free). Thread-safe.
 */
svc_err_t it_order_create(grpc_channel *ch, const char *customer, const it_item_t *items, size_t n,
                          const char *key, int timeout_ms, it_created_t **out, rpc_result_t *res);
/* The same with request metadata md (n_md entries, borrowed; a key may
 * occur more than once) instead of one idempotency key, as subject with
 * scopes (it_caller_md) for customer. */
svc_err_t it_order_create_as(grpc_channel *ch, const char *subject, const char *scopes,
                             const char *customer, const it_item_t *items, size_t n,
                             const rpc_md_t *md, size_t n_md, int timeout_ms, it_created_t **out,
                             rpc_result_t *res);
/* it_order_create_as as the customer itself (scopes orders:write orders:read). */
svc_err_t it_order_create_md(grpc_channel *ch, const char *customer, const it_item_t *items,
                             size_t n, const rpc_md_t *md, size_t n_md, int timeout_ms,
                             it_created_t **out, rpc_result_t *res);
/* GetOrder as subject with scopes. */
svc_err_t it_order_get_as(grpc_channel *ch, const char *subject, const char *scopes, const char *id,
                          int timeout_ms, it_order_t **out, rpc_result_t *res);
/* GetOrder as an orders:admin. */
svc_err_t it_order_get(grpc_channel *ch, const char *id, int timeout_ms, it_order_t **out,
                       rpc_result_t *res);

/* Counts rows of orders, order_items, outbox and idempotency_keys. */
ord_it_counts_t ord_it_counts(const ord_it_t *t);
/* Asserts two counts are equal, naming the table that differs. */
void ord_it_assert_counts(ord_it_counts_t got, ord_it_counts_t want);
/* One integer from the orders database (fails the test on error). */
int64_t ord_it_int(const ord_it_t *t, const char *sql);
/* One text value from the orders database into out (fails on error). */
void ord_it_text(const ord_it_t *t, const char *sql, char *out, size_t len);

/* The monotonic clock in ms, as a double, for measuring calls. */
double ord_it_ms_since(uint64_t t0_ns);
void ord_it_sleep_ms(int ms);

#endif /* ORDER_IT_H */
