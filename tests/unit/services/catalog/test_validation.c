/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CatalogService's input rules, driven through the method table without a
 * network or a database: every rejection happens before the store is used
 * (the worker state is NULL here, so reaching the store would crash).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "catalog.h"
#include "internal.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"

static const rpc_method_t *method(const char *name)
{
    for (size_t i = 0; i < cat_methods_count; i++) {
        const char *slash = strrchr(cat_methods[i].path, '/');
        if (strcmp(slash + 1, name) == 0)
            return &cat_methods[i];
    }
    fail_msg("no method %s", name);
    return NULL;
}

/* Packs msg, dispatches it to `name`, returns the code and the message. */
static svc_err_t call(const char *name, const ProtobufCMessage *msg, char *err)
{
    uint8_t buf[4096];
    size_t n = protobuf_c_message_pack(msg, buf);
    ProtobufCMessage *out = NULL;
    rpc_ctx_t c;
    svc_err_t e;

    memset(&c, 0, sizeof c);
    c.method = method(name);
    c.deadline_ns = SVC_DEADLINE_NONE;
    rpc__arena_init(&c.arena);
    err[0] = '\0';
    e = rpc__dispatch(&c, buf, n, &out, err);
    rpc__arena_dispose(&c.arena);
    return e;
}

static void expect(const char *name, const ProtobufCMessage *msg, svc_err_t code,
                   const char *needle)
{
    char err[SVC_ERRBUF_LEN];
    svc_err_t e = call(name, msg, err);

    assert_int_equal(e, code);
    if (strstr(err, needle) == NULL)
        fail_msg("%s: message \"%s\" does not contain \"%s\"", name, err, needle);
}

static void create_rejects_bad_fields_by_name(void **state)
{
    Shopmicro__Catalog__V1__CreateProductRequest r =
        SHOPMICRO__CATALOG__V1__CREATE_PRODUCT_REQUEST__INIT;
    char long_name[202], bad_utf8[] = {'a', (char)0xff, 'b', 0};

    (void)state;
    r.name = (char *)"";
    expect("CreateProduct", &r.base, SVC_EINVAL, "name");
    memset(long_name, 'n', 201);
    long_name[201] = '\0';
    r.name = long_name;
    expect("CreateProduct", &r.base, SVC_EINVAL, "name must be 1-200");
    r.name = bad_utf8;
    expect("CreateProduct", &r.base, SVC_EINVAL, "name");
    r.name = (char *)"Mug";
    r.price_cents = -1;
    expect("CreateProduct", &r.base, SVC_EINVAL, "price_cents");
    r.price_cents = 0;
    r.stock = -1;
    expect("CreateProduct", &r.base, SVC_EINVAL, "stock");
}

static void malformed_ids_are_not_found(void **state)
{
    Shopmicro__Catalog__V1__GetProductRequest r = SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
    const char *ids[] = {"does-not-exist",
                         "",
                         "'; DROP TABLE products;--",
                         "0000000000000000000000000000000000", /* no dashes */
                         "g0000000-0000-0000-0000-000000000000",
                         "00000000-0000-0000-0000-0000000000000"};

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(ids); i++) {
        r.id = (char *)ids[i];
        expect("GetProduct", &r.base, SVC_ENOTFOUND, "product not found");
    }
}

static void list_rejects_negative_size_and_bad_token(void **state)
{
    Shopmicro__Catalog__V1__ListProductsRequest r =
        SHOPMICRO__CATALOG__V1__LIST_PRODUCTS_REQUEST__INIT;

    (void)state;
    r.page_size = -1;
    expect("ListProducts", &r.base, SVC_EINVAL, "page_size");
    r.page_size = 10;
    r.page_token = (char *)"not-a-token";
    expect("ListProducts", &r.base, SVC_EINVAL, "page_token");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_rejects_bad_fields_by_name),
        cmocka_unit_test(malformed_ids_are_not_found),
        cmocka_unit_test(list_rejects_negative_size_and_bad_token),
    };
    return cmocka_run_group_tests_name("cat_validation", tests, NULL, NULL);
}
