/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OrderService's input rules, driven through the method table without a
 * network, a catalog or a database: every rejection happens before any of
 * them is used (worker and app state are NULL here, so reaching them would
 * crash). Also the policy rows clients use for OrderService.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "order.h"
#include "rpc_int.h"
#include "shopmicro/order/v1/order.pb-c.h"

typedef Shopmicro__Order__V1__CreateOrderRequest create_req_t;

static const rpc_method_t *method(const char *name)
{
    for (size_t i = 0; i < ord_methods_count; i++) {
        const char *slash = strrchr(ord_methods[i].path, '/');
        if (strcmp(slash + 1, name) == 0)
            return &ord_methods[i];
    }
    fail_msg("no method %s", name);
    return NULL;
}

/* Packs msg, dispatches it to `name` with request metadata md (may be
 * NULL), returns the code and the message. */
static svc_err_t call(const char *name, const ProtobufCMessage *msg,
                      const grpc_metadata_array *md, char *err)
{
    uint8_t buf[16384];
    size_t n = protobuf_c_message_pack(msg, buf);
    ProtobufCMessage *out = NULL;
    rpc_ctx_t c;
    svc_err_t e;

    memset(&c, 0, sizeof c);
    c.method = method(name);
    c.deadline_ns = SVC_DEADLINE_NONE;
    c.md = md;
    rpc__arena_init(&c.arena);
    err[0] = '\0';
    e = rpc__dispatch(&c, buf, n, &out, err);
    rpc__arena_dispose(&c.arena);
    return e;
}

static void expect_md(const char *name, const ProtobufCMessage *msg,
                      const grpc_metadata_array *md, svc_err_t code, const char *needle)
{
    char err[SVC_ERRBUF_LEN];
    svc_err_t e = call(name, msg, md, err);

    if (e != code)
        fail_msg("%s: got %s \"%s\", want %s", name, svc_err_name(e), err, svc_err_name(code));
    if (strstr(err, needle) == NULL)
        fail_msg("%s: message \"%s\" does not contain \"%s\"", name, err, needle);
}

static void expect(const char *name, const ProtobufCMessage *msg, svc_err_t code,
                   const char *needle)
{
    expect_md(name, msg, NULL, code, needle);
}

static void create_rejects_bad_fields_by_name(void **state)
{
    Shopmicro__Order__V1__OrderItem it[3] = {SHOPMICRO__ORDER__V1__ORDER_ITEM__INIT,
                                             SHOPMICRO__ORDER__V1__ORDER_ITEM__INIT,
                                             SHOPMICRO__ORDER__V1__ORDER_ITEM__INIT};
    Shopmicro__Order__V1__OrderItem *items[3] = {&it[0], &it[1], &it[2]};
    create_req_t r = SHOPMICRO__ORDER__V1__CREATE_ORDER_REQUEST__INIT;

    (void)state;
    for (int i = 0; i < 3; i++) {
        it[i].product_id = (char *)(i == 0 ? "p0" : i == 1 ? "p1" : "p2");
        it[i].quantity = 1;
    }
    r.items = items;
    r.n_items = 3;
    expect("CreateOrder", &r.base, SVC_EINVAL, "customer_id must be 1-100");
    r.customer_id = (char *)"c1";
    it[2].quantity = 1001;
    expect("CreateOrder", &r.base, SVC_EINVAL, "items[2].quantity must be 1-1000");
    it[2].quantity = 1;
    it[1].product_id = (char *)"";
    expect("CreateOrder", &r.base, SVC_EINVAL, "items[1].product_id");
    it[1].product_id = (char *)"p0";
    it[1].quantity = 1000;
    expect("CreateOrder", &r.base, SVC_EINVAL, "items[1].quantity brings product p0 to 1001");
    r.n_items = 0;
    expect("CreateOrder", &r.base, SVC_EINVAL, "items must have 1-100 entries");
}

/* Keys a gRPC client can send but the service cannot honour byte for byte
 * (C-core clients refuse to send most of them; a raw HTTP/2 client need
 * not). A valid key would go on to the database, which is NULL here. */
static void create_refuses_idempotency_keys_it_cannot_honour(void **state)
{
    Shopmicro__Order__V1__OrderItem it = SHOPMICRO__ORDER__V1__ORDER_ITEM__INIT;
    Shopmicro__Order__V1__OrderItem *items[1] = {&it};
    create_req_t r = SHOPMICRO__ORDER__V1__CREATE_ORDER_REQUEST__INIT;
    char long_key[257];
    const char *bad[] = {"", "key with space", "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87-6c36ef84",
                         "tab\tkey", "del\x7f", "nl\n", long_key};

    (void)state;
    memset(long_key, 'k', 256);
    long_key[256] = '\0';
    it.product_id = (char *)"p0";
    it.quantity = 1;
    r.customer_id = (char *)"c1";
    r.items = items;
    r.n_items = 1;
    for (size_t i = 0; i < SVC_COUNTOF(bad); i++) {
        grpc_metadata m[2];
        grpc_metadata_array md = {2, 2, m};

        memset(m, 0, sizeof m);
        m[0].key = grpc_slice_from_static_string("x-request-id");
        m[0].value = grpc_slice_from_static_string("r1");
        m[1].key = grpc_slice_from_static_string("idempotency-key");
        m[1].value = grpc_slice_from_static_buffer(bad[i], strlen(bad[i]));
        expect_md("CreateOrder", &r.base, &md, SVC_EINVAL,
                  "idempotency-key must be 1-255 printable ASCII characters (0x21-0x7E)");
    }
}

static void malformed_order_ids_are_not_found(void **state)
{
    Shopmicro__Order__V1__GetOrderRequest r = SHOPMICRO__ORDER__V1__GET_ORDER_REQUEST__INIT;
    const char *ids[] = {"does-not-exist", "", "'; DROP TABLE orders;--",
                         "0000000000000000000000000000000000",
                         "g0000000-0000-0000-0000-000000000000",
                         "00000000-0000-0000-0000-0000000000000"};

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(ids); i++) {
        r.id = (char *)ids[i];
        expect("GetOrder", &r.base, SVC_ENOTFOUND, "order not found");
    }
}

static const rs_method_t *client_row(const char *name)
{
    for (size_t i = 0; i < ord_client_methods_count; i++) {
        const char *slash = strrchr(ord_client_methods[i].path, '/');
        if (strcmp(slash + 1, name) == 0)
            return &ord_client_methods[i];
    }
    fail_msg("no client row for %s", name);
    return NULL;
}

static void clients_never_retry_create_but_may_retry_get(void **state)
{
    (void)state;
    assert_int_equal(client_row("CreateOrder")->idempotency, RS_NOT_IDEMPOTENT);
    assert_int_equal(client_row("GetOrder")->idempotency, RS_IDEMPOTENT);
    /* The client rows name exactly the methods served. */
    assert_int_equal(ord_client_methods_count, ord_methods_count);
    for (size_t i = 0; i < ord_methods_count; i++)
        assert_string_equal(ord_methods[i].path, ord_client_methods[i].path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_rejects_bad_fields_by_name),
        cmocka_unit_test(create_refuses_idempotency_keys_it_cannot_honour),
        cmocka_unit_test(malformed_order_ids_are_not_found),
        cmocka_unit_test(clients_never_retry_create_but_may_retry_get),
    };
    return cmocka_run_group_tests_name("ord_validation", tests, NULL, NULL);
}
