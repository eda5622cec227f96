/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - catalog SQL. Every statement is prepared and parameterised. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
    /* One index lookup per id (a nested loop): LIMIT 1, harmless on a
     * primary key, keeps the planner from flattening the subquery into a
     * join that it would rather run as a scan of the whole table. */
    [STMT_GET_MANY] =
        {"cat_get_many",
         "SELECT p.* FROM unnest($1::uuid[]) AS q(want), LATERAL (SELECT " PRODUCT_COLS
         " FROM products WHERE id = q.want LIMIT 1) p",
         1, DB_STMT_IDEMPOTENT},
    [STMT_LIST] = {"cat_list",
                   "SELECT " PRODUCT_COLS " FROM products WHERE seq > $1 ORDER BY seq LIMIT $2", 2,
                   DB_STMT_IDEMPOTENT},
};

/* A store is its worker's connection: the statement table above is the
 * whole of what makes it the catalog store.
 *
 * Generic plans: for cat_get_many's array Postgres would otherwise plan
 * every execution anew (a custom plan, as the relay found for its reads),
 * which cost the catalog's database more for one BatchGetProducts of two
 * ids than two GetProducts had (docs/bench/history.md, "Pricing in one
 * call"). The plans of the other statements do not depend on their
 * parameters. */
svc_err_t cat_store_new(const char *dsn, int statement_timeout_ms, cat_store_t **out,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    db_opts_t o;

    db_opts_fill(&o, dsn, stmts, SVC_COUNTOF(stmts), statement_timeout_ms, "catalog");
    o.server_options = "-c plan_cache_mode=force_generic_plan";
    return db_conn_new(&o, out, errbuf);
}

void cat_store_free(cat_store_t *st)
{
    db_conn_free(st);
}

svc_err_t cat_store_migrate(const char *dsn, int64_t wait_ms, char errbuf[static SVC_ERRBUF_LEN])
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
                           const svc_alloc_t *a, cat_product_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
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

svc_err_t cat_store_get(cat_store_t *st, const char *id, uint64_t deadline_ns, const svc_alloc_t *a,
                        cat_product_t **out, char errbuf[static SVC_ERRBUF_LEN])
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
 * digits and dashes). Returns how many there are. */
static size_t uuid_array(const char *const *ids, size_t n, char *lit)
{
    size_t k = 0, len = 1;

    lit[0] = '{';
    for (size_t i = 0; i < n; i++) {
        if (!svc_is_uuid(ids[i]))
            continue;
        if (k++ > 0)
            lit[len++] = ',';
        memcpy(lit + len, ids[i], CAT_UUID_CHARS);
        len += CAT_UUID_CHARS;
    }
    lit[len++] = '}';
    lit[len] = '\0';
    return k;
}

/* Gives product p (id in canonical lower case) to every id naming it: a
 * UUID is the same whatever the case of its hex digits. */
static void answer_ids(const char *const *ids, size_t n, cat_product_t *p, cat_product_t **out)
{
    for (size_t i = 0; i < n; i++)
        if (out[i] == NULL && strcasecmp(ids[i], p->id) == 0)
            out[i] = p;
}

svc_err_t cat_store_get_many(cat_store_t *st, const char *const *ids, size_t n,
                             uint64_t deadline_ns, const svc_alloc_t *a, cat_product_t **out,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    char lit[CAT_BATCH_MAX * (CAT_UUID_CHARS + 1) + 2];
    const char *params[] = {lit};
    PGresult *r = NULL;
    svc_err_t err;

    if (n > CAT_BATCH_MAX) {
        svc_errbuf_set(errbuf, "%zu ids, at most %d", n, CAT_BATCH_MAX);
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    /* Ids that are no UUID name no product: no need to ask. */
    if (uuid_array(ids, n, lit) == 0)
        return SVC_OK;
    err = db_exec(st, STMT_GET_MANY, params, deadline_ns, &r, errbuf);
    for (int row = 0; err == SVC_OK && row < PQntuples(r); row++) {
        cat_product_t *p = row_to_product(r, row, a);

        if (p == NULL)
            err = SVC_ENOMEM;
        else
            answer_ids(ids, n, p, out);
    }
    PQclear(r);
    return err;
}

svc_err_t cat_store_list(cat_store_t *st, int64_t after, int limit, uint64_t deadline_ns,
                         const svc_alloc_t *a, cat_product_t ***out, size_t *n, int64_t *last_seq,
                         bool *more, char errbuf[static SVC_ERRBUF_LEN])
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
