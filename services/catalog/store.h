/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - the catalog's SQL, and nothing else.
 *
 * One cat_store_t per worker thread (it owns that worker's connection).
 * Products come back as protobuf messages whose memory comes from the
 * caller's allocator (the call's arena), so nothing here is ever freed.
 */
#ifndef CAT_STORE_H
#define CAT_STORE_H

#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "svc/core.h"

typedef Shopmicro__Catalog__V1__Product cat_product_t;
/* One per worker thread: that worker's database connection (pkg/db). */
typedef struct db_conn cat_store_t;

/* Creates the store (does not connect). dsn is copied. */
svc_err_t cat_store_new(const char *dsn, int statement_timeout_ms, cat_store_t **out,
                        char errbuf[static SVC_ERRBUF_LEN]);
void cat_store_free(cat_store_t *st);
/* Applies services/catalog/migrations/ (its own connection), waiting up to
 * wait_ms for a database that is still starting (db_migrate_wait). */
svc_err_t cat_store_migrate(const char *dsn, int64_t wait_ms, char errbuf[static SVC_ERRBUF_LEN]);

/* Inserts a product; the database assigns id and created_at. */
svc_err_t cat_store_create(cat_store_t *st, const char *name, const char *description,
                           int64_t price_cents, int32_t stock, uint64_t deadline_ns,
                           const svc_alloc_t *a, cat_product_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);
/* SVC_ENOTFOUND when no product has this id (id must be a canonical UUID). */
svc_err_t cat_store_get(cat_store_t *st, const char *id, uint64_t deadline_ns, const svc_alloc_t *a,
                        cat_product_t **out, char errbuf[static SVC_ERRBUF_LEN]);
#define CAT_BATCH_MAX  100 /* ids of one cat_store_get_many */
#define CAT_UUID_CHARS 36

/* The products named by ids[0..n) (n <= CAT_BATCH_MAX) in one statement:
 * out[i] for ids[i], NULL when no product has that id (an id that is no
 * UUID included). Duplicates are answered each (with the same product). */
svc_err_t cat_store_get_many(cat_store_t *st, const char *const *ids, size_t n,
                             uint64_t deadline_ns, const svc_alloc_t *a, cat_product_t **out,
                             char errbuf[static SVC_ERRBUF_LEN]);
/* Up to `limit` products with seq > after, in seq order. *last_seq is the
 * seq of the last one returned; *more says whether any follow it. */
svc_err_t cat_store_list(cat_store_t *st, int64_t after, int limit, uint64_t deadline_ns,
                         const svc_alloc_t *a, cat_product_t ***out, size_t *n, int64_t *last_seq,
                         bool *more, char errbuf[static SVC_ERRBUF_LEN]);

#endif
