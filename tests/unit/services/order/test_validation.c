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
#include "internal.h"
#include "principal/principal.h"
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

/* The caller every call below is made as, unless a test changes it: the
 * principal the gateway passes (pkg/principal). subject NULL: none. */
static const char *caller_subject = "c1";
static const char *caller_scopes = "orders:write orders:read";

static void reset_caller(void)
{
    caller_subject = "c1";
    caller_scopes = "orders:write orders:read";
}

/* md's entries after the caller's, in all (room for 16). */
static grpc_metadata_array with_caller(grpc_metadata *all, const grpc_metadata_array *md)
{
    size_t n = 0;

    memset(all, 0, 16 * sizeof *all);
    if (caller_subject != NULL) {
        all[n].key = grpc_slice_from_static_string(PR_MD_SUBJECT);
        all[n++].value = grpc_slice_from_static_string(caller_subject);
        all[n].key = grpc_slice_from_static_string(PR_MD_SCOPES);
        all[n++].value = grpc_slice_from_static_string(caller_scopes);
    }
    for (size_t i = 0; md != NULL && i < md->count && n < 16; i++)
        all[n++] = md->metadata[i];
    return (grpc_metadata_array){n, n, all};
}

/* Packs msg, dispatches it to `name` as the caller above with request
 * metadata md (may be NULL) and at most arena_left bytes of call memory
 * (SIZE_MAX: all there is), returns the code and the message, and in *used
 * (may be NULL) how much call memory the call took. */
static svc_err_t call_in(const char *name, const ProtobufCMessage *msg,
                         const grpc_metadata_array *md, size_t arena_left, size_t *used, char *err)
{
    uint8_t buf[16384];
    size_t n = protobuf_c_message_pack(msg, buf);
    ProtobufCMessage *out = NULL;
    grpc_metadata entries[16];
    grpc_metadata_array all = with_caller(entries, md);
    rpc_ctx_t c;
    svc_err_t e;
    size_t start;

    memset(&c, 0, sizeof c);
    c.method = method(name);
    c.deadline_ns = SVC_DEADLINE_NONE;
    c.md = &all;
    rpc__arena_init(&c.arena);
    if (arena_left < RPC_ARENA_MAX)
        c.arena.total = RPC_ARENA_MAX - arena_left; /* as if the call had used the rest */
    start = c.arena.total;
    err[0] = '\0';
    e = rpc__dispatch(&c, buf, n, &out, err);
    if (used != NULL)
        *used = c.arena.total - start;
    rpc__arena_dispose(&c.arena);
    return e;
}

static svc_err_t call(const char *name, const ProtobufCMessage *msg, const grpc_metadata_array *md,
                      char *err)
{
    return call_in(name, msg, md, SIZE_MAX, NULL, err);
}

static void expect_md(const char *name, const ProtobufCMessage *msg, const grpc_metadata_array *md,
                      svc_err_t code, const char *needle)
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
    char long_subject[102];

    (void)state;
    for (int i = 0; i < 3; i++) {
        it[i].product_id = (char *)(i == 0 ? "p0" : i == 1 ? "p1" : "p2");
        it[i].quantity = 1;
    }
    r.items = items;
    r.n_items = 3;
    memset(long_subject, 'c', 101); /* one more than a customer id may have */
    long_subject[101] = '\0';
    caller_subject = long_subject;
    expect("CreateOrder", &r.base, SVC_EUNAUTH, "no valid caller");
    reset_caller();
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
    const char *bad[] = {"",         "key with space", "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87-6c36ef84",
                         "tab\tkey", "del\x7f",        "nl\n",
                         long_key};

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

/* The owner rule (services/order/caller.h): no principal, a principal
 * without the scope, and an order for another customer are refused before
 * anything else is looked at. */
static void create_needs_a_caller_with_orders_write_placing_their_own(void **state)
{
    Shopmicro__Order__V1__OrderItem it = SHOPMICRO__ORDER__V1__ORDER_ITEM__INIT;
    Shopmicro__Order__V1__OrderItem *items[1] = {&it};
    create_req_t r = SHOPMICRO__ORDER__V1__CREATE_ORDER_REQUEST__INIT;

    it.product_id = (char *)"p0";
    it.quantity = 1;
    r.customer_id = (char *)"c1";
    r.items = items;
    r.n_items = 1;
    caller_subject = NULL;
    expect("CreateOrder", &r.base, SVC_EUNAUTH, "no valid caller (x-shopmicro-subject)");
    caller_subject = "c 1";
    expect("CreateOrder", &r.base, SVC_EUNAUTH, "no valid caller");
    caller_subject = "c1";
    caller_scopes = "orders:read catalog:write";
    expect("CreateOrder", &r.base, SVC_EPERM, "lacks the scope orders:write");
    caller_scopes = "orders:write";
    r.customer_id = (char *)"c2";
    expect("CreateOrder", &r.base, SVC_EPERM, "customer_id names another customer");
    reset_caller();
}

static void get_needs_a_caller_with_orders_read(void **state)
{
    Shopmicro__Order__V1__GetOrderRequest r = SHOPMICRO__ORDER__V1__GET_ORDER_REQUEST__INIT;

    r.id = (char *)"not-a-uuid";
    caller_subject = NULL;
    expect("GetOrder", &r.base, SVC_EUNAUTH, "no valid caller");
    caller_subject = "c1";
    caller_scopes = "orders:write";
    expect("GetOrder", &r.base, SVC_EPERM, "lacks the scope orders:read orders:admin");
    caller_scopes = "orders:admin";
    expect("GetOrder", &r.base, SVC_ENOTFOUND, "order not found");
    reset_caller();
}

static void one_item_order(create_req_t *r, Shopmicro__Order__V1__OrderItem *it,
                           Shopmicro__Order__V1__OrderItem **items)
{
    it->product_id = (char *)"p0";
    it->quantity = 1;
    items[0] = it;
    r->customer_id = (char *)"c1";
    r->items = items;
    r->n_items = 1;
}

/* Metadata key -> value (len bytes) entries as an array; m holds them. */
static grpc_metadata_array md_of(grpc_metadata *m, size_t n, const char *const *kv,
                                 const size_t *lens)
{
    memset(m, 0, n * sizeof *m);
    for (size_t i = 0; i < n; i++) {
        m[i].key = grpc_slice_from_static_string(kv[2 * i]);
        m[i].value = grpc_slice_from_static_buffer(kv[2 * i + 1], lens[i]);
    }
    return (grpc_metadata_array){n, n, m};
}

/* Two idempotency-key entries (HTTP/2 allows a key in several fields) are
 * ambiguous, the same twice too; a NUL byte inside a key would make the
 * stored key shorter than the one sent. Refused, never run as if there
 * were no key or another one. */
static void create_refuses_repeated_keys_and_nul_bytes(void **state)
{
    Shopmicro__Order__V1__OrderItem it = SHOPMICRO__ORDER__V1__ORDER_ITEM__INIT, *items[1];
    create_req_t r = SHOPMICRO__ORDER__V1__CREATE_ORDER_REQUEST__INIT;
    static const char *const twice[] = {"idempotency-key", "k-1", "x-request-id", "r1",
                                        "idempotency-key", "k-2"};
    static const char *const same[] = {"idempotency-key", "k-1", "idempotency-key", "k-1"};
    static const char nul[] = {'k', '-', '1', '\0', 'x'};
    const char *const with_nul[] = {"idempotency-key", nul};
    const size_t twice_len[] = {3, 2, 3}, same_len[] = {3, 3}, nul_len[] = {sizeof nul};
    grpc_metadata m[3];
    grpc_metadata_array md;

    (void)state;
    one_item_order(&r, &it, items);
    md = md_of(m, 3, twice, twice_len);
    expect_md("CreateOrder", &r.base, &md, SVC_EINVAL,
              "idempotency-key must be given once, not in several entries");
    md = md_of(m, 2, same, same_len);
    expect_md("CreateOrder", &r.base, &md, SVC_EINVAL,
              "idempotency-key must be given once, not in several entries");
    md = md_of(m, 1, with_nul, nul_len);
    expect_md("CreateOrder", &r.base, &md, SVC_EINVAL,
              "idempotency-key must be 1-255 printable ASCII characters (0x21-0x7E)");
}

/* A valid key that cannot be copied for want of call memory fails the call
 * loudly (INTERNAL: the same request would run out again, so "retry
 * later" would loop), rather than creating an order without its key. */
static void create_fails_loudly_when_the_key_cannot_be_kept(void **state)
{
    Shopmicro__Order__V1__OrderItem it = SHOPMICRO__ORDER__V1__ORDER_ITEM__INIT, *items[1];
    create_req_t r = SHOPMICRO__ORDER__V1__CREATE_ORDER_REQUEST__INIT;
    char key[SVC_IDEMPOTENCY_KEY_MAX], err[SVC_ERRBUF_LEN];
    const char *bad_kv[] = {"idempotency-key", "a b"}, *kv[] = {"idempotency-key", key};
    const size_t bad_len[] = {3}, len[] = {sizeof key};
    grpc_metadata m[1];
    grpc_metadata_array md;
    size_t decoded = 0;

    (void)state;
    one_item_order(&r, &it, items);
    memset(key, 'k', sizeof key);
    /* What decoding the request takes: a refused key is refused before
     * anything else is allocated. */
    md = md_of(m, 1, bad_kv, bad_len);
    assert_int_equal(call_in("CreateOrder", &r.base, &md, SIZE_MAX, &decoded, err), SVC_EINVAL);
    assert_true(decoded > 0);
    /* Exactly that much left, and one byte short of what the key needs. */
    md = md_of(m, 1, kv, len);
    assert_int_equal(call_in("CreateOrder", &r.base, &md, decoded, NULL, err), SVC_EINTERNAL);
    assert_non_null(strstr(err, "cannot keep idempotency-key: the call's memory is exhausted"));
    assert_int_equal(call_in("CreateOrder", &r.base, &md, decoded + sizeof key, NULL, err),
                     SVC_EINTERNAL);
}

static void malformed_order_ids_are_not_found(void **state)
{
    Shopmicro__Order__V1__GetOrderRequest r = SHOPMICRO__ORDER__V1__GET_ORDER_REQUEST__INIT;
    const char *ids[] = {"does-not-exist",
                         "",
                         "'; DROP TABLE orders;--",
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
        cmocka_unit_test(create_refuses_repeated_keys_and_nul_bytes),
        cmocka_unit_test(create_fails_loudly_when_the_key_cannot_be_kept),
        cmocka_unit_test(malformed_order_ids_are_not_found),
        cmocka_unit_test(create_needs_a_caller_with_orders_write_placing_their_own),
        cmocka_unit_test(get_needs_a_caller_with_orders_read),
        cmocka_unit_test(clients_never_retry_create_but_may_retry_get),
    };
    return cmocka_run_group_tests_name("ord_validation", tests, NULL, NULL);
}
