/* SPDX-License-Identifier: Apache-2.0 */
/* saga.c - OrderCreated in, StockReserved or StockRejected out (see saga.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/worker.h"
#include "pbj/pbjson.h"
#include "reserve.h"
#include "saga.h"
#include "stock.h"

#define MOD "catalog.saga"

struct cat_saga {
    cat_stock_t *st;                             /* the worker thread's connection */
    kfk_worker_t *w;                             /* NULL when detached             */
    atomic_ullong reserved, rejected;            /* decisions committed, for /metrics */
    unsigned long long tx_reserved, tx_rejected; /* in the open transaction */
};

/* What catalog reads on shopmicro.orders.v1. Only OrderCreated asks it for
 * anything; order's status events pass by. */
static const char *const known_types[] = {
    "shopmicro.order.v1.OrderCreated",
    "shopmicro.order.v1.OrderConfirmed",
    "shopmicro.order.v1.OrderCancelled",
    NULL,
};
enum { TYPE_ORDER_CREATED = 0 };

/* The request id that caused the order travels on, so one id follows an
 * order through every service's log lines. */
typedef struct job {
    const kfk_record_t *r;
    const cat_order_created_t *ev;
    const cat_line_t *lines;
    size_t n;
    char request_id[128];
    uint64_t deadline_ns;
} job_t;

/* The event as an outbox row: protobuf for the wire, protojson for psql. */
static svc_err_t add_event(cat_saga_t *s, const job_t *j, const ProtobufCMessage *m,
                           const char *event_type, const char *ce_type,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    size_t len = protobuf_c_message_get_packed_size(m), json_len = 0;
    uint8_t *pb = malloc(len > 0 ? len : 1);
    char *json = NULL;
    svc_err_t err = SVC_ENOMEM;

    if (pb != NULL && pbj_encode(m, NULL, &json, &json_len, errbuf) == SVC_OK) {
        cat_outbox_row_t row = {
            .aggregate_id = j->ev->order_id,
            .event_type = event_type,
            .json = json,
            .topic = CAT_SAGA_TOPIC_OUT,
            .ce_type = ce_type,
            .ce_source = CAT_SAGA_CE_SOURCE,
            .pb = pb,
            .pb_len = protobuf_c_message_pack(m, pb),
            .request_id = j->request_id,
        };
        err = cat_stock_outbox_add(s->st, &row, j->deadline_ns, errbuf);
    } else if (pb == NULL) {
        svc_errbuf_set(errbuf, "out of memory");
    } else {
        err = SVC_EINTERNAL;
    }
    pbj_free(NULL, json);
    free(pb);
    return err;
}

/* Every line's stock is there: take it, then StockReserved. */
static svc_err_t reserve(cat_saga_t *s, const job_t *j, char errbuf[static SVC_ERRBUF_LEN])
{
    Shopmicro__Events__V1__StockReserved ev = SHOPMICRO__EVENTS__V1__STOCK_RESERVED__INIT;
    Shopmicro__Events__V1__StockLine line[CAT_RESERVE_MAX_LINES], *lp[CAT_RESERVE_MAX_LINES];
    const char *ids[CAT_RESERVE_MAX_LINES];
    int32_t qty[CAT_RESERVE_MAX_LINES];
    char at[SVC_RFC3339_LEN];
    svc_err_t err;

    for (size_t i = 0; i < j->n; i++) {
        ids[i] = j->lines[i].product_id;
        qty[i] = j->lines[i].quantity;
        shopmicro__events__v1__stock_line__init(&line[i]);
        line[i].product_id = (char *)ids[i];
        line[i].quantity = qty[i];
        lp[i] = &line[i];
    }
    svc_rfc3339_now(at);
    ev.order_id = j->ev->order_id;
    ev.n_lines = j->n;
    ev.lines = lp;
    ev.reserved_at = at;
    /* The decision first: the reservation rows refer to it. */
    err = cat_stock_decide(s->st, j->ev->order_id, j->r->ce_id, "RESERVED", j->deadline_ns, errbuf);
    if (err == SVC_OK)
        err = cat_stock_take(s->st, j->ev->order_id, ids, qty, j->n, j->deadline_ns, errbuf);
    if (err == SVC_OK)
        err = add_event(s, j, &ev.base, "StockReserved", CAT_SAGA_RESERVED, errbuf);
    return err;
}

/* Some line is short or unknown: take nothing, StockRejected with every
 * shortage. */
static svc_err_t reject(cat_saga_t *s, const job_t *j, cat_shortage_t *sh, size_t k,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    Shopmicro__Events__V1__StockRejected ev = SHOPMICRO__EVENTS__V1__STOCK_REJECTED__INIT;
    cat_shortage_t *sp[CAT_RESERVE_MAX_LINES];
    char at[SVC_RFC3339_LEN];
    svc_err_t err;

    for (size_t i = 0; i < k; i++)
        sp[i] = &sh[i];
    svc_rfc3339_now(at);
    ev.order_id = j->ev->order_id;
    ev.n_shortages = k;
    ev.shortages = sp;
    ev.rejected_at = at;
    err = cat_stock_decide(s->st, j->ev->order_id, j->r->ce_id, "REJECTED", j->deadline_ns, errbuf);
    if (err == SVC_OK)
        err = add_event(s, j, &ev.base, "StockRejected", CAT_SAGA_REJECTED, errbuf);
    return err;
}

/* Locks the products, decides, writes. *k_out: the number of shortages. */
static svc_err_t decide(cat_saga_t *s, const job_t *j, size_t *k_out,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    const char *ids[CAT_RESERVE_MAX_LINES];
    cat_stock_row_t rows[CAT_RESERVE_MAX_LINES];
    cat_shortage_t sh[CAT_RESERVE_MAX_LINES];
    size_t n_ids = 0, n_rows = 0;
    svc_err_t err = SVC_OK;

    for (size_t i = 0; i < j->n; i++)
        if (j->lines[i].is_uuid)
            ids[n_ids++] = j->lines[i].product_id;
    if (n_ids > 0)
        err = cat_stock_lock(s->st, ids, n_ids, j->deadline_ns, rows, &n_rows, errbuf);
    if (err != SVC_OK)
        return err;
    *k_out = cat_reserve_assess(j->lines, j->n, rows, n_rows, sh);
    return *k_out == 0 ? reserve(s, j, errbuf) : reject(s, j, sh, *k_out, errbuf);
}

/* The order's part of the batch's transaction (kfk_batch_ops_t: the
 * consumer begins and commits it). KFK_RETRY for any database failure: the
 * transaction is rolled back, the record comes again, and the claim makes a
 * repeat harmless. */
static kfk_verdict_t apply(cat_saga_t *s, const job_t *j, char *reason)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    bool fresh = false, decided = false;
    size_t shortages = 0;
    svc_err_t err =
        cat_stock_claim_event(s->st, j->r->ce_id, "OrderCreated", j->deadline_ns, &fresh, errbuf);

    if (err == SVC_OK && fresh)
        err = cat_stock_decided(s->st, j->ev->order_id, j->deadline_ns, &decided, errbuf);
    if (err == SVC_OK && fresh && !decided)
        err = decide(s, j, &shortages, errbuf);
    if (err != SVC_OK) {
        /* libpq's text cut to fit the reason (-Wformat-truncation). */
        snprintf(reason, KFK_REASON_LEN, "order %.36s: database: %.180s (%s)", j->ev->order_id,
                 errbuf, svc_err_name(err));
        return KFK_RETRY;
    }
    if (!fresh || decided) {
        svc_log_debug(MOD, "order %s: event %s %s: nothing to do", j->ev->order_id, j->r->ce_id,
                      fresh ? "repeats a decided order" : "was handled before");
        return KFK_DUPLICATE;
    }
    /* Counted once the batch commits (tx_commit); logged now, and a commit
     * that fails says that these lines did not happen. */
    (*(shortages == 0 ? &s->tx_reserved : &s->tx_rejected))++;
    svc_log_info(MOD, "order %s: %s (%zu lines, %zu short)", j->ev->order_id,
                 shortages == 0 ? "stock reserved" : "stock rejected", j->n, shortages);
    return KFK_HANDLED;
}

static svc_err_t tx_begin(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    cat_saga_t *s = ctx;

    s->tx_reserved = s->tx_rejected = 0;
    return cat_stock_begin(s->st, deadline_ms * SVC_NS_PER_MS, errbuf);
}

static svc_err_t tx_commit(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    cat_saga_t *s = ctx;
    svc_err_t err = cat_stock_commit(s->st, deadline_ms * SVC_NS_PER_MS, errbuf);

    if (err != SVC_OK && s->tx_reserved + s->tx_rejected > 0)
        svc_log_warn(MOD,
                     "commit failed (%s): the %llu decisions logged since the last commit "
                     "are taken again (any kept after all are known by their event ids)",
                     errbuf, s->tx_reserved + s->tx_rejected);
    if (err == SVC_OK) {
        atomic_fetch_add(&s->reserved, s->tx_reserved);
        atomic_fetch_add(&s->rejected, s->tx_rejected);
    }
    s->tx_reserved = s->tx_rejected = 0;
    return err;
}

static void tx_rollback(void *ctx)
{
    cat_saga_t *s = ctx;

    s->tx_reserved = s->tx_rejected = 0;
    cat_stock_rollback(s->st);
}

const kfk_batch_ops_t cat_saga_batch_ops = {tx_begin, tx_commit, tx_rollback};

kfk_verdict_t cat_saga_handle(void *ctx, const kfk_record_t *r, char *reason)
{
    cat_saga_t *s = ctx;
    cat_line_t lines[CAT_RESERVE_MAX_LINES];
    char type[128];
    size_t idx = 0, n = 0;
    cat_order_created_t *ev;
    kfk_verdict_t v;
    job_t j;

    kfk_record_header(r, "ce_type", type, sizeof type);
    switch (kfk_ce_type_match(type, known_types, &idx)) {
    case KFK_TYPE_NEWER:
        snprintf(reason, KFK_REASON_LEN, "ce_type %s: a newer schema than this catalog reads",
                 type);
        return KFK_POISON;
    case KFK_TYPE_UNKNOWN:
        snprintf(reason, KFK_REASON_LEN, "ce_type '%s' is no order event catalog knows", type);
        return KFK_POISON;
    case KFK_TYPE_KNOWN:
        break;
    }
    if (idx != TYPE_ORDER_CREATED)
        return KFK_HANDLED; /* the order's own status events: nothing for the stock */
    if (r->ce_id == NULL) {
        snprintf(reason, KFK_REASON_LEN, "OrderCreated without a ce_id: it cannot be deduplicated");
        return KFK_POISON;
    }
    ev = shopmicro__events__v1__order_created__unpack(NULL, r->value_len, r->value);
    if (ev == NULL) {
        snprintf(reason, KFK_REASON_LEN, "value is not an OrderCreated protobuf (%zu bytes)",
                 r->value_len);
        return KFK_POISON;
    }
    if (cat_reserve_lines(ev, lines, &n, reason, KFK_REASON_LEN) != SVC_OK) {
        shopmicro__events__v1__order_created__free_unpacked(ev, NULL);
        return KFK_POISON;
    }
    j = (job_t){
        .r = r, .ev = ev, .lines = lines, .n = n, .deadline_ns = r->deadline_ms * SVC_NS_PER_MS};
    kfk_record_header(r, "x-request-id", j.request_id, sizeof j.request_id);
    v = apply(s, &j, reason);
    shopmicro__events__v1__order_created__free_unpacked(ev, NULL);
    return v;
}

svc_err_t cat_saga_new_detached(const char *dsn, int statement_timeout_ms, cat_saga_t **out,
                                char errbuf[static SVC_ERRBUF_LEN])
{
    cat_saga_t *s = calloc(1, sizeof *s);
    svc_err_t err;

    *out = NULL;
    if (s == NULL) {
        svc_errbuf_set(errbuf, "out of memory");
        return SVC_ENOMEM;
    }
    err = cat_stock_new(dsn, statement_timeout_ms, &s->st, errbuf);
    if (err != SVC_OK) {
        free(s);
        return err;
    }
    *out = s;
    return SVC_OK;
}

svc_err_t cat_saga_start(const cat_config_t *cfg, cat_saga_t **out,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    static const char *const topics[] = {CAT_SAGA_TOPIC_IN, NULL};
    cat_saga_t *s;
    svc_err_t err;

    *out = NULL;
    err = cat_saga_new_detached(cfg->db_dsn, (int)cfg->db_statement_timeout_ms, &s, errbuf);
    if (err == SVC_OK)
        err = kfk_worker_start_cfg(&cfg->saga, topics, "catalog",
                                   &(kfk_worker_handler_t){cat_saga_handle, &cat_saga_batch_ops, s},
                                   MOD,
                                   "CATALOG_KAFKA_BROKERS=none: no stock is reserved, and "
                                   "orders stay PENDING",
                                   &s->w, errbuf);
    if (err != SVC_OK || s->w == NULL) { /* failed, or CATALOG_KAFKA_BROKERS=none */
        cat_saga_stop(s);
        return err;
    }
    *out = s;
    return SVC_OK;
}

void cat_saga_metrics(void *ctx, admin_buf_t *out)
{
    cat_saga_t *s = ctx;
    char *text;

    if (s == NULL || s->w == NULL)
        return;
    admin_buf_printf(out,
                     "# HELP shopmicro_catalog_saga_reserved_total Orders whose stock was "
                     "reserved.\n# TYPE shopmicro_catalog_saga_reserved_total counter\n"
                     "shopmicro_catalog_saga_reserved_total %llu\n",
                     (unsigned long long)atomic_load(&s->reserved));
    admin_buf_printf(out,
                     "# HELP shopmicro_catalog_saga_rejected_total Orders turned away "
                     "(some line short or unknown).\n"
                     "# TYPE shopmicro_catalog_saga_rejected_total counter\n"
                     "shopmicro_catalog_saga_rejected_total %llu\n",
                     (unsigned long long)atomic_load(&s->rejected));
    text = kfk_worker_metrics_text(s->w, "shopmicro_catalog_saga_consumer");
    admin_buf_printf(out, "%s", text != NULL ? text : "");
    free(text);
}

void cat_saga_check(const cat_saga_t *s, admin_check_t *c)
{
    c->name = "saga_consumer";
    if (s == NULL) {
        c->ok = true;
        snprintf(c->detail, sizeof c->detail, "off (CATALOG_KAFKA_BROKERS=none)");
        return;
    }
    c->ok = kfk_worker_healthy(s->w, c->detail, sizeof c->detail);
}

void cat_saga_stop(cat_saga_t *s)
{
    if (s == NULL)
        return;
    kfk_worker_stop(s->w);
    cat_stock_free(s->st);
    free(s);
}
