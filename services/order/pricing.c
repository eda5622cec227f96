/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pricing.c - an order's prices: one BatchGetProducts call for all its lines.
 *
 * One call per order, whatever its number of lines: one round trip, one
 * statement in the catalog's database, and one outcome for the breaker. It
 * used to be one GetProduct per line, all in flight at once; besides costing
 * a call and a database round trip per line, that needed care after an
 * outage, when a half-open breaker lets a single trial through and would
 * have refused the order's other lines (docs/order.md, "Pricing").
 */
#include <stdio.h>

#include "pricing.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"

typedef Shopmicro__Catalog__V1__Product product_t;
typedef Shopmicro__Catalog__V1__BatchGetProductsRequest batch_req_t;
typedef Shopmicro__Catalog__V1__BatchGetProductsResponse batch_resp_t;

svc_err_t ord_catalog_new(const ord_config_t *cfg, rs_grpc_client_t **out,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    static const rs_method_t methods[] = {
        {.path = ORD_CATALOG_BATCH_GET, .idempotency = RS_IDEMPOTENT},
    };
    rs_grpc_opts_t o;

    rs_grpc_opts_init(&o);
    o.target = cfg->catalog_addr;
    o.upstream.name = "catalog";
    o.upstream.methods = methods;
    o.upstream.n_methods = SVC_COUNTOF(methods);
    o.upstream.policy.attempt_timeout_ms = (uint32_t)cfg->catalog_attempt_timeout_ms;
    o.upstream.policy.max_attempts = (uint32_t)cfg->catalog_max_attempts;
    o.upstream.policy.backoff_base_ms = (uint32_t)cfg->catalog_backoff_base_ms;
    o.upstream.policy.backoff_cap_ms = (uint32_t)cfg->catalog_backoff_cap_ms;
    o.upstream.breaker.failures = (uint32_t)cfg->catalog_breaker_failures;
    o.upstream.breaker.cooldown_ms = (uint32_t)cfg->catalog_breaker_cooldown_ms;
    o.upstream.max_concurrent = (uint32_t)cfg->catalog_max_concurrent;
    return rs_grpc_client_new(&o, out, errbuf);
}

/* Its text, for the order's client: the catalog's own words when it shed
 * the call (RESOURCE_EXHAUSTED comes only from the catalog), else what the
 * resilience layer decided. An UNAVAILABLE or a timeout may carry gRPC
 * core's text (addresses: "ipv4:10.0.0.7:25051"), which goes to the log,
 * one line per reason a second, under the request id. */
static const char *client_text(const rs_grpc_result_t *res)
{
    char key[64];

    if (res->err == SVC_EEXHAUSTED)
        return res->message;
    snprintf(key, sizeof key, "pricing %s", rs_reason_name(res->reason));
    svc_log_write_repeat(SVC_LOG_WARN, "order.pricing", key, "",
                         "BatchGetProducts failed (%s, reason=%s attempts=%u): %s",
                         svc_err_name(res->err), rs_reason_name(res->reason), res->attempts,
                         res->message);
    return rs_reason_text(res->reason);
}

/* Turns a failed call into the order's answer. INVALID_ARGUMENT and
 * UNIMPLEMENTED do not mean that the catalog is down but that the two
 * services disagree (a request it refuses; a catalog older than
 * BatchGetProducts): INTERNAL, not a 503 to wait out. The texts of the
 * other two are written for the order's clients (rpc.c marks them so). */
static svc_err_t describe(const rs_grpc_result_t *res, ord_price_fault_t *fault,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    fault->retry_after_ms = res->retry_after_ms;
    fault->reason = rs_reason_constant(res->reason);
    switch (res->err) {
    case SVC_ETIMEDOUT:
        svc_errbuf_set(errbuf, "pricing: deadline exceeded: %s (reason=%s attempts=%u)",
                       client_text(res), rs_reason_name(res->reason), res->attempts);
        return SVC_ETIMEDOUT;
    case SVC_EINVAL:
    case SVC_EUNIMPL:
        svc_errbuf_set(errbuf, "pricing: the catalog refused BatchGetProducts: %s %s",
                       svc_err_name(res->err), res->message);
        fault->reason = "CATALOG_MISMATCH";
        return SVC_EINTERNAL;
    default:
        svc_errbuf_set(errbuf, "pricing: catalog unavailable: %s (reason=%s attempts=%u)",
                       client_text(res), rs_reason_name(res->reason), res->attempts);
        return SVC_EUNAVAIL;
    }
}

/* products[i] answers lines[i]; an empty id means no such product. */
static svc_err_t apply_prices(ord_line_t *lines, size_t n, const batch_resp_t *r,
                              ord_price_fault_t *fault, char errbuf[static SVC_ERRBUF_LEN])
{
    if (r->n_products != n) {
        svc_errbuf_set(errbuf, "pricing: catalog answered %zu products for %zu ids", r->n_products,
                       n);
        fault->reason = "CATALOG_MISMATCH";
        return SVC_EINTERNAL;
    }
    for (size_t i = 0; i < n; i++) {
        const product_t *p = r->products[i];

        if (p->id[0] == '\0') {
            svc_errbuf_set(errbuf, "unknown product %s", lines[i].product_id);
            fault->reason = "PRODUCT_NOT_FOUND";
            fault->line = (int)i;
            return SVC_EINVAL;
        }
        if (p->price_cents < 0) {
            svc_errbuf_set(errbuf, "catalog returned price %lld for product %s",
                           (long long)p->price_cents, lines[i].product_id);
            fault->reason = "CATALOG_MISMATCH";
            return SVC_EINTERNAL;
        }
        lines[i].unit_price_cents = p->price_cents;
    }
    return SVC_OK;
}

svc_err_t ord_price_lines(rs_grpc_client_t *cl, ord_line_t *lines, size_t n, uint64_t deadline_ns,
                          ord_price_fault_t *fault, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *ids[ORD_MAX_ITEMS];
    batch_req_t req = SHOPMICRO__CATALOG__V1__BATCH_GET_PRODUCTS_REQUEST__INIT;
    const char *rid = svc_log_request_id();
    rpc_md_t md = {"x-request-id", rid};
    rs_grpc_call_opts_t o = {deadline_ns, NULL, &md, rid[0] != '\0' ? 1 : 0, 0};
    ProtobufCMessage *resp = NULL;
    rs_grpc_result_t res;
    svc_err_t err;

    *fault = (ord_price_fault_t){.reason = NULL, .line = -1};
    if (n < 1 || n > ORD_MAX_ITEMS) {
        svc_errbuf_set(errbuf, "pricing: %zu lines, 1-%d", n, ORD_MAX_ITEMS);
        return SVC_EINTERNAL;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = lines[i].product_id;
    req.ids = (char **)ids;
    req.n_ids = n;
    if (rs_grpc_call(cl, ORD_CATALOG_BATCH_GET, &req.base,
                     &shopmicro__catalog__v1__batch_get_products_response__descriptor, &resp, &o,
                     &res) != SVC_OK) {
        return describe(&res, fault, errbuf);
    }
    err = apply_prices(lines, n, (const batch_resp_t *)resp, fault, errbuf);
    protobuf_c_message_free_unpacked(resp, NULL);
    return err;
}
