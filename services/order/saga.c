/* SPDX-License-Identifier: Apache-2.0 */
/*
 * saga.c - catalog's inventory events move orders (contract in saga.h):
 * ce_type dispatch, decoding and checks here, the one transaction in
 * store.c (ord_store_saga), the offset commit in pkg/kafka.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "saga.h"

/* The types this consumer reads, in the order of `kind` below. */
static const char *const known_types[] = {ORD_SAGA_RESERVED_TYPE, ORD_SAGA_REJECTED_TYPE, NULL};
enum { KIND_RESERVED, KIND_REJECTED };

static const char *status_name(ord_status_t s)
{
    switch (s) {
    case SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_PENDING:
        return "PENDING";
    case SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_CONFIRMED:
        return "CONFIRMED";
    case SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_CANCELLED:
        return "CANCELLED";
    default:
        return "UNSPECIFIED";
    }
}

static kfk_verdict_t poison(char *reason, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static kfk_verdict_t poison(char *reason, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, KFK_REASON_LEN, fmt, ap);
    va_end(ap);
    return KFK_POISON;
}

size_t ord_saga_cancel_reason(ord_shortage_t *const *shortages, size_t n, char *out, size_t cap)
{
    /* Room kept for "; and N more" while clauses follow (N: 20 digits at most). */
    enum { MORE_MAX = 32 };
    char clause[512]; /* a clause with a product id of 100 4-byte characters fits */
    size_t len = 0, i;

    if (cap == 0)
        return 0;
    out[0] = '\0';
    if (n == 0) {
        snprintf(out, cap, "stock reservation rejected");
        return strlen(out);
    }
    for (i = 0; i < n; i++) {
        const ord_shortage_t *s = shortages[i];
        size_t reserve = i + 1 < n ? MORE_MAX : 0;
        int k = s->unknown_product
                    ? snprintf(clause, sizeof clause, "%sunknown product %s", i ? "; " : "",
                               s->product_id)
                    : snprintf(clause, sizeof clause,
                               "%sinsufficient stock: product %s wanted %d, available %d",
                               i ? "; " : "", s->product_id, (int)s->wanted, (int)s->available);
        if (k < 0 || (size_t)k >= sizeof clause || len + (size_t)k + reserve >= cap)
            break;
        memcpy(out + len, clause, (size_t)k + 1);
        len += (size_t)k;
    }
    if (i < n)
        snprintf(out + len, cap - len, "%sand %zu more", len ? "; " : "", n - i);
    return strlen(out);
}

kfk_verdict_t ord_saga_db_verdict(svc_err_t err, bool batched)
{
    return err == SVC_EINVAL && !batched ? KFK_POISON : KFK_RETRY;
}

/* The order id an event names, checked: a canonical UUID (anything else
 * could never name one of our orders), and the record's key if it has one
 * (the contract: key = order id). */
static kfk_verdict_t check_order_id(const kfk_record_t *r, const char *id, char *reason)
{
    if (!svc_is_uuid(id))
        return poison(reason, "order_id \"%.64s\" is not a UUID", id);
    if (r->key != NULL && (r->key_len != strlen(id) || memcmp(r->key, id, r->key_len) != 0))
        return poison(reason, "the record's key is not its order_id %s", id);
    return KFK_HANDLED;
}

static kfk_verdict_t decode_reserved(const kfk_record_t *r, ord_saga_decoded_t *d, char *reason)
{
    Shopmicro__Events__V1__StockReserved *m =
        shopmicro__events__v1__stock_reserved__unpack(NULL, r->value_len, r->value);

    if (m == NULL)
        return poison(reason, "undecodable StockReserved payload (%zu bytes)", r->value_len);
    d->msg = &m->base;
    d->ev.order_id = m->order_id;
    d->ev.confirm = true;
    return check_order_id(r, m->order_id, reason);
}

static kfk_verdict_t decode_rejected(const kfk_record_t *r, ord_saga_decoded_t *d, char *reason)
{
    Shopmicro__Events__V1__StockRejected *m =
        shopmicro__events__v1__stock_rejected__unpack(NULL, r->value_len, r->value);
    kfk_verdict_t v;

    if (m == NULL)
        return poison(reason, "undecodable StockRejected payload (%zu bytes)", r->value_len);
    d->msg = &m->base;
    d->ev.order_id = m->order_id;
    v = check_order_id(r, m->order_id, reason);
    if (v != KFK_HANDLED)
        return v;
    /* An order has at most ORD_MAX_ITEMS lines, so at most as many can be
     * short; every product id goes into a text column and the reason. */
    if (m->n_shortages > ORD_MAX_ITEMS)
        return poison(reason, "StockRejected with %zu shortages; an order has at most %d lines",
                      m->n_shortages, ORD_MAX_ITEMS);
    for (size_t i = 0; i < m->n_shortages; i++) {
        long chars = svc_utf8_chars(m->shortages[i]->product_id);
        if (chars < 1 || chars > ORD_PRODUCT_ID_MAX_CHARS)
            return poison(reason,
                          "StockRejected shortages[%zu].product_id must be 1-%d "
                          "characters of UTF-8",
                          i, ORD_PRODUCT_ID_MAX_CHARS);
    }
    d->ev.shortages = m->shortages;
    d->ev.n_shortages = m->n_shortages;
    ord_saga_cancel_reason(m->shortages, m->n_shortages, d->reason, sizeof d->reason);
    d->ev.reason = d->reason;
    return KFK_HANDLED;
}

kfk_verdict_t ord_saga_decode(const kfk_record_t *r, ord_saga_decoded_t *d, char *reason)
{
    size_t kind = 0;
    kfk_verdict_t v;

    memset(d, 0, sizeof *d);
    if (r->ce_id == NULL)
        return poison(reason, "no ce_id header: the event cannot be deduplicated");
    if (strlen(r->ce_id) >= sizeof d->ce_id || svc_utf8_chars(r->ce_id) < 0)
        return poison(reason, "ce_id must be at most %zu bytes of UTF-8", sizeof d->ce_id - 1);
    snprintf(d->ce_id, sizeof d->ce_id, "%s", r->ce_id);
    if (!kfk_record_header(r, "ce_type", d->ce_type, sizeof d->ce_type))
        return poison(reason, "no ce_type header (or not text, or longer than %zu bytes)",
                      sizeof d->ce_type - 1);
    switch (kfk_ce_type_match(d->ce_type, known_types, &kind)) {
    case KFK_TYPE_KNOWN:
        break;
    case KFK_TYPE_NEWER:
        return poison(reason,
                      "ce_type %.160s is a newer schema than this consumer reads "
                      "(shopmicro.inventory.v1)",
                      d->ce_type);
    case KFK_TYPE_UNKNOWN:
        return poison(reason, "unknown ce_type %.160s", d->ce_type);
    }
    /* The request id the chain started with, when catalog passed it on: the
     * outbox row (and so OrderConfirmed/OrderCancelled) carries it further. */
    (void)kfk_record_header(r, "x-request-id", d->request_id, sizeof d->request_id);
    d->ev.event_id = d->ce_id;
    d->ev.event_type = d->ce_type;
    d->ev.request_id = d->request_id;
    v = kind == KIND_RESERVED ? decode_reserved(r, d, reason) : decode_rejected(r, d, reason);
    if (v != KFK_HANDLED)
        ord_saga_decoded_free(d);
    return v;
}

void ord_saga_decoded_free(ord_saga_decoded_t *d)
{
    if (d->msg != NULL)
        protobuf_c_message_free_unpacked(d->msg, NULL);
    d->msg = NULL;
}

kfk_verdict_t ord_saga_handle(void *ctx, const kfk_record_t *r, char *reason)
{
    const ord_saga_t *s = ctx;
    const char *moved_to;
    char errbuf[SVC_ERRBUF_LEN] = "";
    ord_saga_decoded_t d;
    ord_saga_effect_t effect = ORD_SAGA_NO_ORDER;
    ord_status_t before = SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_UNSPECIFIED;
    kfk_verdict_t v = ord_saga_decode(r, &d, reason);
    svc_err_t err;

    if (v != KFK_HANDLED) {
        /* Logged here, once: the consumer only writes the reason into the
         * dead letter's dlq-reason header. */
        svc_log_warn(ORD_SAGA_LOG_MODULE, "dead-lettering %s[%d]@%lld: %s", r->topic,
                     (int)r->partition, (long long)r->offset, reason);
        return v;
    }
    if (kfk_record_cancelled(r)) {
        ord_saga_decoded_free(&d);
        snprintf(reason, KFK_REASON_LEN, "stopping before the event was applied");
        return KFK_RETRY;
    }
    svc_log_set_request_id(d.request_id);
    err = ord_store_saga(s->store, &d.ev, r->deadline_ms * SVC_NS_PER_MS, &effect, &before, errbuf);
    moved_to = d.ev.confirm ? "CONFIRMED" : "CANCELLED";
    if (err != SVC_OK) {
        v = ord_saga_db_verdict(err, r->batched);
        /* libpq's text is cut to what the reason holds (KFK_REASON_LEN). */
        snprintf(reason, KFK_REASON_LEN, "%s: %.200s",
                 v == KFK_POISON ? "the database refused the event" : "database unavailable",
                 errbuf);
        if (v == KFK_POISON)
            svc_log_warn(ORD_SAGA_LOG_MODULE, "dead-lettering event %s for order %s: %s", d.ce_id,
                         d.ev.order_id, reason);
    } else {
        switch (effect) {
        case ORD_SAGA_MOVED:
            svc_log_info(ORD_SAGA_LOG_MODULE, "order %s: PENDING -> %s (event %s)", d.ev.order_id,
                         moved_to, d.ce_id);
            v = KFK_HANDLED;
            break;
        case ORD_SAGA_DUPLICATE:
            svc_log_debug(ORD_SAGA_LOG_MODULE, "event %s (%s) was handled before: no effect",
                          d.ce_id, d.ce_type);
            v = KFK_DUPLICATE;
            break;
        case ORD_SAGA_NOT_PENDING:
            svc_log_debug(ORD_SAGA_LOG_MODULE,
                          "order %s is %s, not PENDING: event %s (%s) changes nothing (a status "
                          "never moves back); its id is recorded",
                          d.ev.order_id, status_name(before), d.ce_id, d.ce_type);
            v = KFK_HANDLED;
            break;
        case ORD_SAGA_NO_ORDER:
            /* Not a race: order commits OrderCreated with the order in one
             * transaction, the relay publishes it only after that commit,
             * and catalog writes StockReserved/StockRejected only on reading
             * it. So an event for an order of this database always finds
             * it; one that does not is for some other database (misrouted,
             * made up, or this one restored from an older backup), and
             * waiting would never make it appear. */
            v = poison(reason, "no order %s in this database (event %s)", d.ev.order_id, d.ce_id);
            svc_log_warn(ORD_SAGA_LOG_MODULE, "dead-lettering %s[%d]@%lld: %s", r->topic,
                         (int)r->partition, (long long)r->offset, reason);
            break;
        }
    }
    svc_log_set_request_id("");
    ord_saga_decoded_free(&d);
    return v;
}

static svc_err_t tx_begin(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    const ord_saga_t *s = ctx;

    return ord_store_saga_begin(s->store, deadline_ms * SVC_NS_PER_MS, errbuf);
}

static svc_err_t tx_commit(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    const ord_saga_t *s = ctx;
    svc_err_t err = ord_store_saga_commit(s->store, deadline_ms * SVC_NS_PER_MS, errbuf);

    if (err != SVC_OK)
        svc_log_warn(ORD_SAGA_LOG_MODULE,
                     "commit failed (%s): the moves logged since the last "
                     "commit are applied again (any kept after all are "
                     "known by their event ids)",
                     errbuf);
    return err;
}

static void tx_rollback(void *ctx)
{
    const ord_saga_t *s = ctx;

    ord_store_saga_rollback(s->store);
}

const kfk_batch_ops_t ord_saga_batch_ops = {tx_begin, tx_commit, tx_rollback};
