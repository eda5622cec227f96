/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc.c - OrderService: one function per RPC, business rules only.
 * Decoding, deadlines, status mapping and logging are pkg/rpc's job; the
 * rules themselves are in lines.c, prices in pricing.c, SQL in store.c.
 */
#include <string.h>

#include "caller.h"
#include "lines.h"
#include "order.h"
#include "pricing.h"
#include "store.h"

#define LOG_MOD         "order"
#define IDEMPOTENCY_KEY "idempotency-key" /* gRPC metadata; HTTP Idempotency-Key */
/* Header metadata of a replayed CreateOrder answer (respond_replayed). */
#define ORD_REPLAYED_MD "idempotent-replayed"
#define EXPIRE_BATCH    1000
#define EXPIRE_MS       200 /* at most this much of a call goes to housekeeping */

typedef Shopmicro__Order__V1__CreateOrderRequest create_req_t;
typedef Shopmicro__Order__V1__CreateOrderResponse create_resp_t;
typedef Shopmicro__Order__V1__GetOrderRequest get_req_t;

void ord_keys_expire(struct db_conn *st, const ord_config_t *cfg, uint64_t deadline_ns,
                     int max_batches)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    int64_t total = 0, n = EXPIRE_BATCH;

    for (int i = 0; i < max_batches && n == EXPIRE_BATCH; i++) {
        if (ord_store_expire_keys(st, cfg->idempotency_ttl_s, EXPIRE_BATCH, deadline_ns, &n,
                                  errbuf) != SVC_OK) {
            svc_log_warn(LOG_MOD, "expiring idempotency keys: %s", errbuf);
            break;
        }
        total += n;
    }
    if (total > 0)
        svc_log_info(LOG_MOD, "expired %lld idempotency keys older than %lld s", (long long)total,
                     (long long)cfg->idempotency_ttl_s);
}

/* Every Nth CreateOrder on a worker first expires one batch of old keys,
 * with a short deadline of its own inside the call's. */
static void expire_tick(ord_worker_t *w, const ord_config_t *cfg, uint64_t deadline_ns)
{
    uint64_t limit = svc_now_ns() + (uint64_t)EXPIRE_MS * SVC_NS_PER_MS;

    if (++w->creates % (uint64_t)cfg->idempotency_cleanup_every != 0)
        return;
    ord_keys_expire(w->store, cfg, limit < deadline_ns ? limit : deadline_ns, 1);
}

/*
 * The call's idempotency key, or NULL in *out when it has none. The key is
 * honoured byte for byte or the call is refused, never run as if it had no
 * key: given twice (which one would be meant?), outside the rule
 * (svc_idempotency_key_valid, the gateway's rule too; a NUL byte inside is
 * outside it, so nothing reads a shorter key than was sent) or impossible to
 * keep for want of memory.
 */
static svc_err_t idempotency_key(rpc_ctx_t *ctx, const char **out,
                                 char errbuf[static SVC_ERRBUF_LEN])
{
    const char *v;
    size_t len;
    char *copy;

    *out = NULL;
    switch (rpc_ctx_metadata_n(ctx, IDEMPOTENCY_KEY, &v, &len)) {
    case RPC_MD_ABSENT:
        return SVC_OK;
    case RPC_MD_REPEATED:
        svc_errbuf_set(errbuf, IDEMPOTENCY_KEY " must be given once, not in several entries");
        rpc_ctx_set_error_reason(ctx, "INVALID_IDEMPOTENCY_KEY");
        return SVC_EINVAL;
    case RPC_MD_ONE:
        break;
    }
    if (!svc_idempotency_key_valid(v, len)) {
        svc_errbuf_set(errbuf,
                       IDEMPOTENCY_KEY " must be %d-%d printable ASCII characters (0x%02X-0x%02X)",
                       SVC_IDEMPOTENCY_KEY_MIN, SVC_IDEMPOTENCY_KEY_MAX, SVC_IDEMPOTENCY_KEY_FIRST,
                       SVC_IDEMPOTENCY_KEY_LAST);
        rpc_ctx_set_error_reason(ctx, "INVALID_IDEMPOTENCY_KEY");
        return SVC_EINVAL;
    }
    /* The store takes a C string. INTERNAL, not RESOURCE_EXHAUSTED: the
     * same request would exhaust the arena again, so "retry later" (429 at
     * the gateway) would only make the client loop. */
    copy = rpc_ctx_alloc(ctx, len + 1);
    if (copy == NULL) {
        svc_log_error(LOG_MOD,
                      "CreateOrder refused: no call memory left to keep its " IDEMPOTENCY_KEY);
        svc_errbuf_set(errbuf, "cannot keep " IDEMPOTENCY_KEY ": the call's memory is exhausted "
                               "(nothing was written)");
        return SVC_EINTERNAL;
    }
    memcpy(copy, v, len);
    copy[len] = '\0';
    *out = copy;
    return SVC_OK;
}

/* The stored answer for key: SVC_OK (same request: replay it), SVC_EEXIST
 * (another request used the key), SVC_ENOTFOUND (unused), or a db error. */
static svc_err_t replay(rpc_ctx_t *ctx, ord_store_t *st, const char *key, const char *hash,
                        uint64_t deadline_ns, ord_created_t *out,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    char stored[ORD_FINGERPRINT_LEN] = "";
    svc_err_t err = ord_store_key_get(st, key, deadline_ns, stored, out, errbuf);

    if (err == SVC_OK && strcmp(stored, hash) != 0) {
        svc_errbuf_set(errbuf, "idempotency key reused with a different request");
        rpc_ctx_set_error_reason(ctx, "IDEMPOTENCY_KEY_REUSED");
        return SVC_EEXIST;
    }
    return err;
}

/* The CreateOrder answer, in the call's arena. */
static svc_err_t respond(rpc_ctx_t *ctx, const ord_created_t *created, ProtobufCMessage **out)
{
    create_resp_t *resp = rpc_ctx_alloc(ctx, sizeof *resp);

    if (resp == NULL)
        return SVC_ENOMEM;
    shopmicro__order__v1__create_order_response__init(resp);
    resp->id = rpc_ctx_strdup(ctx, created->id);
    resp->status = created->status;
    resp->total_cents = created->total_cents;
    if (resp->id == NULL)
        return SVC_ENOMEM;
    *out = &resp->base;
    return SVC_OK;
}

/* The answer of an earlier call with the same Idempotency-Key. It says so
 * in header metadata, as Stripe's API does in its Idempotent-Replayed
 * header (the gateway shows it as Grpc-Metadata-Idempotent-Replayed), so a
 * client can tell a replay from a new order. */
static svc_err_t respond_replayed(rpc_ctx_t *ctx, const ord_created_t *created,
                                  ProtobufCMessage **out)
{
    rpc_ctx_add_header_md(ctx, ORD_REPLAYED_MD, "true");
    return respond(ctx, created, out);
}

/* The index of the first item of the request with this product. */
static size_t first_item_of(const create_req_t *req, const char *product_id)
{
    size_t i = 0;

    while (i + 1 < req->n_items && strcmp(req->items[i]->product_id, product_id) != 0)
        i++;
    return i;
}

/* What the answer says when pricing failed (pricing.h, ord_price_fault_t);
 * returns err. pricing.c writes its texts for the client. */
static svc_err_t pricing_failed(rpc_ctx_t *ctx, const create_req_t *req, const ord_line_t *lines,
                                svc_err_t err, const ord_price_fault_t *fault)
{
    char field[ORD_FIELD_PATH_LEN];

    rpc_ctx_set_message_public(ctx);
    if (fault->reason != NULL)
        rpc_ctx_set_error_reason(ctx, fault->reason);
    if (fault->line >= 0) {
        snprintf(field, sizeof field, "items[%zu].product_id",
                 first_item_of(req, lines[fault->line].product_id));
        rpc_ctx_set_bad_field(ctx, field);
    }
    if (err == SVC_EUNAVAIL || err == SVC_ETIMEDOUT) { /* the catalog's failure, not ours */
        /* Our catalog client has already retried and may have opened its
         * breaker; this service is fine. Saying so keeps the gateway from
         * retrying again or opening its breaker for the order service; the
         * pushback tells it (and its client: HTTP Retry-After) when our
         * breaker lets the catalog be tried again. */
        rpc_ctx_add_error_metadata(ctx, "dependency", "catalog");
        rpc_ctx_mark_dependency_failure(ctx);
        if (fault->retry_after_ms > 0)
            rpc_ctx_set_pushback_ms(ctx, fault->retry_after_ms);
    }
    return err;
}

static svc_err_t create_order(rpc_ctx_t *ctx, const ProtobufCMessage *in, ProtobufCMessage **out,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    const create_req_t *req = (const create_req_t *)in;
    const char *key;
    uint64_t deadline = rpc_ctx_deadline(ctx);
    char hash[ORD_FINGERPRINT_LEN] = "";
    ord_line_t lines[ORD_MAX_ITEMS];
    ord_created_t created;
    ord_new_order_t o;
    ord_worker_t *w;
    ord_app_t *app;
    bool taken = false;
    ord_price_fault_t fault;
    char field[ORD_FIELD_PATH_LEN];
    size_t n = 0;
    svc_err_t err;

    ord_caller_t caller;
    const char *customer;

    err = ord_caller_get(ctx, PR_SCOPE_ORDERS_WRITE, &caller, errbuf);
    if (err == SVC_OK)
        err = ord_caller_customer(&caller, req->customer_id, &customer, errbuf);
    if (err != SVC_OK)
        return err;
    err = ord_lines_build(customer, req->items, req->n_items, lines, &n, field, errbuf);
    if (err != SVC_OK) {
        rpc_ctx_set_bad_field(ctx, field);
        return err;
    }
    err = idempotency_key(ctx, &key, errbuf);
    if (err != SVC_OK)
        return err;
    w = rpc_ctx_worker(ctx);
    app = rpc_ctx_app(ctx);
    expire_tick(w, app->cfg, deadline);

    /* A replay is answered from the database alone: it must work while the
     * catalog is down, and must not price anything. */
    if (key != NULL) {
        err = ord_lines_fingerprint(customer, lines, n, hash);
        if (err != SVC_OK) {
            svc_errbuf_set(errbuf, "cannot fingerprint the request: out of memory (nothing was "
                                   "written)");
            return SVC_EINTERNAL; /* as for the key's copy: a retry would meet the same */
        }
        err = replay(ctx, w->store, key, hash, deadline, &created, errbuf);
        if (err != SVC_ENOTFOUND)
            return err == SVC_OK ? respond_replayed(ctx, &created, out) : err;
    }
    /* Every price is known before the transaction begins, so a pricing
     * failure leaves nothing behind: no order, no item, no outbox row. */
    err = ord_price_lines(app->catalog, lines, n, deadline, &fault, errbuf);
    if (err != SVC_OK)
        return pricing_failed(ctx, req, lines, err, &fault);
    o = (ord_new_order_t){customer, lines, n, 0, key, hash};
    err = ord_lines_total(lines, n, &o.total_cents, errbuf);
    if (err != SVC_OK)
        return err;
    err = ord_store_create(w->store, &o, deadline, &created, &taken, errbuf);
    if (err != SVC_OK && ord_store_outcome_unknown(w->store)) {
        /* The database's detail is for the log; the client needs to know
         * that the order may exist and how to find out. */
        svc_log_warn(LOG_MOD, "CreateOrder's outcome is unknown (%s key): %s",
                     key != NULL ? "with a" : "without a", errbuf);
        svc_errbuf_set(errbuf, "the database did not confirm the order: " ORD_UNKNOWN_NOTE);
        rpc_ctx_set_message_public(ctx);
        rpc_ctx_set_error_reason(ctx, "OUTCOME_UNKNOWN");
    }
    if (err == SVC_OK && taken) {
        /* Another call with this key committed while we priced; our
         * transaction waited for it and wrote nothing. Its answer is ours. */
        svc_log_info(LOG_MOD, "idempotency key race lost: answering with the winner's order");
        err = replay(ctx, w->store, key, hash, deadline, &created, errbuf);
        if (err == SVC_ENOTFOUND) {
            svc_errbuf_set(errbuf, "idempotency key expired during the call; retry");
            rpc_ctx_set_error_reason(ctx, "IDEMPOTENCY_KEY_EXPIRED");
            err = SVC_EABORTED;
        }
        return err == SVC_OK ? respond_replayed(ctx, &created, out) : err;
    }
    return err == SVC_OK ? respond(ctx, &created, out) : err;
}

static svc_err_t get_order(rpc_ctx_t *ctx, const ProtobufCMessage *in, ProtobufCMessage **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    const get_req_t *req = (const get_req_t *)in;
    svc_alloc_t a = rpc_ctx_allocator(ctx);
    ord_worker_t *w;
    ord_order_t *o = NULL;
    ord_caller_t caller;
    svc_err_t err;

    err = ord_caller_get(ctx, PR_SCOPE_ORDERS_READ | PR_SCOPE_ORDERS_ADMIN, &caller, errbuf);
    if (err != SVC_OK)
        return err;
    if (!svc_is_uuid(req->id)) {
        svc_errbuf_set(errbuf, "order not found");
        rpc_ctx_set_error_reason(ctx, "ORDER_NOT_FOUND");
        return SVC_ENOTFOUND;
    }
    w = rpc_ctx_worker(ctx);
    err = ord_store_get(w->store, req->id, rpc_ctx_deadline(ctx), &a, &o, errbuf);
    if (err == SVC_OK && !ord_caller_may_read(&caller, o->customer_id)) {
        o = NULL; /* in the call's arena: nothing to free */
        err = SVC_ENOTFOUND;
    }
    if (err == SVC_ENOTFOUND) {
        svc_errbuf_set(errbuf, "order not found");
        rpc_ctx_set_error_reason(ctx, "ORDER_NOT_FOUND");
    }
    *out = (ProtobufCMessage *)o;
    return err;
}

#define METHOD(name) "/shopmicro.order.v1.OrderService/" name

const rpc_method_t ord_methods[] = {
    {METHOD("CreateOrder"), &shopmicro__order__v1__create_order_request__descriptor, create_order},
    {METHOD("GetOrder"), &shopmicro__order__v1__get_order_request__descriptor, get_order},
};
const size_t ord_methods_count = SVC_COUNTOF(ord_methods);

const rs_method_t ord_client_methods[] = {
    {.path = METHOD("CreateOrder"), .idempotency = RS_NOT_IDEMPOTENT},
    {.path = METHOD("GetOrder"), .idempotency = RS_IDEMPOTENT},
};
const size_t ord_client_methods_count = SVC_COUNTOF(ord_client_methods);
