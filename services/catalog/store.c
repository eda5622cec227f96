/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - catalog SQL. Every statement is prepared and parameterised. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "store.h"

extern const db_migration_t cat_migrations[];
extern const size_t cat_migrations_count;

/* Columns of every product query, in the order row_to_product reads them. */
#define PRODUCT_COLS                                                                               \
    "id::text, name, description, price_cents, stock, "                                            \
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), seq"

enum { STMT_CREATE, STMT_GET, STMT_GET_MANY, STMT_LIST };

static const db_stmt_t stmts[] = {
    [STMT_CREATE] = {"cat_create",
                     "INSERT INTO products (name, description, price_cents, stock) "
                     "VALUES ($1, $2, $3, $4) RETURNING " PRODUCT_COLS,
                     4, 0},
    [STMT_GET] = {"cat_get", "SELECT " PRODUCT_COLS " FROM products WHERE id = $1::uuid", 1,
                  DB_STMT_IDEMPOTENT},
    /* The lateral subquery keeps PRODUCT_COLS' bare names on products;
     * ord is the 1-based position of the id in $1. */
    [STMT_GET_MANY] = {"cat_get_many",
                       "SELECT p.*, q.ord FROM unnest($1::uuid[]) WITH ORDINALITY AS q(want, ord), "
                       "LATERAL (SELECT " PRODUCT_COLS " FROM products WHERE id = q.want) p",
                       1, DB_STMT_IDEMPOTENT},
    [STMT_LIST] = {"cat_list",
                   "SELECT " PRODUCT_COLS " FROM products WHERE seq > $1 ORDER BY seq LIMIT $2",
                   2, DB_STMT_IDEMPOTENT},
};

/* A store is its worker's connection: the statement table above is the
 * whole of what makes it the catalog store. */
svc_err_t cat_store_new(const char *dsn, int statement_timeout_ms, cat_store_t **out,
                        char *errbuf)
{
    return db_conn_open(dsn, stmts, SVC_COUNTOF(stmts), statement_timeout_ms, "catalog", out,
                        errbuf);
}

void cat_store_free(cat_store_t *st)
{
    db_conn_free(st);
}

svc_err_t cat_store_migrate(const char *dsn, int64_t wait_ms, char *errbuf)
{
    return db_migrate_wait(dsn, cat_migrations, cat_migrations_count, "catalog", wait_ms, errbuf);
}

/* Copies row `i` out of the result (whose memory dies with PQclear). */
static cat_product_t *row_to_product(PGresult *r, int i, const svc_alloc_t *a)
{
    cat_product_t *p = a->fn(a->ctx, sizeof *p);

    if (p == NULL)
        return NULL;
    shopmicro__catalog__v1__product__init(p);
    p->id = svc_alloc_strdup(a, PQgetvalue(r, i, 0));
    p->name = svc_alloc_strdup(a, PQgetvalue(r, i, 1));
    p->description = svc_alloc_strdup(a, PQgetvalue(r, i, 2));
    p->price_cents = strtoll(PQgetvalue(r, i, 3), NULL, 10);
    p->stock = (int32_t)strtol(PQgetvalue(r, i, 4), NULL, 10);
    p->created_at = svc_alloc_strdup(a, PQgetvalue(r, i, 5));
    if (p->id == NULL || p->name == NULL || p->description == NULL || p->created_at == NULL)
        return NULL;
    return p;
}

static svc_err_t one_product(PGresult *r, const svc_alloc_t *a, cat_product_t **out)
{
    if (PQntuples(r) == 0)
        return SVC_ENOTFOUND;
    *out = row_to_product(r, 0, a);
    return *out != NULL ? SVC_OK : SVC_ENOMEM;
}

svc_err_t cat_store_create(cat_store_t *st, const char *name, const char *description,
                           int64_t price_cents, int32_t stock, uint64_t deadline_ns,
                           const svc_alloc_t *a, cat_product_t **out, char *errbuf)
{
    char price[24], qty[16];
    const char *params[] = {name, description, price, qty};
    PGresult *r = NULL;
    svc_err_t err;

    snprintf(price, sizeof price, "%" PRId64, price_cents);
    snprintf(qty, sizeof qty, "%" PRId32, stock);
    err = db_exec(st, STMT_CREATE, params, deadline_ns, &r, errbuf);
    if (err == SVC_OK)
        err = one_product(r, a, out);
    PQclear(r);
    return err;
}

svc_err_t cat_store_get(cat_store_t *st, const char *id, uint64_t deadline_ns,
                        const svc_alloc_t *a, cat_product_t **out, char *errbuf)
{
    const char *params[] = {id};
    PGresult *r = NULL;
    svc_err_t err = db_exec(st, STMT_GET, params, deadline_ns, &r, errbuf);

    if (err == SVC_OK)
        err = one_product(r, a, out);
    PQclear(r);
    return err;
}

/* A text array literal of the UUIDs among ids (no quoting needed: only hex
 * digits and dashes), and pos[k] = the index in ids of its k-th element. */
static size_t uuid_array(const char *const *ids, size_t n, char *lit, size_t *pos)
{
    size_t k = 0, len = 1;

    lit[0] = '{';
    for (size_t i = 0; i < n; i++) {
        if (!svc_is_uuid(ids[i]))
            continue;
        if (k > 0)
            lit[len++] = ',';
        memcpy(lit + len, ids[i], CAT_UUID_CHARS);
        len += CAT_UUID_CHARS;
        pos[k++] = i;
    }
    lit[len++] = '}';
    lit[len] = '\0';
    return k;
}

svc_err_t cat_store_get_many(cat_store_t *st, const char *const *ids, size_t n,
                             uint64_t deadline_ns, const svc_alloc_t *a, cat_product_t **out,
                             char *errbuf)
{
    char lit[CAT_BATCH_MAX * (CAT_UUID_CHARS + 1) + 2];
    size_t pos[CAT_BATCH_MAX], asked;
    const char *params[] = {lit};
    PGresult *r = NULL;
    svc_err_t err = SVC_OK;

    if (n > CAT_BATCH_MAX) {
        svc_errbuf_set(errbuf, "%zu ids, at most %d", n, CAT_BATCH_MAX);
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    /* Ids that are no UUID name no product: no need to ask. */
    if ((asked = uuid_array(ids, n, lit, pos)) == 0)
        return SVC_OK;
    err = db_exec(st, STMT_GET_MANY, params, deadline_ns, &r, errbuf);
    for (int row = 0; err == SVC_OK && row < PQntuples(r); row++) {
        size_t k = (size_t)strtoull(PQgetvalue(r, row, 7), NULL, 10) - 1;
        if (k >= asked) {
            svc_errbuf_set(errbuf, "cat_get_many: position %zu of %zu", k + 1, asked);
            err = SVC_EINTERNAL;
        } else if ((out[pos[k]] = row_to_product(r, row, a)) == NULL) {
            err = SVC_ENOMEM;
        }
    }
    PQclear(r);
    return err;
}

svc_err_t cat_store_list(cat_store_t *st, int64_t after, int limit, uint64_t deadline_ns,
                         const svc_alloc_t *a, cat_product_t ***out, size_t *n,
                         int64_t *last_seq, bool *more, char *errbuf)
{
    char after_s[24], limit_s[16];
    const char *params[] = {after_s, limit_s};
    PGresult *r = NULL;
    svc_err_t err;
    int rows;

    /* One row more than asked tells whether another page exists, so the
     * last page gets an empty next_page_token (AIP-158). */
    snprintf(after_s, sizeof after_s, "%" PRId64, after);
    snprintf(limit_s, sizeof limit_s, "%d", limit + 1);
    err = db_exec(st, STMT_LIST, params, deadline_ns, &r, errbuf);
    if (err != SVC_OK)
        goto out;
    rows = PQntuples(r);
    *more = rows > limit;
    *n = (size_t)(rows > limit ? limit : rows);
    *out = a->fn(a->ctx, (*n > 0 ? *n : 1) * sizeof **out);
    if (*out == NULL) {
        err = SVC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < *n; i++) {
        (*out)[i] = row_to_product(r, (int)i, a);
        if ((*out)[i] == NULL) {
            err = SVC_ENOMEM;
            goto out;
        }
    }
    *last_seq = *n > 0 ? strtoll(PQgetvalue(r, (int)*n - 1, 6), NULL, 10) : after;
out:
    PQclear(r);
    return err;
}
