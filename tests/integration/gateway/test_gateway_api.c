/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_api.c - the REST surface through the real gateway, catalog
 * and order service (when the tree has it), over real HTTP: every route,
 * the grpc-gateway parity rules (names, int64 strings, unpopulated fields,
 * error bodies and statuses), headers, keep-alive across errors, the body
 * limit and the operations endpoints. One gateway serves the whole group.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_it.h"

typedef struct api {
    gw_it_t *t;
    CURL *h; /* one handle: its connection is reused across requests */
} api_t;

static int group_setup(void **state)
{
    api_t *a = calloc(1, sizeof *a);
    void *t = NULL;

    if (a == NULL || gw_it_setup_env(&t, true, NULL) != 0) {
        free(a);
        return -1;
    }
    a->t = t;
    a->h = curl_easy_init();
    *state = a;
    return a->h != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
    api_t *a = *state;
    void *t;
    int rc;

    if (a == NULL)
        return 0;
    curl_easy_cleanup(a->h);
    t = a->t;
    rc = gw_it_teardown(&t);
    free(a);
    return rc;
}

/* ---- products ----------------------------------------------------------- */

static void create_product_output_is_protojson(void **state)
{
    api_t *a = *state;
    char id[64], created[64], want[512], hdr[128];
    gw_res_t r;

    gw_call(a->h, a->t, "POST", "/v1/products",
            "{\"name\":\"Widget\",\"price_cents\":1299,\"stock\":5}", NULL, &r);
    gw_assert_status(&r, 200);
    assert_true(gw_json_str(r.body, "id", id, sizeof id));
    assert_true(it_is_uuid(id));
    assert_true(gw_json_str(r.body, "createdAt", created, sizeof created));
    assert_true(it_is_recent_rfc3339_utc(created, 300));
    /* declaration order, lowerCamelCase, int64 as a string, every field */
    snprintf(want, sizeof want,
             "{\"id\":\"%s\",\"name\":\"Widget\",\"description\":\"\",\"priceCents\":\"1299\","
             "\"stock\":5,\"createdAt\":\"%s\"}",
             id, created);
    gw_assert_body(&r, 200, want);
    assert_true(gw_res_header(&r, "Grpc-Metadata-Content-Type", hdr, sizeof hdr));
    assert_string_equal(hdr, "application/grpc");
    assert_true(gw_res_header(&r, "Content-Length", hdr, sizeof hdr));
    assert_int_equal(atoi(hdr), (int)r.body_len);
    gw_res_free(&r);
}

static void input_takes_both_name_styles(void **state)
{
    api_t *a = *state;
    gw_res_t r;

    /* camelCase keys, int64 as a JSON number, unknown fields ignored */
    gw_call(a->h, a->t, "POST", "/v1/products",
            "{\"name\":\"Gadget\",\"priceCents\":250,\"description\":\"d\",\"colour\":\"red\"}",
            NULL, &r);
    gw_assert_status(&r, 200);
    assert_non_null(strstr(r.body, "\"name\":\"Gadget\",\"description\":\"d\","
                                   "\"priceCents\":\"250\",\"stock\":0,"));
    gw_res_free(&r);
    /* snake_case keys, int64 as a string */
    gw_call(a->h, a->t, "POST", "/v1/products",
            "{\"name\":\"Gizmo\",\"price_cents\":\"7\",\"stock\":\"2\"}", NULL, &r);
    gw_assert_status(&r, 200);
    assert_non_null(strstr(r.body, "\"priceCents\":\"7\",\"stock\":2,"));
    gw_res_free(&r);
}

static void unpopulated_fields_are_emitted(void **state)
{
    api_t *a = *state;
    gw_res_t r;

    gw_call(a->h, a->t, "POST", "/v1/products", "{\"name\":\"Bare\"}", NULL, &r);
    gw_assert_status(&r, 200);
    assert_non_null(strstr(r.body, "\"description\":\"\",\"priceCents\":\"0\",\"stock\":0,"));
    gw_res_free(&r);
}

static void get_product_round_trips(void **state)
{
    api_t *a = *state;
    char id[37], path[128];
    gw_res_t c, g;

    gw_call(a->h, a->t, "POST", "/v1/products",
            "{\"name\":\"Round\",\"description\":\"trip \\\"q\\\" \\u00e9\",\"price_cents\":"
            "\"9007199254740993\",\"stock\":1}",
            NULL, &c);
    gw_assert_status(&c, 200);
    assert_true(gw_json_str(c.body, "id", id, sizeof id));
    snprintf(path, sizeof path, "/v1/products/%s", id);
    gw_call(a->h, a->t, "GET", path, NULL, NULL, &g);
    gw_assert_body(&g, 200, c.body);
    /* beyond 2^53: exact, because int64 travels as a string */
    assert_non_null(strstr(g.body, "\"priceCents\":\"9007199254740993\""));
    assert_non_null(strstr(g.body, "\"description\":\"trip \\\"q\\\" \xc3\xa9\""));
    gw_res_free(&c);
    gw_res_free(&g);
}

static void list_products_paginates(void **state)
{
    api_t *a = *state;
    char id[37], token[256], path[400];
    gw_res_t r;
    size_t seen = 0;

    for (int i = 0; i < 3; i++)
        gw_it_product(a->h, a->t, "Listed", 100 + i, i, id);
    gw_call(a->h, a->t, "GET", "/v1/products?page_size=2", NULL, NULL, &r);
    gw_assert_status(&r, 200);
    assert_true(strncmp(r.body, "{\"products\":[{\"id\":\"", 20) == 0);
    assert_true(gw_json_str(r.body, "nextPageToken", token, sizeof token));
    assert_true(token[0] != '\0');
    gw_res_free(&r);
    /* JSON names work in the query too */
    for (int pages = 0; token[0] != '\0' && pages < 50; pages++) {
        snprintf(path, sizeof path, "/v1/products?pageSize=2&pageToken=%s", token);
        gw_call(a->h, a->t, "GET", path, NULL, NULL, &r);
        gw_assert_status(&r, 200);
        for (const char *p = r.body; (p = strstr(p, "\"createdAt\"")) != NULL; p++)
            seen++;
        if (!gw_json_str(r.body, "nextPageToken", token, sizeof token))
            token[0] = '\0';
        gw_res_free(&r);
    }
    assert_true(seen >= 1);
    assert_string_equal(token, "");
}

static void list_products_bad_query_is_400(void **state)
{
    api_t *a = *state;
    gw_res_t r;

    gw_call(a->h, a->t, "GET", "/v1/products?page_size=abc", NULL, NULL, &r);
    gw_assert_body(&r, 400,
                   "{\"code\":3,\"message\":\"parsing field \\\"page_size\\\": strconv.ParseInt: "
                   "parsing \\\"abc\\\": invalid syntax\"" GW_INFO("INVALID_REQUEST"));
    gw_res_free(&r);
    gw_call(a->h, a->t, "GET", "/v1/products?page_size=-1", NULL, NULL, &r);
    gw_assert_error(&r, 400, 3, "page_size");
    gw_res_free(&r);
    gw_call(a->h, a->t, "GET", "/v1/products?page_token=not-a-token", NULL, NULL, &r);
    gw_assert_error(&r, 400, 3, "page_token");
    gw_res_free(&r);
    gw_call(a->h, a->t, "GET", "/v1/products?page_size=1&page_size=2", NULL, NULL, &r);
    gw_assert_error(&r, 400, 3, "too many values");
    gw_res_free(&r);
}

static void missing_product_is_404(void **state)
{
    api_t *a = *state;
    char uuid[37], path[96];
    gw_res_t r;

    it_random_uuid(uuid);
    snprintf(path, sizeof path, "/v1/products/%s", uuid);
    gw_call(a->h, a->t, "GET", path, NULL, NULL, &r);
    gw_assert_error(&r, 404, 5, "not found");
    gw_assert_error_info(&r, "PRODUCT_NOT_FOUND", "catalog.shopmicro"); /* catalog's, passed on */
    gw_res_free(&r);
    /* a malformed id is "not found", not a 400 or 500 */
    gw_call(a->h, a->t, "GET", "/v1/products/does-not-exist", NULL, NULL, &r);
    gw_assert_error(&r, 404, 5, "not found");
    gw_res_free(&r);
    /* trailing slash: GetProduct with id "" (grpc-gateway), which catalog answers NOT_FOUND */
    gw_call(a->h, a->t, "GET", "/v1/products/", NULL, NULL, &r);
    gw_assert_error(&r, 404, 5, "not found");
    gw_res_free(&r);
}

static void validation_and_bad_json_are_400(void **state)
{
    api_t *a = *state;
    gw_res_t r;

    gw_call(a->h, a->t, "POST", "/v1/products", "{\"name\":\"\"}", NULL, &r);
    gw_assert_error(&r, 400, 3, "name");
    /* catalog's details, as grpc-gateway renders them: which field, and why */
    gw_assert_error_info(&r, "INVALID_ARGUMENT", "catalog.shopmicro");
    assert_non_null(strstr(r.body, ",{\"@type\":\"type.googleapis.com/google.rpc.BadRequest\","
                                   "\"fieldViolations\":[{\"field\":\"name\",\"description\":"
                                   "\"name must be 1-200 characters of UTF-8 text\"}]}]}"));
    gw_res_free(&r);
    gw_call(a->h, a->t, "POST", "/v1/products", "{\"name\":\"x\",\"price_cents\":-1}", NULL, &r);
    gw_assert_error(&r, 400, 3, "price");
    assert_non_null(strstr(r.body, "\"fieldViolations\":[{\"field\":\"price_cents\""));
    gw_res_free(&r);
    gw_call(a->h, a->t, "POST", "/v1/products", "{bad", NULL, &r);
    gw_assert_error(&r, 400, 3, "");
    gw_assert_error_info(&r, "INVALID_REQUEST", "gateway.shopmicro"); /* never reached catalog */
    gw_res_free(&r);
    gw_call(a->h, a->t, "POST", "/v1/products", "{\"name\":\"x\",\"price_cents\":\"abc\"}", NULL,
            &r);
    gw_assert_error(&r, 400, 3, "priceCents");
    gw_res_free(&r);
    gw_call(a->h, a->t, "POST", "/v1/products", "[1]", NULL, &r);
    gw_assert_error(&r, 400, 3, "");
    gw_res_free(&r);
}

static void empty_body_reaches_validation(void **state)
{
    api_t *a = *state;
    gw_res_t r;

    /* grpc-gateway ignores io.EOF: the default request goes to the
     * service, whose validation (not the JSON parser) refuses it. */
    gw_call(a->h, a->t, "POST", "/v1/products", "", NULL, &r);
    gw_assert_error(&r, 400, 3, "name must be");
    gw_res_free(&r);
}

/* ---- routing, headers, deadlines ----------------------------------------- */

static void wrong_method(api_t *a, const char *method, const char *path, const char *allow)
{
    char v[64];
    gw_res_t r;

    gw_call(a->h, a->t, method, path, strcmp(method, "POST") == 0 ? "{}" : NULL, NULL, &r);
    gw_assert_body(&r, 405,
                   "{\"code\":12,\"message\":\"Method Not Allowed\"" GW_INFO("METHOD_NOT_ALLOWED"));
    if (!gw_res_header(&r, "Allow", v, sizeof v))
        fail_msg("%s %s: 405 without Allow", method, path);
    assert_string_equal(v, allow);
    gw_res_free(&r);
}

static void unknown_path_and_wrong_method(void **state)
{
    api_t *a = *state;
    gw_res_t r;

    gw_call(a->h, a->t, "GET", "/nope", NULL, NULL, &r);
    gw_assert_body(&r, 404, "{\"code\":5,\"message\":\"Not Found\"" GW_INFO("ROUTE_NOT_FOUND"));
    gw_res_free(&r);
    gw_call(a->h, a->t, "GET", "/v1/products/a/b", NULL, NULL, &r);
    gw_assert_body(&r, 404, "{\"code\":5,\"message\":\"Not Found\"" GW_INFO("ROUTE_NOT_FOUND"));
    gw_res_free(&r);
    /* A known path under another method: 405 with the methods it has
     * (RFC 9110 §15.5.6), grpc-gateway's body code UNIMPLEMENTED. */
    wrong_method(a, "PUT", "/v1/products", "GET, POST");
    wrong_method(a, "DELETE", "/v1/products/x", "GET");
    wrong_method(a, "POST", "/v1/orders/x", "GET");
    wrong_method(a, "OPTIONS", "/v1/orders", "POST");
    wrong_method(a, "POST", "/healthz", "GET");
    gw_call(a->h, a->t, "HEAD", "/v1/products", NULL, NULL, &r);
    gw_assert_status(&r, 405);
    gw_res_free(&r);
}

static void grpc_timeout_is_validated(void **state)
{
    api_t *a = *state;
    const char *bad[] = {"Grpc-Timeout: 5x", NULL};
    const char *no_unit[] = {"Grpc-Timeout: 100", NULL};
    const char *good[] = {"Grpc-Timeout: 5S", NULL};
    gw_res_t r;

    gw_call(a->h, a->t, "GET", "/v1/products?page_size=1", NULL, bad, &r);
    gw_assert_body(
        &r, 400, "{\"code\":3,\"message\":\"invalid grpc-timeout: 5x\"" GW_INFO("INVALID_TIMEOUT"));
    gw_res_free(&r);
    gw_call(a->h, a->t, "GET", "/v1/products?page_size=1", NULL, no_unit, &r);
    gw_assert_body(
        &r, 400,
        "{\"code\":3,\"message\":\"invalid grpc-timeout: 100\"" GW_INFO("INVALID_TIMEOUT"));
    gw_res_free(&r);
    gw_call(a->h, a->t, "GET", "/v1/products?page_size=1", NULL, good, &r);
    gw_assert_status(&r, 200);
    gw_res_free(&r);
}

/* Every call the gateway's resilience layer made to the catalog so far: the
 * sum of its shopmicro_resilience_calls_total series. */
static long long catalog_calls(const api_t *a)
{
    static const char series[] = "shopmicro_resilience_calls_total{upstream=\"catalog\"";
    long long sum = 0;
    gw_res_t r;

    gw_admin_get(a->h, a->t, "/metrics", &r);
    gw_assert_status(&r, 200);
    for (const char *p = strstr(r.body, series); p != NULL; p = strstr(p + 1, series))
        sum += strtoll(strchr(p, '}') + 1, NULL, 10);
    gw_res_free(&r);
    return sum;
}

/* GET path with this Grpc-Timeout value (NULL: an empty header); false,
 * with the reason printed, unless the answer is the 504 of an expired
 * deadline (want_fresh false) or a fresh 200 (true). */
static bool timeout_row_ok(const api_t *a, const char *path, const char *value, bool want_fresh)
{
    /* Expired on arrival or during the call to the catalog: the gateway's
     * DEADLINE either way (the latter says which upstream). */
    static const char expired[] = "{\"code\":4,\"message\":\"deadline exceeded\",\"details\":["
                                  "{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\","
                                  "\"reason\":\"DEADLINE\",\"domain\":\"gateway.shopmicro\"";
    char line[96], stale[16];
    const char *headers[] = {line, NULL};
    bool ok, is_stale;
    gw_res_t r;

    if (value != NULL)
        snprintf(line, sizeof line, "Grpc-Timeout: %s", value);
    else
        snprintf(line, sizeof line, "Grpc-Timeout;"); /* curl's spelling of an empty value */
    gw_call(a->h, a->t, "GET", path, NULL, headers, &r);
    is_stale = gw_res_header(&r, "X-Shopmicro-Stale", stale, sizeof stale);
    ok = r.status == (want_fresh ? 200 : 504) &&
         (want_fresh || strncmp(r.body, expired, sizeof expired - 1) == 0) && !is_stale;
    if (!ok)
        print_error("Grpc-Timeout: %s: %ld%s %s, want %s\n", value != NULL ? value : "(empty)",
                    r.status, is_stale ? " stale" : "", r.body,
                    want_fresh ? "a fresh 200" : expired);
    gw_res_free(&r);
    return ok;
}

/* grpc-gateway's table (docs/gateway.md "Headers, metadata, deadlines"):
 * an expired value is 504 at once, even for a product the stale cache
 * holds, and the catalog is not called; zero is no deadline; an empty
 * value is no header; a huge one is the longest deadline. */
static void grpc_timeout_expired_zero_and_huge(void **state)
{
    static const char *const expired[] = {"1n", "-1S", "-5m", "-9223372036854775808n"};
    static const char *const served[] = {"0S",      "0n", "0H", "-0m", NULL, "9223372036854775807H",
                                         "2562048H"};
    const size_t n_served = sizeof served / sizeof served[0];
    api_t *a = *state;
    char id[37], path[80];
    long long calls, expired_calls;
    size_t failed = 0;
    gw_res_t r;

    gw_it_product(a->h, a->t, "deadline mug", 900, 4, id);
    snprintf(path, sizeof path, "/v1/products/%s", id);
    gw_call(a->h, a->t, "GET", path, NULL, NULL, &r); /* now in the stale cache */
    gw_assert_status(&r, 200);
    gw_res_free(&r);
    calls = catalog_calls(a);
    for (size_t i = 0; i < sizeof expired / sizeof expired[0]; i++)
        failed += !timeout_row_ok(a, path, expired[i], false);
    expired_calls = catalog_calls(a) - calls;
    for (size_t i = 0; i < n_served; i++)
        failed += !timeout_row_ok(a, path, served[i], true);
    if (failed > 0 || expired_calls != 0)
        fail_msg("%zu Grpc-Timeout rows wrong; the expired ones went into the catalog's "
                 "resilience chain %lld times (want 0)",
                 failed, expired_calls);
    /* the counter is not blind: it saw each of the served ones */
    assert_int_equal(catalog_calls(a) - calls, (long long)n_served);
}

static void request_ids_are_echoed_and_forwarded(void **state)
{
    api_t *a = *state;
    const char *mine[] = {"X-Request-Id: gw-it-req-0042", NULL};
    const char *dirty[] = {"X-Request-Id: a b\"c<d>", NULL};
    char v[128];
    gw_res_t r;

    gw_call(a->h, a->t, "GET", "/v1/products/does-not-exist", NULL, mine, &r);
    gw_assert_status(&r, 404);
    assert_true(gw_res_header(&r, "X-Request-Id", v, sizeof v));
    assert_string_equal(v, "gw-it-req-0042");
    gw_res_free(&r);
    /* the catalog got it as x-request-id metadata and logs it */
    assert_int_equal(spawn_log_wait(a->t->cat.proc, "req=gw-it-req-0042", it_ms(2000)), SVC_OK);
    assert_int_equal(spawn_log_wait(a->t->gw, "req=gw-it-req-0042", it_ms(2000)), SVC_OK);
    /* sanitised */
    gw_call(a->h, a->t, "GET", "/healthz", NULL, dirty, &r);
    assert_true(gw_res_header(&r, "X-Request-Id", v, sizeof v));
    assert_string_equal(v, "abcd");
    gw_res_free(&r);
    /* generated when absent, on errors too */
    gw_call(a->h, a->t, "GET", "/nope", NULL, NULL, &r);
    assert_true(gw_res_header(&r, "X-Request-Id", v, sizeof v));
    assert_int_equal(strlen(v), 32);
    assert_int_equal(strspn(v, "0123456789abcdef"), 32);
    gw_res_free(&r);
}

static void keep_alive_survives_errors(void **state)
{
    api_t *a = *state;
    CURL *h = curl_easy_init();
    const char *bad_timeout[] = {"Grpc-Timeout: x", NULL};
    struct {
        const char *method, *path, *body;
        const char *const *headers;
        long status;
    } steps[] = {
        {"GET", "/healthz", NULL, NULL, 200},
        {"GET", "/nope", NULL, NULL, 404},
        {"GET", "/v1/products/does-not-exist", NULL, NULL, 404},
        {"POST", "/v1/products", "{bad", NULL, 400},
        {"POST", "/v1/products", "{\"name\":\"\"}", NULL, 400},
        {"GET", "/v1/products", NULL, bad_timeout, 400},
        {"PUT", "/v1/products", "{}", NULL, 405},
        {"GET", "/v1/products?page_size=1", NULL, NULL, 200},
    };

    assert_non_null(h);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        gw_res_t r;
        gw_call(h, a->t, steps[i].method, steps[i].path, steps[i].body, steps[i].headers, &r);
        gw_assert_status(&r, steps[i].status);
        if (i > 0 && r.connects != 0)
            fail_msg("step %zu (%s %s -> %ld) opened a new connection", i, steps[i].method,
                     steps[i].path, r.status);
        gw_res_free(&r);
    }
    curl_easy_cleanup(h);
}

static char *padded_body(size_t len)
{
    char *b = malloc(len + 1);

    memset(b, ' ', len);
    b[0] = '{';
    b[len - 1] = '}';
    b[len] = '\0';
    return b;
}

/* GATEWAY_MAX_BODY_BYTES's default: a 100-line order is a few KB. */
#define GW_BODY_LIMIT 65536

static void body_over_64_kib_is_413(void **state)
{
    api_t *a = *state;
    CURL *h = curl_easy_init();
    char *big = padded_body(GW_BODY_LIMIT + 1), *exact = padded_body(GW_BODY_LIMIT), v[64];
    const char *chunked[] = {"Transfer-Encoding: chunked", NULL};
    gw_req_t rq = {"POST", "/v1/products", big, GW_BODY_LIMIT + 1, NULL, 0, false};
    gw_res_t r;

    /* Refused from the Content-Length, before the body is read. */
    gw_do(h, a->t, &rq, &r);
    gw_assert_body(
        &r, 413,
        "{\"code\":8,\"message\":\"request body exceeds 65536 bytes\"" GW_INFO("BODY_TOO_LARGE"));
    /* The unread body cannot stay on the connection: this one answer
     * closes it (h2o, and curl itself, which stops sending mid-body). */
    assert_true(gw_res_header(&r, "Connection", v, sizeof v));
    assert_string_equal(v, "close");
    gw_res_free(&r);
    gw_call(h, a->t, "GET", "/healthz", NULL, NULL, &r);
    gw_assert_status(&r, 200); /* the client carries on, on a new connection */
    gw_res_free(&r);
    /* exactly the limit is fine: the service's validation answers */
    rq.body = exact;
    rq.body_len = GW_BODY_LIMIT;
    gw_do(h, a->t, &rq, &r);
    gw_assert_error(&r, 400, 3, "name");
    gw_res_free(&r);
    /* chunked: refused once the decoded body reaches the limit */
    rq.body = big;
    rq.body_len = GW_BODY_LIMIT + 1;
    rq.headers = chunked;
    gw_do(h, a->t, &rq, &r);
    gw_assert_error(&r, 413, 8, "exceeds");
    gw_res_free(&r);
    curl_easy_cleanup(h);
    free(big);
    free(exact);
}

/* ---- orders --------------------------------------------------------------- */

static void orders_round_trip(void **state)
{
    api_t *a = *state;
    char pid[37], oid[64], body[512], path[128], want[256], key[96], uuid[37];
    char md_first[64], md_again[64], v[16];
    const char *idem[] = {key, NULL};
    gw_res_t r;

    gw_it_product(a->h, a->t, "Orderable", 1299, 100, pid);
    snprintf(body, sizeof body,
             "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"%s\",\"quantity\":2}]}", pid);
    it_random_uuid(uuid);
    snprintf(key, sizeof key, "Idempotency-Key: gw-it-%s", uuid);
    gw_call(a->h, a->t, "POST", "/v1/orders", body, idem, &r);
    gw_assert_status(&r, 200);
    assert_true(gw_json_str(r.body, "id", oid, sizeof oid));
    assert_true(it_is_uuid(oid));
    snprintf(want, sizeof want,
             "{\"id\":\"%s\",\"status\":\"ORDER_STATUS_PENDING\",\"totalCents\":\"2598\"}", oid);
    gw_assert_body(&r, 200, want);
    assert_false(gw_res_header(&r, "Grpc-Metadata-Idempotent-Replayed", v, sizeof v));
    gw_res_free(&r);

    /* the same key and request (camelCase this time): the first answer again,
     * and order's reply metadata says it is a replay (Grpc-Metadata-*) */
    snprintf(body, sizeof body,
             "{\"customerId\":\"c1\",\"items\":[{\"productId\":\"%s\",\"quantity\":\"2\"}]}", pid);
    gw_call(a->h, a->t, "POST", "/v1/orders", body, idem, &r);
    gw_assert_body(&r, 200, want);
    if (!gw_res_header(&r, "Grpc-Metadata-Idempotent-Replayed", v, sizeof v))
        fail_msg("a replay without Grpc-Metadata-Idempotent-Replayed:\n%s", r.head);
    assert_string_equal(v, "true");
    assert_non_null(
        strstr(r.head, "\r\nGrpc-Metadata-Idempotent-Replayed: true\r\n")); /* as Go writes it */
    gw_res_free(&r);
    /* the same key with another request: ALREADY_EXISTS -> 409 */
    snprintf(body, sizeof body,
             "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}", pid);
    gw_call(a->h, a->t, "POST", "/v1/orders", body, idem, &r);
    gw_assert_error(&r, 409, 6, "idempotency key");
    gw_res_free(&r);

    /* Grpc-Metadata-<key> reaches the service as <key>: the same replay */
    snprintf(key, sizeof key, "Grpc-Metadata-Idempotency-Key: gw-it-md-%s", uuid);
    snprintf(body, sizeof body,
             "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"%s\",\"quantity\":3}]}", pid);
    gw_call(a->h, a->t, "POST", "/v1/orders", body, idem, &r);
    gw_assert_status(&r, 200);
    assert_true(gw_json_str(r.body, "id", md_first, sizeof md_first));
    assert_string_not_equal(md_first, oid);
    gw_res_free(&r);
    gw_call(a->h, a->t, "POST", "/v1/orders", body, idem, &r);
    gw_assert_status(&r, 200);
    assert_true(gw_json_str(r.body, "id", md_again, sizeof md_again));
    assert_string_equal(md_again, md_first);
    gw_res_free(&r);

    snprintf(path, sizeof path, "/v1/orders/%s", oid);
    gw_call(a->h, a->t, "GET", path, NULL, NULL, &r);
    gw_assert_status(&r, 200);
    snprintf(want, sizeof want,
             "{\"id\":\"%s\",\"customerId\":\"c1\",\"items\":[{\"productId\":\"%s\",\"quantity\":2,"
             "\"unitPriceCents\":\"1299\"}],\"totalCents\":\"2598\",\"status\":"
             "\"ORDER_STATUS_PENDING\",\"createdAt\":\"",
             oid, pid);
    if (strncmp(r.body, want, strlen(want)) != 0)
        fail_msg("GetOrder body\n  %s\ndoes not start with\n  %s", r.body, want);
    gw_res_free(&r);
}

static void order_errors(void **state)
{
    api_t *a = *state;
    char uuid[37], path[96], body[256];
    gw_res_t r;

    it_random_uuid(uuid);
    snprintf(path, sizeof path, "/v1/orders/%s", uuid);
    gw_call(a->h, a->t, "GET", path, NULL, NULL, &r);
    gw_assert_error(&r, 404, 5, "not found");
    gw_res_free(&r);
    /* no customer_id: the token's subject's order, which then has no items */
    gw_call(a->h, a->t, "POST", "/v1/orders", "{}", NULL, &r);
    gw_assert_error(&r, 400, 3, "items");
    gw_res_free(&r);
    snprintf(body, sizeof body,
             "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}", uuid);
    gw_call(a->h, a->t, "POST", "/v1/orders", body, NULL, &r);
    gw_assert_error(&r, 400, 3, "unknown product");
    gw_assert_error_info(&r, "PRODUCT_NOT_FOUND", "order.shopmicro");
    assert_non_null(strstr(r.body, "\"fieldViolations\":[{\"field\":\"items[0].product_id\""));
    gw_res_free(&r);
}

/* ---- operations endpoints ---------------------------------------------- */

/* GET /openapi.json serves the document the build generated (GW_OPENAPI_JSON,
 * build/gateway/openapi.json), byte for byte, public and not rate limited. */
static void openapi_json_is_the_generated_document(void **state)
{
    api_t *a = *state;
    const char *file = getenv("GW_OPENAPI_JSON");
    char ct[128], *want;
    long n;
    FILE *f;
    gw_res_t r;

    assert_non_null(file);
    f = fopen(file, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    want = malloc((size_t)n);
    assert_non_null(want);
    assert_int_equal(fread(want, 1, (size_t)n, f), (size_t)n);
    fclose(f);

    gw_call(a->h, a->t, "GET", "/openapi.json", NULL, NULL, &r);
    gw_assert_status(&r, 200);
    assert_true(gw_res_header(&r, "Content-Type", ct, sizeof ct));
    assert_string_equal(ct, "application/json");
    assert_false(gw_res_header(&r, "RateLimit-Policy", ct, sizeof ct));
    assert_int_equal(r.body_len, (size_t)n);
    assert_memory_equal(r.body, want, (size_t)n);
    assert_non_null(strstr(r.body, "\"/v1/orders/{id}\""));
    gw_res_free(&r);
    free(want);
}

static void healthz_readyz_metrics(void **state)
{
    api_t *a = *state;
    char ct[128];
    gw_res_t r;

    gw_call(a->h, a->t, "GET", "/healthz", NULL, NULL, &r);
    gw_assert_body(&r, 200, "{\"status\":\"ok\"}");
    gw_res_free(&r);

    /* The public /readyz says ready or not, nothing more. */
    gw_call(a->h, a->t, "GET", "/readyz", NULL, NULL, &r);
    gw_assert_body(&r, 200, "{\"status\":\"ok\"}");
    gw_res_free(&r);

    gw_admin_get(a->h, a->t, "/readyz", &r);
    assert_non_null(strstr(r.body, "{\"name\":\"catalog\",\"target\":\""));
    assert_non_null(strstr(r.body, "\"breaker\":\"closed\",\"connectivity\":\"ready\","
                                   "\"ready\":true}"));
    /* both upstreams up and used: ready */
    gw_assert_status(&r, 200);
    assert_true(strncmp(r.body, "{\"status\":\"ok\",\"upstreams\":[", 28) == 0);
    gw_res_free(&r);

    gw_admin_get(a->h, a->t, "/metrics", &r);
    gw_assert_status(&r, 200);
    assert_true(gw_res_header(&r, "Content-Type", ct, sizeof ct));
    assert_string_equal(ct, "text/plain; version=0.0.4; charset=utf-8");
    assert_non_null(strstr(r.body, "# TYPE gateway_http_requests_total counter\n"));
    assert_non_null(strstr(r.body, "gateway_http_requests_total{route=\"/v1/products/{id}\","
                                   "method=\"GET\",code=\"404\"} "));
    assert_non_null(strstr(r.body, "gateway_http_requests_total{route=\"/v1/products\","
                                   "method=\"POST\",code=\"200\"} "));
    assert_non_null(strstr(r.body, "gateway_http_requests_total{route=\"unmatched\","
                                   "method=\"PUT\",code=\"405\"} "));
    assert_non_null(strstr(r.body, "# TYPE gateway_http_request_duration_seconds histogram\n"));
    assert_non_null(strstr(r.body, "gateway_http_request_duration_seconds_bucket{route="
                                   "\"/v1/products\",method=\"GET\",le=\"+Inf\"} "));
    assert_non_null(strstr(r.body, "gateway_http_in_flight 0\n")); /* the admin port's are not */
    assert_non_null(strstr(r.body, "shopmicro_resilience_calls_total{upstream=\"catalog\","
                                   "method=\"GetProduct\""));
    assert_non_null(strstr(r.body, "upstream=\"order\""));
    gw_res_free(&r);
}

/* What tells the system's insides is not on the public port: 404 there, as
 * any unknown path, and served by the admin port. */
static void internals_only_on_the_admin_port(void **state)
{
    static const char *const paths[] = {"/metrics", "/debug/resilience", "/debug/resilience.json"};
    api_t *a = *state;
    gw_res_t r;

    for (size_t i = 0; i < SVC_COUNTOF(paths); i++) {
        gw_call(a->h, a->t, "GET", paths[i], NULL, NULL, &r);
        gw_assert_error(&r, 404, 5, "Not Found");
        gw_res_free(&r);
        gw_admin_get(a->h, a->t, paths[i], &r);
        gw_assert_status(&r, 200);
        gw_res_free(&r);
    }
    /* The public /readyz names no upstream, address or state. */
    gw_call(a->h, a->t, "GET", "/readyz", NULL, NULL, &r);
    assert_null(strstr(r.body, "127.0.0.1"));
    assert_null(strstr(r.body, "catalog"));
    assert_null(strstr(r.body, "upstreams"));
    gw_res_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_product_output_is_protojson),
        cmocka_unit_test(input_takes_both_name_styles),
        cmocka_unit_test(unpopulated_fields_are_emitted),
        cmocka_unit_test(get_product_round_trips),
        cmocka_unit_test(list_products_paginates),
        cmocka_unit_test(list_products_bad_query_is_400),
        cmocka_unit_test(missing_product_is_404),
        cmocka_unit_test(validation_and_bad_json_are_400),
        cmocka_unit_test(empty_body_reaches_validation),
        cmocka_unit_test(unknown_path_and_wrong_method),
        cmocka_unit_test(grpc_timeout_is_validated),
        cmocka_unit_test(grpc_timeout_expired_zero_and_huge),
        cmocka_unit_test(request_ids_are_echoed_and_forwarded),
        cmocka_unit_test(keep_alive_survives_errors),
        cmocka_unit_test(body_over_64_kib_is_413),
        cmocka_unit_test(orders_round_trip),
        cmocka_unit_test(order_errors),
        cmocka_unit_test(healthz_readyz_metrics),
        cmocka_unit_test(openapi_json_is_the_generated_document),
        cmocka_unit_test(internals_only_on_the_admin_port),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = svc_test_run_group_tests_name("gateway_api", tests, group_setup, group_teardown);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
