/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes.c - the route table, and the template matcher that grpc-gateway's
 * ServeMux amounts to for these templates (runtime/mux.go, pattern.go).
 */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "routes.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "shopmicro/order/v1/order.pb-c.h"

#define CATALOG(m)     GW_UPSTREAM_CATALOG, "/shopmicro.catalog.v1.CatalogService/" #m
#define ORDER(m)       GW_UPSTREAM_ORDER, "/shopmicro.order.v1.OrderService/" #m
#define MSG(pkg, name) &shopmicro__##pkg##__v1__##name##__descriptor

/* clang-format off */
#define PUBLIC          0
#define CATALOG_WRITE   PR_SCOPE_CATALOG_WRITE
#define ORDERS_WRITE    PR_SCOPE_ORDERS_WRITE
#define ORDERS_READ     (PR_SCOPE_ORDERS_READ | PR_SCOPE_ORDERS_ADMIN)
const gw_route_t gw_routes[] = {
    /* method  template              upstream + rpc          request                                   response                                      body         retries            served stale    callers        rate class      local  schema */
    {"POST", "/v1/products",      CATALOG(CreateProduct), MSG(catalog, create_product_request), MSG(catalog, product),                GW_BODY_ALL,  RS_NOT_IDEMPOTENT, GW_STALE_NEVER, CATALOG_WRITE, "write", NULL, NULL},
    {"GET",  "/v1/products",      CATALOG(ListProducts),  MSG(catalog, list_products_request),  MSG(catalog, list_products_response), GW_BODY_NONE, RS_IDEMPOTENT,     GW_STALE_OK,    PUBLIC,        "read",  NULL, NULL},
    {"GET",  "/v1/products/{id}", CATALOG(GetProduct),    MSG(catalog, get_product_request),    MSG(catalog, product),                GW_BODY_NONE, RS_IDEMPOTENT,     GW_STALE_OK,    PUBLIC,        "read",  NULL, NULL},
    {"POST", "/v1/orders",        ORDER(CreateOrder),     MSG(order, create_order_request),     MSG(order, create_order_response),    GW_BODY_ALL,  RS_NOT_IDEMPOTENT, GW_STALE_NEVER, ORDERS_WRITE,  "write", NULL, NULL},
    {"GET",  "/v1/orders/{id}",   ORDER(GetOrder),        MSG(order, get_order_request),        MSG(order, order),                    GW_BODY_NONE, RS_IDEMPOTENT,     GW_STALE_NEVER, ORDERS_READ,   "read",  NULL, NULL},
    /* operations endpoints (local); the rest is on the admin port (adminport.h) */
    {"GET",  "/healthz",      .local = gw_ops_healthz, .local_schema = GW_OPS_STATUS_SCHEMA},
    {"GET",  "/readyz",       .local = gw_ops_readyz,  .local_schema = GW_OPS_STATUS_SCHEMA},
    /* the API's description (gateway/tools/openapi_gen.c makes it from this table) */
    {"GET",  "/openapi.json", .local = gw_ops_openapi, .local_schema = "{\"type\":\"object\"}"},
};
/* clang-format on */
const size_t gw_n_routes = SVC_COUNTOF(gw_routes);

static const char *const method_names[] = {
#define XX(m) #m,
    GW_METHODS(XX)
#undef XX
};

/* The GW_METHOD_BIT_ of a method, 0 for one outside GW_METHODS. */
static unsigned method_bit(const char *method, size_t len)
{
    for (size_t i = 0; i < SVC_COUNTOF(method_names); i++)
        if (strlen(method_names[i]) == len && memcmp(method_names[i], method, len) == 0)
            return 1u << i;
    return 0;
}

size_t gw_route_allow_text(unsigned allow, char *buf, size_t cap)
{
    svc_text_t t = {buf, cap, 0};

    if (cap > 0)
        buf[0] = '\0';
    for (size_t i = 0; i < SVC_COUNTOF(method_names); i++)
        if (allow & (1u << i))
            svc_text_printf(&t, "%s%s", t.len > 0 ? ", " : "", method_names[i]);
    return t.len;
}

const char *gw_upstream_name(gw_upstream_id_t id)
{
    switch (id) {
    case GW_UPSTREAM_CATALOG:
        return "catalog";
    case GW_UPSTREAM_ORDER:
        return "order";
    case GW_UPSTREAM_COUNT:
        break;
    }
    return "unknown";
}

bool gw_upstream_reads_caller(gw_upstream_id_t id)
{
    return id == GW_UPSTREAM_ORDER;
}

bool gw_upstream_keeps_keys(gw_upstream_id_t id)
{
    return id == GW_UPSTREAM_ORDER;
}

/* Splits off the segment starting at *p (just after a '/'): it ends at the
 * next '/' or at end. Advances *p past that '/'; *more says whether there
 * was one (so another segment, possibly empty, follows). */
static void next_segment(const char **p, const char *end, const char **seg, size_t *len, bool *more)
{
    const char *s = *p, *slash = memchr(s, '/', (size_t)(end - s));

    *seg = s;
    *len = (size_t)((slash != NULL ? slash : end) - s);
    *more = slash != NULL;
    *p = slash != NULL ? slash + 1 : end;
}

/* A variable segment "{field}" or "{field=*}": sets its field name. */
static bool parse_var(const char *seg, size_t len, const char **field, size_t *field_len)
{
    const char *eq;

    if (len < 3 || seg[0] != '{' || seg[len - 1] != '}')
        return false;
    *field = seg + 1;
    *field_len = len - 2;
    eq = memchr(*field, '=', *field_len);
    if (eq != NULL) {
        if ((size_t)(seg + len - 1 - eq) != 2 || eq[1] != '*')
            return false; /* only "=*": no "**" or sub-templates in this gateway */
        *field_len = (size_t)(eq - *field);
    }
    return *field_len > 0;
}

/* Matches a path (starting with '/') against one template. */
static bool match_template(const char *pattern, const char *path, size_t path_len, gw_match_t *m)
{
    const char *pp = pattern + 1, *pend = pattern + strlen(pattern);
    const char *qp = path + 1, *qend = path + path_len;
    bool pmore = true, qmore = true;

    m->n_vars = 0;
    while (pmore && qmore) {
        const char *pseg, *qseg, *field;
        size_t plen, qlen, flen;

        next_segment(&pp, pend, &pseg, &plen, &pmore);
        next_segment(&qp, qend, &qseg, &qlen, &qmore);
        if (parse_var(pseg, plen, &field, &flen)) {
            if (m->n_vars == GW_MAX_PATH_VARS)
                return false;
            m->vars[m->n_vars++] = (gw_path_var_t){field, flen, qseg, qlen};
        } else if (plen != qlen || memcmp(pseg, qseg, plen) != 0) {
            return false;
        }
    }
    return !pmore && !qmore;
}

gw_match_result_t gw_route_match(const gw_route_t *routes, size_t n, const char *method,
                                 size_t method_len, const char *path, size_t path_len,
                                 gw_match_t *m)
{
    unsigned allow = 0;
    gw_match_t tmp;

    if (path_len == 0 || path[0] != '/')
        return GW_MATCH_BAD_PATH;
    for (size_t i = n; i-- > 0;) {
        if (!match_template(routes[i].pattern, path, path_len, &tmp))
            continue;
        if (strlen(routes[i].method) == method_len &&
            memcmp(routes[i].method, method, method_len) == 0) {
            *m = tmp;
            m->route = &routes[i];
            return GW_MATCH_OK;
        }
        allow |= method_bit(routes[i].method, strlen(routes[i].method));
    }
    if (allow == 0)
        return GW_MATCH_NOT_FOUND;
    m->allow = allow;
    return GW_MATCH_WRONG_METHOD;
}

/* The field a (possibly dotted) path names, walking singular messages. */
static bool field_exists(const ProtobufCMessageDescriptor *d, const char *path, size_t len)
{
    char name[GW_MAX_FIELD_PATH + 1];
    const char *dot;
    const ProtobufCFieldDescriptor *f;

    for (;;) {
        dot = memchr(path, '.', len);
        size_t part = dot != NULL ? (size_t)(dot - path) : len;
        if (part == 0 || part > GW_MAX_FIELD_PATH)
            return false;
        memcpy(name, path, part);
        name[part] = '\0';
        f = protobuf_c_message_descriptor_get_field_by_name(d, name);
        if (f == NULL)
            return false;
        if (dot == NULL)
            return f->type != PROTOBUF_C_TYPE_MESSAGE;
        if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED)
            return false;
        d = f->descriptor;
        path = dot + 1;
        len -= part + 1;
    }
}

static svc_err_t validate_template(const gw_route_t *r, size_t row,
                                   char errbuf[static SVC_ERRBUF_LEN])
{
    const char *p, *end, *seg, *field;
    size_t len, flen, n_vars = 0;
    bool more = true;

    if (r->pattern == NULL || r->pattern[0] != '/') {
        svc_errbuf_set(errbuf, "route %zu: template must start with '/'", row);
        return SVC_EINVAL;
    }
    p = r->pattern + 1;
    end = r->pattern + strlen(r->pattern);
    while (more) {
        next_segment(&p, end, &seg, &len, &more);
        if (len > 0 && seg[0] == '{') {
            if (!parse_var(seg, len, &field, &flen) || flen > GW_MAX_FIELD_PATH) {
                svc_errbuf_set(errbuf, "route %zu (%s): bad variable '%.*s'", row, r->pattern,
                               (int)len, seg);
                return SVC_EINVAL;
            }
            if (++n_vars > GW_MAX_PATH_VARS) {
                svc_errbuf_set(errbuf, "route %zu (%s): more than %d variables", row, r->pattern,
                               GW_MAX_PATH_VARS);
                return SVC_EINVAL;
            }
            if (r->rpc == NULL || !field_exists(r->request, field, flen)) {
                svc_errbuf_set(errbuf,
                               "route %zu (%s): variable '%.*s' names no scalar field of "
                               "the request",
                               row, r->pattern, (int)flen, field);
                return SVC_EINVAL;
            }
        } else if (len == 0) {
            svc_errbuf_set(errbuf, "route %zu (%s): empty segment", row, r->pattern);
            return SVC_EINVAL;
        } else if (memchr(seg, '{', len) != NULL || memchr(seg, '}', len) != NULL) {
            svc_errbuf_set(errbuf, "route %zu (%s): braces inside a literal segment", row,
                           r->pattern);
            return SVC_EINVAL;
        }
    }
    return SVC_OK;
}

/* The guard's columns: a stale answer is shared by every caller, so only
 * a public route may have one; a probe carries no token and must not be
 * refused for its rate. */
static svc_err_t validate_callers(const gw_route_t *r, size_t row,
                                  char errbuf[static SVC_ERRBUF_LEN])
{
    if (r->stale == GW_STALE_OK && r->scopes != 0) {
        svc_errbuf_set(errbuf,
                       "route %zu (%s %s): a route served stale must be public (the "
                       "stale cache is shared by every caller)",
                       row, r->method, r->pattern != NULL ? r->pattern : "?");
        return SVC_EINVAL;
    }
    if (r->rpc == NULL && (r->scopes != 0 || r->rate_class != NULL)) {
        svc_errbuf_set(errbuf, "route %zu (%s): a local route is public and not rate limited", row,
                       r->pattern != NULL ? r->pattern : "?");
        return SVC_EINVAL;
    }
    return SVC_OK;
}

static svc_err_t validate_row(const gw_route_t *r, size_t row, char errbuf[static SVC_ERRBUF_LEN])
{
    if (r->method == NULL || r->method[0] == '\0') {
        svc_errbuf_set(errbuf, "route %zu: no method", row);
        return SVC_EINVAL;
    }
    if (method_bit(r->method, strlen(r->method)) == 0) {
        svc_errbuf_set(errbuf,
                       "route %zu: '%s' is not a method an Allow header can list "
                       "(GW_METHODS)",
                       row, r->method);
        return SVC_EINVAL;
    }
    if (r->rpc == NULL) {
        if (r->local == NULL) {
            svc_errbuf_set(errbuf, "route %zu (%s): neither an rpc nor a local function", row,
                           r->pattern != NULL ? r->pattern : "?");
            return SVC_EINVAL;
        }
    } else {
        if (r->local != NULL || r->request == NULL || r->response == NULL ||
            r->upstream >= GW_UPSTREAM_COUNT || r->rpc[0] != '/' ||
            (r->body != GW_BODY_NONE && r->body != GW_BODY_ALL) ||
            (r->idempotency != RS_IDEMPOTENT && r->idempotency != RS_NOT_IDEMPOTENT)) {
            svc_errbuf_set(errbuf,
                           "route %zu (%s %s): incomplete gRPC row (upstream, rpc path, "
                           "messages, body and a declared idempotency are required)",
                           row, r->method, r->pattern != NULL ? r->pattern : "?");
            return SVC_EINVAL;
        }
    }
    /* A stale answer stands in for a read only: a write must reach the
     * upstream or fail, and a body would be part of what was asked. */
    if (r->stale != GW_STALE_NEVER &&
        (r->stale != GW_STALE_OK || r->rpc == NULL || strcmp(r->method, "GET") != 0 ||
         r->idempotency != RS_IDEMPOTENT || r->body != GW_BODY_NONE)) {
        svc_errbuf_set(errbuf,
                       "route %zu (%s %s): only an idempotent GET without a body may be "
                       "served stale",
                       row, r->method, r->pattern != NULL ? r->pattern : "?");
        return SVC_EINVAL;
    }
    return validate_callers(r, row, errbuf) != SVC_OK ? SVC_EINVAL
                                                      : validate_template(r, row, errbuf);
}

svc_err_t gw_routes_validate(const gw_route_t *routes, size_t n, char errbuf[static SVC_ERRBUF_LEN])
{
    for (size_t i = 0; i < n; i++) {
        svc_err_t err = validate_row(&routes[i], i, errbuf);
        if (err != SVC_OK)
            return err;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(routes[i].method, routes[j].method) == 0 &&
                strcmp(routes[i].pattern, routes[j].pattern) == 0) {
                svc_errbuf_set(errbuf, "routes %zu and %zu: both %s %s", j, i, routes[i].method,
                               routes[i].pattern);
                return SVC_EINVAL;
            }
        }
    }
    return SVC_OK;
}
