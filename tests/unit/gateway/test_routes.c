/* SPDX-License-Identifier: Apache-2.0 */
/* test_routes.c - gateway/routes.c and bind.c: the table, template matching
 * (404 vs 405 with Allow, trailing slash, precedence), validation, and building
 * request messages from path, query and body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bind.h"
#include "pbj/pbjson.h"
#include "routes.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "shopmicro/order/v1/order.pb-c.h"

typedef Shopmicro__Catalog__V1__ListProductsRequest list_req_t;
typedef Shopmicro__Catalog__V1__GetProductRequest get_req_t;
typedef Shopmicro__Catalog__V1__CreateProductRequest create_req_t;

static gw_match_result_t match(const char *method, const char *path, gw_match_t *m)
{
    return gw_route_match(gw_routes, gw_n_routes, method, strlen(method), path, strlen(path), m);
}

static const gw_route_t *route_of(const char *method, const char *path)
{
    gw_match_t m;

    if (match(method, path, &m) != GW_MATCH_OK)
        fail_msg("%s %s did not match", method, path);
    return m.route;
}

static void table_is_valid(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    if (gw_routes_validate(gw_routes, gw_n_routes, errbuf) != SVC_OK)
        fail_msg("%s", errbuf);
}

static void every_route_matches(void **state)
{
    (void)state;
    assert_string_equal(route_of("POST", "/v1/products")->rpc,
                        "/shopmicro.catalog.v1.CatalogService/CreateProduct");
    assert_string_equal(route_of("GET", "/v1/products")->rpc,
                        "/shopmicro.catalog.v1.CatalogService/ListProducts");
    assert_string_equal(route_of("GET", "/v1/products/p1")->rpc,
                        "/shopmicro.catalog.v1.CatalogService/GetProduct");
    assert_string_equal(route_of("POST", "/v1/orders")->rpc,
                        "/shopmicro.order.v1.OrderService/CreateOrder");
    assert_string_equal(route_of("GET", "/v1/orders/o1")->rpc,
                        "/shopmicro.order.v1.OrderService/GetOrder");
    assert_non_null(route_of("GET", "/healthz")->local);
    assert_non_null(route_of("GET", "/readyz")->local);
}

/* The public port serves the API, /healthz and /readyz only: what tells
 * the system's insides is on the admin port (adminport.h). */
static void internals_are_not_public_routes(void **state)
{
    static const char *const paths[] = {"/metrics", "/debug/resilience", "/debug/resilience.json",
                                        "/debug"};
    gw_match_t m;

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(paths); i++)
        assert_int_equal(match("GET", paths[i], &m), GW_MATCH_NOT_FOUND);
}

static void idempotency_is_declared_per_route(void **state)
{
    (void)state;
    assert_int_equal(route_of("POST", "/v1/products")->idempotency, RS_NOT_IDEMPOTENT);
    assert_int_equal(route_of("POST", "/v1/orders")->idempotency, RS_NOT_IDEMPOTENT);
    assert_int_equal(route_of("GET", "/v1/products")->idempotency, RS_IDEMPOTENT);
    assert_int_equal(route_of("GET", "/v1/products/x")->idempotency, RS_IDEMPOTENT);
    assert_int_equal(route_of("GET", "/v1/orders/x")->idempotency, RS_IDEMPOTENT);
    assert_int_equal(route_of("GET", "/v1/orders/x")->upstream, GW_UPSTREAM_ORDER);
    assert_int_equal(route_of("GET", "/v1/products/x")->upstream, GW_UPSTREAM_CATALOG);
}

static void variables_are_captured(void **state)
{
    gw_match_t m;

    (void)state;
    assert_int_equal(match("GET", "/v1/products/abc-123", &m), GW_MATCH_OK);
    assert_int_equal(m.n_vars, 1);
    assert_int_equal(m.vars[0].field_len, 2);
    assert_memory_equal(m.vars[0].field, "id", 2);
    assert_int_equal(m.vars[0].value_len, 7);
    assert_memory_equal(m.vars[0].value, "abc-123", 7);
    /* still percent-encoded: bind decodes */
    assert_int_equal(match("GET", "/v1/products/a%2Fb", &m), GW_MATCH_OK);
    assert_int_equal(m.vars[0].value_len, 5);
}

static void trailing_slash_is_an_empty_id(void **state)
{
    gw_match_t m;

    (void)state;
    /* grpc-gateway: a {var} segment matches an empty component */
    assert_int_equal(match("GET", "/v1/products/", &m), GW_MATCH_OK);
    assert_string_equal(m.route->rpc, "/shopmicro.catalog.v1.CatalogService/GetProduct");
    assert_int_equal(m.n_vars, 1);
    assert_int_equal(m.vars[0].value_len, 0);
    assert_int_equal(match("GET", "/v1/orders/", &m), GW_MATCH_OK);
    assert_string_equal(m.route->rpc, "/shopmicro.order.v1.OrderService/GetOrder");
}

static void not_found_vs_wrong_method(void **state)
{
    gw_match_t m;

    (void)state;
    assert_int_equal(match("GET", "/nope", &m), GW_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/", &m), GW_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/v1", &m), GW_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/v1/products/a/b", &m), GW_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/v1/products//", &m), GW_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "//v1/products", &m), GW_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/V1/products", &m), GW_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/v1/productsX", &m), GW_MATCH_NOT_FOUND);
    /* the path exists under another method: 405 */
    assert_int_equal(match("PUT", "/v1/products", &m), GW_MATCH_WRONG_METHOD);
    assert_int_equal(match("DELETE", "/v1/products/1", &m), GW_MATCH_WRONG_METHOD);
    assert_int_equal(match("POST", "/v1/products/1", &m), GW_MATCH_WRONG_METHOD);
    assert_int_equal(match("HEAD", "/v1/products", &m), GW_MATCH_WRONG_METHOD);
    assert_int_equal(match("OPTIONS", "/v1/orders", &m), GW_MATCH_WRONG_METHOD);
    assert_int_equal(match("get", "/v1/products", &m), GW_MATCH_WRONG_METHOD); /* exact */
    assert_int_equal(match("POST", "/healthz", &m), GW_MATCH_WRONG_METHOD);
    assert_int_equal(match("DELETE", "/v1/products/", &m), GW_MATCH_WRONG_METHOD);
    /* not an origin-form path */
    assert_int_equal(match("OPTIONS", "*", &m), GW_MATCH_BAD_PATH);
    assert_int_equal(match("GET", "", &m), GW_MATCH_BAD_PATH);
    assert_int_equal(match("GET", "v1/products", &m), GW_MATCH_BAD_PATH);
}

/* The Allow header of a 405: the methods the path has, in a fixed order
 * whatever the order of the rows. */
static void wrong_method_lists_the_allowed_ones(void **state)
{
    static const struct {
        const char *method, *path, *allow;
    } cases[] = {
        {"PUT", "/v1/products", "GET, POST"}, {"DELETE", "/v1/products/1", "GET"},
        {"OPTIONS", "/v1/orders", "POST"},    {"PATCH", "/v1/orders/o1", "GET"},
        {"POST", "/readyz", "GET"},
    };
    char text[64];

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(cases); i++) {
        gw_match_t m;
        assert_int_equal(match(cases[i].method, cases[i].path, &m), GW_MATCH_WRONG_METHOD);
        assert_int_equal(gw_route_allow_text(m.allow, text, sizeof text), strlen(cases[i].allow));
        assert_string_equal(text, cases[i].allow);
    }
    /* like snprintf: sized with cap 0, cut but terminated when short */
    assert_int_equal(gw_route_allow_text(GW_METHOD_BIT_GET | GW_METHOD_BIT_POST, NULL, 0), 9);
    assert_int_equal(gw_route_allow_text(GW_METHOD_BIT_GET | GW_METHOD_BIT_POST, text, 5), 9);
    assert_string_equal(text, "GET,");
    assert_int_equal(gw_route_allow_text(0, text, sizeof text), 0);
    assert_string_equal(text, "");
}

static void later_rows_win(void **state)
{
    static const gw_route_t t[] = {
        {"GET", "/a/{id}", .local = (gw_local_fn)1},
        {"GET", "/a/b", .local = (gw_local_fn)2},
    };
    gw_match_t m;

    (void)state;
    assert_int_equal(gw_route_match(t, 2, "GET", 3, "/a/b", 4, &m), GW_MATCH_OK);
    assert_ptr_equal(m.route, &t[1]);
    assert_int_equal(gw_route_match(t, 2, "GET", 3, "/a/c", 4, &m), GW_MATCH_OK);
    assert_ptr_equal(m.route, &t[0]);
}

static void expect_invalid(const gw_route_t *row, const char *part)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    if (gw_routes_validate(row, 1, errbuf) != SVC_EINVAL)
        fail_msg("row %s %s was accepted", row->method, row->pattern);
    if (strstr(errbuf, part) == NULL)
        fail_msg("\"%s\" does not mention \"%s\"", errbuf, part);
}

/* The callers' columns of a row: public and not rate limited. */
#define GW_ROUTE_OPEN 0, NULL

#define GET_PRODUCT                                                                                \
    GW_UPSTREAM_CATALOG, "/shopmicro.catalog.v1.CatalogService/GetProduct",                        \
        &shopmicro__catalog__v1__get_product_request__descriptor,                                  \
        &shopmicro__catalog__v1__product__descriptor

/* A public GET row of GetProduct with this path template. */
#define GET_ROW(pattern)                                                                           \
    {                                                                                              \
        "GET", pattern, GET_PRODUCT, GW_BODY_NONE, RS_IDEMPOTENT, GW_STALE_NEVER, GW_ROUTE_OPEN,   \
            NULL, NULL                                                                             \
    }

static void validation_rejects_bad_rows(void **state)
{
    static const gw_route_t no_slash = GET_ROW("v1/x");
    static const gw_route_t open_brace = GET_ROW("/v1/{id");
    static const gw_route_t empty_var = GET_ROW("/v1/{}");
    static const gw_route_t deep_var = GET_ROW("/v1/{id=**}");
    static const gw_route_t empty_seg = GET_ROW("/v1//x");
    static const gw_route_t mixed = GET_ROW("/v1/x{id}");
    static const gw_route_t no_field = GET_ROW("/v1/{sku}");
    static const gw_route_t undeclared = {
        "GET",          "/v1/{id}",    GET_PRODUCT, GW_BODY_NONE, RS_IDEMPOTENCY_BY_NAME,
        GW_STALE_NEVER, GW_ROUTE_OPEN, NULL,        NULL};
    static const gw_route_t no_handler = {"GET", "/x", .local = NULL};
    static const gw_route_t no_method = {"", "/x", .local = (gw_local_fn)1};
    static const gw_route_t local_var = {"GET", "/x/{id}", .local = (gw_local_fn)1};
    static const gw_route_t odd_method = {"get", "/x", .local = (gw_local_fn)1};

    (void)state;
    expect_invalid(&odd_method, "not a method an Allow header can list");
    expect_invalid(&no_slash, "start with '/'");
    expect_invalid(&open_brace, "bad variable");
    expect_invalid(&empty_var, "bad variable");
    expect_invalid(&deep_var, "bad variable");
    expect_invalid(&empty_seg, "empty segment");
    expect_invalid(&mixed, "braces");
    expect_invalid(&no_field, "names no scalar field");
    expect_invalid(&undeclared, "idempotency");
    expect_invalid(&no_handler, "neither");
    expect_invalid(&no_method, "no method");
    expect_invalid(&local_var, "names no scalar field");
}

/* Only an idempotent GET without a body may be answered from the stale
 * cache: never a write, never a local route. */
static void validation_limits_stale_to_reads(void **state)
{
    static const gw_route_t post = {
        "POST",      "/v1/{id}",    GET_PRODUCT, GW_BODY_ALL, RS_NOT_IDEMPOTENT,
        GW_STALE_OK, GW_ROUTE_OPEN, NULL,        NULL};
    static const gw_route_t body = {"GET",         "/v1/{id}",    GET_PRODUCT,
                                    GW_BODY_ALL,   RS_IDEMPOTENT, GW_STALE_OK,
                                    GW_ROUTE_OPEN, NULL,          NULL};
    static const gw_route_t not_idem = {
        "GET",       "/v1/{id}",    GET_PRODUCT, GW_BODY_NONE, RS_NOT_IDEMPOTENT,
        GW_STALE_OK, GW_ROUTE_OPEN, NULL,        NULL};
    static const gw_route_t local = {"GET", "/x", .stale = GW_STALE_OK, .local = (gw_local_fn)1};
    static const gw_route_t bad_value = {"GET",         "/v1/{id}",    GET_PRODUCT,
                                         GW_BODY_NONE,  RS_IDEMPOTENT, (gw_stale_t)7,
                                         GW_ROUTE_OPEN, NULL,          NULL};
    static const gw_route_t ok = {"GET",         "/v1/{id}",    GET_PRODUCT,
                                  GW_BODY_NONE,  RS_IDEMPOTENT, GW_STALE_OK,
                                  GW_ROUTE_OPEN, NULL,          NULL};
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    expect_invalid(&post, "served stale");
    expect_invalid(&body, "served stale");
    expect_invalid(&not_idem, "served stale");
    expect_invalid(&local, "served stale");
    expect_invalid(&bad_value, "served stale");
    assert_int_equal(gw_routes_validate(&ok, 1, errbuf), SVC_OK);
}

/* The table itself: the catalog's two reads, nothing else. */
static void table_serves_only_catalog_reads_stale(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    size_t n = 0;

    (void)state;
    assert_int_equal(gw_routes_validate(gw_routes, gw_n_routes, errbuf), SVC_OK);
    for (size_t i = 0; i < gw_n_routes; i++) {
        if (gw_routes[i].stale != GW_STALE_OK)
            continue;
        n++;
        assert_string_equal(gw_routes[i].method, "GET");
        assert_int_equal(gw_routes[i].upstream, GW_UPSTREAM_CATALOG);
    }
    assert_int_equal(n, 2);
    assert_int_equal(route_of("GET", "/v1/products")->stale, GW_STALE_OK);
    assert_int_equal(route_of("GET", "/v1/products/x")->stale, GW_STALE_OK);
    assert_int_equal(route_of("POST", "/v1/products")->stale, GW_STALE_NEVER);
    assert_int_equal(route_of("GET", "/v1/orders/x")->stale, GW_STALE_NEVER);
}

/* Who may call: every write needs a scope, every upstream route has a rate
 * class, and what is served stale (shared by every caller) is public. */
static void table_guards_every_write(void **state)
{
    (void)state;
    for (size_t i = 0; i < gw_n_routes; i++) {
        const gw_route_t *r = &gw_routes[i];
        if (r->rpc == NULL)
            continue;
        assert_non_null(r->rate_class);
        if (strcmp(r->method, "GET") != 0)
            assert_int_not_equal(r->scopes, 0);
        if (r->stale == GW_STALE_OK)
            assert_int_equal(r->scopes, 0);
    }
    assert_int_equal(route_of("POST", "/v1/products")->scopes, PR_SCOPE_CATALOG_WRITE);
    assert_int_equal(route_of("POST", "/v1/orders")->scopes, PR_SCOPE_ORDERS_WRITE);
    assert_int_equal(route_of("GET", "/v1/orders/x")->scopes,
                     PR_SCOPE_ORDERS_READ | PR_SCOPE_ORDERS_ADMIN);
    assert_int_equal(route_of("GET", "/v1/products/x")->scopes, 0);
    assert_string_equal(route_of("POST", "/v1/orders")->rate_class, "write");
    assert_string_equal(route_of("GET", "/v1/orders/x")->rate_class, "read");
}

static void validation_keeps_stale_and_local_routes_public(void **state)
{
    static const gw_route_t scoped_stale = {
        "GET",       "/v1/{id}",           GET_PRODUCT, GW_BODY_NONE, RS_IDEMPOTENT,
        GW_STALE_OK, PR_SCOPE_ORDERS_READ, "read",      NULL,         NULL};
    static const gw_route_t local_scoped = {"GET", "/x", .scopes = PR_SCOPE_ORDERS_READ,
                                            .local = (gw_local_fn)1};
    static const gw_route_t local_limited = {"GET", "/x", .rate_class = "read",
                                             .local = (gw_local_fn)1};

    (void)state;
    expect_invalid(&scoped_stale, "a route served stale must be public");
    expect_invalid(&local_scoped, "a local route is public");
    expect_invalid(&local_limited, "a local route is public");
}

static void validation_rejects_duplicates(void **state)
{
    static const gw_route_t t[] = {
        {"GET", "/v1/{id}", GET_PRODUCT, GW_BODY_NONE, RS_IDEMPOTENT, GW_STALE_NEVER, GW_ROUTE_OPEN,
         NULL, NULL},
        {"GET", "/v1/{id}", GET_PRODUCT, GW_BODY_NONE, RS_IDEMPOTENT, GW_STALE_NEVER, GW_ROUTE_OPEN,
         NULL, NULL},
    };
    static const gw_route_t ok[] = {
        {"GET", "/v1/{id=*}", GET_PRODUCT, GW_BODY_NONE, RS_IDEMPOTENT, GW_STALE_NEVER,
         GW_ROUTE_OPEN, NULL, NULL},
        {"POST", "/v1/{id}", GET_PRODUCT, GW_BODY_ALL, RS_NOT_IDEMPOTENT, GW_STALE_NEVER,
         GW_ROUTE_OPEN, NULL, NULL},
    };
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    assert_int_equal(gw_routes_validate(t, 2, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "both GET /v1/{id}"));
    assert_int_equal(gw_routes_validate(ok, 2, errbuf), SVC_OK);
}

/* ---- binding ---------------------------------------------------------- */

static ProtobufCMessage *bind_ok(const char *method, const char *path, const char *query,
                                 const char *body)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *msg = NULL;
    gw_match_t m;

    if (match(method, path, &m) != GW_MATCH_OK)
        fail_msg("%s %s did not match", method, path);
    if (gw_bind_request(&m, query, query != NULL ? strlen(query) : 0, body,
                        body != NULL ? strlen(body) : 0, &msg, errbuf) != SVC_OK)
        fail_msg("%s %s?%s: %s", method, path, query != NULL ? query : "", errbuf);
    return msg;
}

static void bind_bad(const char *method, const char *path, const char *query, const char *body,
                     const char *part)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *msg = NULL;
    gw_match_t m;
    svc_err_t err;

    assert_int_equal(match(method, path, &m), GW_MATCH_OK);
    err = gw_bind_request(&m, query, query != NULL ? strlen(query) : 0, body,
                          body != NULL ? strlen(body) : 0, &msg, errbuf);
    if (err != SVC_EINVAL)
        fail_msg("%s %s?%s %s: got %s, want EINVAL", method, path, query ? query : "",
                 body ? body : "", svc_err_name(err));
    if (strstr(errbuf, part) == NULL)
        fail_msg("\"%s\" does not mention \"%s\"", errbuf, part);
    assert_null(msg);
}

static void query_fills_list_request(void **state)
{
    list_req_t *r;

    (void)state;
    r = (list_req_t *)bind_ok("GET", "/v1/products", "page_size=10&page_token=abc", NULL);
    assert_int_equal(r->page_size, 10);
    assert_string_equal(r->page_token, "abc");
    pbj_message_free(&r->base, NULL);
    /* JSON names too; '+' and %20 are spaces; unknown and empty parts ignored */
    r = (list_req_t *)bind_ok("GET", "/v1/products", "pageSize=5&&colour=red&pageToken=a+b%20c&",
                              NULL);
    assert_int_equal(r->page_size, 5);
    assert_string_equal(r->page_token, "a b c");
    pbj_message_free(&r->base, NULL);
    r = (list_req_t *)bind_ok("GET", "/v1/products", NULL, NULL);
    assert_int_equal(r->page_size, 0);
    assert_string_equal(r->page_token, "");
    pbj_message_free(&r->base, NULL);
    r = (list_req_t *)bind_ok("GET", "/v1/products", "page_token", NULL); /* no '=': "" */
    assert_string_equal(r->page_token, "");
    pbj_message_free(&r->base, NULL);
}

static void query_errors_are_400(void **state)
{
    (void)state;
    bind_bad("GET", "/v1/products", "page_size=abc", NULL,
             "parsing field \"page_size\": strconv.ParseInt: parsing \"abc\": invalid syntax");
    bind_bad("GET", "/v1/products", "page_size=1&page_size=2", NULL, "too many values");
    bind_bad("GET", "/v1/products", "page_size", NULL, "parsing \"\": invalid syntax");
    bind_bad("GET", "/v1/products", "page_size=1;page_token=x", NULL,
             "invalid semicolon separator in query");
    bind_bad("GET", "/v1/products", "page_token=%zz", NULL, "invalid URL escape \"%zz\"");
    bind_bad("GET", "/v1/products", "page_token=%4", NULL, "invalid URL escape \"%4\"");
    bind_bad("GET", "/v1/products", "page_size=99999999999", NULL, "page_size");
}

static void path_variables_are_decoded(void **state)
{
    get_req_t *r;

    (void)state;
    r = (get_req_t *)bind_ok("GET", "/v1/products/%41bc%2Fd", NULL, NULL);
    assert_string_equal(r->id, "Abc/d");
    pbj_message_free(&r->base, NULL);
    r = (get_req_t *)bind_ok("GET", "/v1/products/a+b", NULL, NULL); /* '+' stays in paths */
    assert_string_equal(r->id, "a+b");
    pbj_message_free(&r->base, NULL);
    r = (get_req_t *)bind_ok("GET", "/v1/products/", NULL, NULL);
    assert_string_equal(r->id, "");
    pbj_message_free(&r->base, NULL);
    /* the query cannot override a field the path binds */
    r = (get_req_t *)bind_ok("GET", "/v1/products/p1", "id=p2", NULL);
    assert_string_equal(r->id, "p1");
    pbj_message_free(&r->base, NULL);
    bind_bad("GET", "/v1/products/%g1", NULL, NULL, "malformed path escape \"%g1\"");
    bind_bad("GET", "/v1/products/%ff", NULL, NULL, "UTF-8");
}

static void body_accepts_both_name_styles(void **state)
{
    create_req_t *r;

    (void)state;
    r = (create_req_t *)bind_ok("POST", "/v1/products", NULL,
                                "{\"name\":\"n\",\"price_cents\":\"1299\",\"stock\":3}");
    assert_string_equal(r->name, "n");
    assert_int_equal(r->price_cents, 1299);
    assert_int_equal(r->stock, 3);
    pbj_message_free(&r->base, NULL);
    r = (create_req_t *)bind_ok("POST", "/v1/products", "stock=9",
                                "{\"name\":\"n\",\"priceCents\":1299,\"colour\":\"red\"}");
    assert_int_equal(r->price_cents, 1299);
    assert_int_equal(r->stock, 0); /* body "*": the query string is ignored */
    pbj_message_free(&r->base, NULL);
}

static void empty_body_is_the_default_request(void **state)
{
    create_req_t *r;

    (void)state;
    r = (create_req_t *)bind_ok("POST", "/v1/products", NULL, "");
    assert_string_equal(r->name, "");
    assert_int_equal(r->price_cents, 0);
    pbj_message_free(&r->base, NULL);
    r = (create_req_t *)bind_ok("POST", "/v1/products", NULL, NULL);
    pbj_message_free(&r->base, NULL);
    r = (create_req_t *)bind_ok("POST", "/v1/products", NULL, " \n ");
    pbj_message_free(&r->base, NULL);
}

static void bad_bodies_are_400(void **state)
{
    (void)state;
    bind_bad("POST", "/v1/products", NULL, "{bad", "syntax error");
    bind_bad("POST", "/v1/products", NULL, "{\"name\":", "");
    bind_bad("POST", "/v1/products", NULL, "[]", "");
    bind_bad("POST", "/v1/products", NULL, "{\"price_cents\":\"abc\"}", "priceCents");
    bind_bad("POST", "/v1/products", NULL, "{\"name\":123}", "name");
    bind_bad("POST", "/v1/products", NULL, "{\"price_cents\":1,\"priceCents\":2}", "duplicate");
    bind_bad("POST", "/v1/orders", NULL, "{\"items\":[{\"quantity\":\"x\"}]}", "quantity");
}

static void order_body_binds(void **state)
{
    Shopmicro__Order__V1__CreateOrderRequest *r;

    (void)state;
    r = (Shopmicro__Order__V1__CreateOrderRequest *)bind_ok(
        "POST", "/v1/orders", NULL,
        "{\"customerId\":\"c1\",\"items\":[{\"product_id\":\"p1\",\"quantity\":\"2\"},"
        "{\"productId\":\"p2\",\"quantity\":1}]}");
    assert_string_equal(r->customer_id, "c1");
    assert_int_equal(r->n_items, 2);
    assert_string_equal(r->items[0]->product_id, "p1");
    assert_int_equal(r->items[0]->quantity, 2);
    assert_string_equal(r->items[1]->product_id, "p2");
    pbj_message_free(&r->base, NULL);
}

static void percent_decode(void **state)
{
    char out[32];
    size_t n;

    (void)state;
    assert_true(gw_percent_decode("a%20b+c", 7, true, out, &n));
    assert_string_equal(out, "a b c");
    assert_int_equal(n, 5);
    assert_true(gw_percent_decode("a%20b+c", 7, false, out, &n));
    assert_string_equal(out, "a b+c");
    assert_true(gw_percent_decode("%7e%7E", 6, false, out, &n));
    assert_string_equal(out, "~~");
    assert_false(gw_percent_decode("x%", 2, false, out, &n));
    assert_string_equal(out, "%");
    assert_false(gw_percent_decode("%zz1", 4, false, out, &n));
    assert_string_equal(out, "%zz");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_is_valid),
        cmocka_unit_test(every_route_matches),
        cmocka_unit_test(internals_are_not_public_routes),
        cmocka_unit_test(idempotency_is_declared_per_route),
        cmocka_unit_test(variables_are_captured),
        cmocka_unit_test(trailing_slash_is_an_empty_id),
        cmocka_unit_test(not_found_vs_wrong_method),
        cmocka_unit_test(wrong_method_lists_the_allowed_ones),
        cmocka_unit_test(later_rows_win),
        cmocka_unit_test(validation_rejects_bad_rows),
        cmocka_unit_test(validation_limits_stale_to_reads),
        cmocka_unit_test(table_serves_only_catalog_reads_stale),
        cmocka_unit_test(table_guards_every_write),
        cmocka_unit_test(validation_keeps_stale_and_local_routes_public),
        cmocka_unit_test(validation_rejects_duplicates),
        cmocka_unit_test(query_fills_list_request),
        cmocka_unit_test(query_errors_are_400),
        cmocka_unit_test(path_variables_are_decoded),
        cmocka_unit_test(body_accepts_both_name_styles),
        cmocka_unit_test(empty_body_is_the_default_request),
        cmocka_unit_test(bad_bodies_are_400),
        cmocka_unit_test(order_body_binds),
        cmocka_unit_test(percent_decode),
    };
    return cmocka_run_group_tests_name("gateway_routes", tests, NULL, NULL);
}
