/* SPDX-License-Identifier: Apache-2.0 */
/* test_openapi.c - the OpenAPI document embedded in the gateway
 * (gateway/tools/openapi_gen.c, served at GET /openapi.json): it parses, and
 * every row of the route table is an operation of it with the row's
 * parameters, bodies, security and statuses; no operation is not a row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ops.h"
#include "principal/principal.h"
#include "routes.h"
#include "shopmicro/limits.h"

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
}

/* "price_cents" -> "priceCents" */
static void camel(const char *proto, char out[64])
{
    size_t n = 0;

    for (bool up = false; *proto != '\0' && n < 63; proto++) {
        if (*proto == '_') {
            up = true;
            continue;
        }
        out[n++] = up && *proto >= 'a' && *proto <= 'z' ? (char)(*proto - 'a' + 'A') : *proto;
        up = false;
    }
    out[n] = '\0';
}

/* The query parameter `name` of any operation, or NULL. */
static json_t *query_param(const char *name)
{
    for (size_t i = 0; i < gw_n_routes; i++) {
        json_t *params = json_object_get(op_of(&gw_routes[i]), "parameters"), *p;
        size_t k;
        json_array_foreach(params, k, p) if (strcmp(json_string_value(json_object_get(p, "name")),
                                                    name) == 0) return json_object_get(p, "schema");
    }
    return NULL;
}

static bool has_string(json_t *arr, const char *s)
{
    json_t *v;
    size_t k;

    json_array_foreach(arr, k, v) if (json_is_string(v) &&
                                      strcmp(json_string_value(v), s) == 0) return true;
    return false;
}

/* Each bound of shopmicro/limits.h is on its field in the request's input
 * schema (or query parameter): the keywords with the table's numbers; the
 * field required exactly when its default is out of bounds, and null
 * allowed exactly when it is not required. */
static void input_schemas_carry_the_limits(void **state)
{
    json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");

    (void)state;
    for (const shopmicro_limit_t *l = shopmicro_limits; l->message != NULL; l++) {
        static const char *const keys[][2] = {[SHOPMICRO_LIMIT_CHARS] = {"minLength", "maxLength"},
                                              [SHOPMICRO_LIMIT_VALUE] = {"minimum", "maximum"},
                                              [SHOPMICRO_LIMIT_ITEMS] = {"minItems", "maxItems"}};
        char name[256], field[64];
        json_t *msg, *f, *type;

        snprintf(name, sizeof name, "%s-input", l->message);
        camel(l->field, field);
        msg = json_object_get(schemas, name);
        f = msg != NULL ? json_object_get(json_object_get(msg, "properties"), field)
                        : query_param(field);
        if (f == NULL)
            fail_msg("limit %s.%s: no such field in the document", l->message, l->field);
        assert_int_equal(json_integer_value(json_object_get(f, keys[l->kind][0])), l->min);
        assert_int_equal(json_integer_value(json_object_get(f, keys[l->kind][1])), l->max);
        if (msg == NULL)
            continue;
        type = json_object_get(f, "type");
        assert_int_equal(has_string(json_object_get(msg, "required"), field),
                         shopmicro_limit_needs_field(l));
        assert_int_equal(json_is_array(type) && has_string(type, "null"),
                         !shopmicro_limit_needs_field(l));
    }
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
        cmocka_unit_test(input_schemas_carry_the_limits),
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
