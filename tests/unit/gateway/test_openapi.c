/* SPDX-License-Identifier: Apache-2.0 */
/* test_openapi.c - the OpenAPI document embedded in the gateway
 * (gateway/tools/openapi_gen.c, served at GET /openapi.json): it parses, and
 * every row of the route table is an operation of it with the row's
 * parameters, bodies, security and statuses; no operation is not a row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ops.h"
#include "principal/principal.h"
#include "routes.h"

static json_t *doc;

/* "/v1/products/{id=*}" -> "/v1/products/{id}"; "GET" -> "get". */
static void keys_of(const gw_route_t *r, char *path, size_t cap, char method[16])
{
    size_t n = 0;

    for (const char *p = r->pattern; *p != '\0' && n + 1 < cap; p++) {
        if (*p == '=') {
            while (*p != '}')
                p++;
        }
        path[n++] = *p;
    }
    path[n] = '\0';
    for (n = 0; r->method[n] != '\0' && n < 15; n++)
        method[n] = (char)(r->method[n] - 'A' + 'a');
    method[n] = '\0';
}

static json_t *op_of(const gw_route_t *r)
{
    char path[256], method[16];

    keys_of(r, path, sizeof path, method);
    return json_object_get(json_object_get(json_object_get(doc, "paths"), path), method);
}

static void is_openapi_3_1(void **state)
{
    (void)state;
    assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
    assert_non_null(json_object_get(
        json_object_get(json_object_get(doc, "components"), "securitySchemes"), "bearerAuth"));
}

static void every_row_is_an_operation(void **state)
{
    (void)state;
    for (size_t i = 0; i < gw_n_routes; i++) {
        if (op_of(&gw_routes[i]) == NULL)
            fail_msg("route %s %s is not in the document", gw_routes[i].method,
                     gw_routes[i].pattern);
    }
}

static void every_operation_is_a_row(void **state)
{
    const char *path, *method;
    json_t *item, *op;
    size_t n = 0;

    (void)state;
    json_object_foreach(json_object_get(doc, "paths"), path, item)
    {
        json_object_foreach(item, method, op) n++;
    }
    assert_int_equal(n, gw_n_routes);
}

static bool has_status(json_t *op, const char *status)
{
    return json_object_get(json_object_get(op, "responses"), status) != NULL;
}

static void operations_follow_their_rows(void **state)
{
    char ref[256];

    (void)state;
    for (size_t i = 0; i < gw_n_routes; i++) {
        const gw_route_t *r = &gw_routes[i];
        json_t *op = op_of(r), *sec = json_object_get(op, "security");

        assert_non_null(op);
        assert_true(has_status(op, "200"));
        assert_true(has_status(op, "400"));
        assert_true(has_status(op, "401"));
        assert_true(has_status(op, "default"));
        assert_int_equal(has_status(op, "403"), r->scopes != 0);
        assert_int_equal(has_status(op, "429"), r->rate_class != NULL);
        assert_int_equal(has_status(op, "413"), r->rpc != NULL && r->body == GW_BODY_ALL);
        assert_int_equal(has_status(op, "503"), r->rpc != NULL);
        assert_int_equal(json_object_get(op, "requestBody") != NULL,
                         r->rpc != NULL && r->body == GW_BODY_ALL);
        if (r->rpc != NULL) {
            snprintf(ref, sizeof ref, "#/components/schemas/%s", r->response->name);
            assert_string_equal(
                json_string_value(json_object_get(
                    json_object_get(
                        json_object_get(
                            json_object_get(
                                json_object_get(json_object_get(op, "responses"), "200"),
                                "content"),
                            "application/json"),
                        "schema"),
                    "$ref")),
                ref);
        }
        /* a public row may be called without a token ({}); a scoped one
         * lists one alternative per scope */
        if (r->scopes == 0) {
            assert_int_equal(json_object_size(json_array_get(sec, 0)), 0);
        } else {
            assert_int_equal(json_array_size(sec), (size_t)__builtin_popcount(r->scopes));
            for (size_t k = 0; k < json_array_size(sec); k++) {
                const char *scope = json_string_value(
                    json_array_get(json_object_get(json_array_get(sec, k), "bearerAuth"), 0));
                assert_non_null(scope);
                assert_true((r->scopes & pr_scopes_parse(scope, strlen(scope))) != 0);
            }
        }
    }
}

/* GET /v1/products: its request's fields as query parameters under their
 * JSON names; GET /v1/products/{id}: id from the path, nothing in the query. */
static void parameters_follow_the_request(void **state)
{
    json_t *list = NULL, *get = NULL, *p;

    (void)state;
    for (size_t i = 0; i < gw_n_routes; i++) {
        if (strcmp(gw_routes[i].method, "GET") != 0)
            continue;
        if (strcmp(gw_routes[i].pattern, "/v1/products") == 0)
            list = op_of(&gw_routes[i]);
        if (strcmp(gw_routes[i].pattern, "/v1/products/{id}") == 0)
            get = op_of(&gw_routes[i]);
    }
    assert_non_null(list);
    assert_non_null(get);
    p = json_object_get(list, "parameters");
    assert_int_equal(json_array_size(p), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "name")),
                        "pageSize");
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "in")), "query");
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 1), "name")),
                        "pageToken");
    p = json_object_get(get, "parameters");
    assert_int_equal(json_array_size(p), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "name")), "id");
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "in")), "path");
}

/* protojson: lowerCamelCase, every field required in what the gateway
 * writes, int64 as a string, enums by name. */
static void schemas_follow_protojson(void **state)
{
    json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
    json_t *order = json_object_get(schemas, "shopmicro.order.v1.Order");
    json_t *props = json_object_get(order, "properties");
    json_t *total = json_object_get(props, "totalCents");
    json_t *status = json_object_get(props, "status");

    (void)state;
    assert_non_null(total);
    assert_string_equal(json_string_value(json_object_get(total, "type")), "string");
    assert_string_equal(json_string_value(json_object_get(total, "format")), "int64");
    assert_string_equal(json_string_value(json_object_get(status, "type")), "string");
    assert_string_equal(json_string_value(json_array_get(json_object_get(status, "enum"), 1)),
                        "ORDER_STATUS_PENDING");
    assert_int_equal(json_array_size(json_object_get(order, "required")), json_object_size(props));
    assert_null(json_object_get(json_object_get(schemas, "shopmicro.order.v1.OrderItem-input"),
                                "required"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(is_openapi_3_1),
        cmocka_unit_test(every_row_is_an_operation),
        cmocka_unit_test(every_operation_is_a_row),
        cmocka_unit_test(operations_follow_their_rows),
        cmocka_unit_test(parameters_follow_the_request),
        cmocka_unit_test(schemas_follow_protojson),
    };
    json_error_t err;
    int rc;

    doc = json_loadb((const char *)gw_openapi_json, gw_openapi_json_len, 0, &err);
    if (doc == NULL) {
        fprintf(stderr, "openapi.json: line %d: %s\n", err.line, err.text);
        return 1;
    }
    rc = cmocka_run_group_tests_name("gateway_openapi", tests, NULL, NULL);
    json_decref(doc);
    return rc;
}
