/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport-free half of the gRPC server: method-table lookup, the
 * per-call arena, metadata, deadline refusal and request decoding.
 */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"

static int handler_calls;
static char seen_id[64];

static svc_err_t echo_get(rpc_ctx_t *ctx, const ProtobufCMessage *in, ProtobufCMessage **out,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    const Shopmicro__Catalog__V1__GetProductRequest *req = (const void *)in;
    Shopmicro__Catalog__V1__Product *p = rpc_ctx_alloc(ctx, sizeof *p);

    handler_calls++;
    snprintf(seen_id, sizeof seen_id, "%s", req->id);
    if (strcmp(req->id, "missing") == 0) {
        svc_errbuf_set(errbuf, "product not found");
        return SVC_ENOTFOUND;
    }
    shopmicro__catalog__v1__product__init(p);
    p->id = rpc_ctx_strdup(ctx, req->id);
    *out = &p->base;
    return SVC_OK;
}

static const rpc_method_t methods[] = {
    {"/shopmicro.catalog.v1.CatalogService/GetProduct",
     &shopmicro__catalog__v1__get_product_request__descriptor, echo_get},
    {"/shopmicro.catalog.v1.CatalogService/ListProducts",
     &shopmicro__catalog__v1__list_products_request__descriptor, echo_get},
};

static size_t pack_get(const char *id, uint8_t *buf)
{
    Shopmicro__Catalog__V1__GetProductRequest req =
        SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;

    req.id = (char *)id;
    return shopmicro__catalog__v1__get_product_request__pack(&req, buf);
}

static void ctx_init(rpc_ctx_t *c, uint64_t deadline)
{
    memset(c, 0, sizeof *c);
    c->method = &methods[0];
    c->deadline_ns = deadline;
    rpc__arena_init(&c->arena);
}

static void method_table_validation(void **state)
{
    char err[SVC_ERRBUF_LEN] = "";
    rpc_method_t bad[2];

    (void)state;
    assert_int_equal(rpc__methods_validate(methods, 2, err), SVC_OK);
    assert_int_equal(rpc__methods_validate(methods, 0, err), SVC_EINVAL);

    bad[0] = methods[0];
    bad[1] = methods[0];
    assert_int_equal(rpc__methods_validate(bad, 2, err), SVC_EINVAL);
    assert_non_null(strstr(err, "listed twice"));

    bad[1] = methods[1];
    bad[1].path = "NoLeadingSlash/Get";
    assert_int_equal(rpc__methods_validate(bad, 2, err), SVC_EINVAL);
    bad[1].path = "/pkg.Service/";
    assert_int_equal(rpc__methods_validate(bad, 2, err), SVC_EINVAL);
    bad[1].path = "/pkg.Service/Get";
    bad[1].handler = NULL;
    assert_int_equal(rpc__methods_validate(bad, 2, err), SVC_EINVAL);
    assert_non_null(strstr(err, "/pkg.Service/Get"));
}

static void dispatch_decodes_and_calls_handler(void **state)
{
    uint8_t buf[64];
    size_t n = pack_get("p42", buf);
    char err[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *out = NULL;
    rpc_ctx_t c;

    (void)state;
    ctx_init(&c, SVC_DEADLINE_NONE);
    handler_calls = 0;
    assert_int_equal(rpc__dispatch(&c, buf, n, &out, err), SVC_OK);
    assert_int_equal(handler_calls, 1);
    assert_string_equal(seen_id, "p42");
    assert_string_equal(((Shopmicro__Catalog__V1__Product *)out)->id, "p42");
    rpc__arena_dispose(&c.arena);
}

static void handler_errors_pass_through(void **state)
{
    uint8_t buf[64];
    size_t n = pack_get("missing", buf);
    char err[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *out = NULL;
    rpc_ctx_t c;

    (void)state;
    ctx_init(&c, svc_now_ns() + 10 * SVC_NS_PER_MS * 1000);
    assert_int_equal(rpc__dispatch(&c, buf, n, &out, err), SVC_ENOTFOUND);
    assert_string_equal(err, "product not found");
    rpc__arena_dispose(&c.arena);
}

static void expired_deadline_skips_the_handler(void **state)
{
    uint8_t buf[64];
    size_t n = pack_get("p1", buf);
    char err[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *out = NULL;
    rpc_ctx_t c;

    (void)state;
    ctx_init(&c, svc_now_ns() - 1);
    handler_calls = 0;
    assert_int_equal(rpc__dispatch(&c, buf, n, &out, err), SVC_ETIMEDOUT);
    assert_int_equal(handler_calls, 0);
    assert_null(out);
    rpc__arena_dispose(&c.arena);
}

static void garbage_is_invalid_argument(void **state)
{
    const uint8_t junk[] = {0x0a, 0x7f, 'a'}; /* field 1, length 127, 1 byte */
    char err[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *out = NULL;
    rpc_ctx_t c;

    (void)state;
    ctx_init(&c, SVC_DEADLINE_NONE);
    handler_calls = 0;
    assert_int_equal(rpc__dispatch(&c, junk, sizeof junk, &out, err), SVC_EINVAL);
    assert_int_equal(handler_calls, 0);
    assert_non_null(strstr(err, "GetProductRequest"));
    rpc__arena_dispose(&c.arena);
}

static void nul_in_a_string_is_invalid_argument(void **state)
{
    const uint8_t nul[] = {0x0a, 0x03, 'a', 0x00, 'b'}; /* id = "a\0b" */
    char err[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *out = NULL;
    rpc_ctx_t c;

    (void)state;
    ctx_init(&c, SVC_DEADLINE_NONE);
    handler_calls = 0;
    assert_int_equal(rpc__dispatch(&c, nul, sizeof nul, &out, err), SVC_EINVAL);
    assert_int_equal(handler_calls, 0);
    assert_non_null(strstr(err, "NUL"));
    rpc__arena_dispose(&c.arena);
}

static void empty_request_is_valid(void **state)
{
    char err[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *out = NULL;
    rpc_ctx_t c;

    (void)state;
    ctx_init(&c, SVC_DEADLINE_NONE);
    assert_int_equal(rpc__dispatch(&c, NULL, 0, &out, err), SVC_OK);
    assert_string_equal(seen_id, "");
    rpc__arena_dispose(&c.arena);
}

static void arena_aligns_grows_resets_and_is_bounded(void **state)
{
    rpc__arena_t a;
    void *p;

    (void)state;
    rpc__arena_init(&a);
    for (int i = 0; i < 1000; i++) {
        p = rpc__arena_alloc(&a, (size_t)(i % 37) + 1);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % alignof(max_align_t), 0);
        memset(p, 0xab, (size_t)(i % 37) + 1);
    }
    assert_non_null(rpc__arena_alloc(&a, 100000)); /* bigger than a chunk */
    rpc__arena_reset(&a);
    assert_int_equal(a.total, 0);
    assert_null(rpc__arena_alloc(&a, RPC_ARENA_MAX + 1));
    assert_non_null(rpc__arena_alloc(&a, 16));
    rpc__arena_dispose(&a);
}

static void md_set(grpc_metadata *m, const char *key, const char *value, size_t len)
{
    memset(m, 0, sizeof *m);
    m->key = grpc_slice_from_static_string(key);
    m->value = grpc_slice_from_static_buffer(value, len);
}

static void metadata_lookup(void **state)
{
    grpc_metadata md[2];
    grpc_metadata_array arr = {2, 2, md};
    rpc_ctx_t c;

    (void)state;
    md_set(&md[0], "x-request-id", "req-7", 5);
    md_set(&md[1], "idempotency-key", "k1", 2);
    ctx_init(&c, SVC_DEADLINE_NONE);
    c.md = &arr;
    assert_string_equal(rpc_ctx_metadata(&c, "x-request-id"), "req-7");
    assert_string_equal(rpc_ctx_metadata(&c, "idempotency-key"), "k1");
    assert_null(rpc_ctx_metadata(&c, "x-request"));
    assert_null(rpc_ctx_metadata(&c, "absent"));
    rpc__arena_dispose(&c.arena);
}

/* What rpc_ctx_metadata cannot say: a key given twice, the bytes of a value
 * with a NUL inside, and a value read when the call's arena is full. */
static void metadata_presence_and_exact_bytes(void **state)
{
    static const char nul_inside[] = {'k', '\0', 'x'};
    grpc_metadata md[4];
    grpc_metadata_array arr = {4, 4, md};
    const char *v = "unset";
    size_t len = 99;
    rpc_ctx_t c;

    (void)state;
    md_set(&md[0], "idempotency-key", "first", 5);
    md_set(&md[1], "x-request-id", "req-8", 5);
    md_set(&md[2], "idempotency-key", "second", 6);
    md_set(&md[3], "nul-inside", nul_inside, sizeof nul_inside);
    ctx_init(&c, SVC_DEADLINE_NONE);
    c.md = &arr;

    assert_int_equal(rpc_ctx_metadata_n(&c, "absent", &v, &len), RPC_MD_ABSENT);
    assert_null(v);
    assert_int_equal(len, 0);
    assert_int_equal(rpc_ctx_metadata_n(&c, "x-request-id", &v, &len), RPC_MD_ONE);
    assert_int_equal(len, 5);
    assert_memory_equal(v, "req-8", 5);
    /* two entries: ambiguous, though the first is still shown */
    assert_int_equal(rpc_ctx_metadata_n(&c, "idempotency-key", &v, &len), RPC_MD_REPEATED);
    assert_int_equal(len, 5);
    assert_memory_equal(v, "first", 5);
    /* every byte, the NUL too; rpc_ctx_metadata cuts the value at it */
    assert_int_equal(rpc_ctx_metadata_n(&c, "nul-inside", &v, &len), RPC_MD_ONE);
    assert_int_equal(len, 3);
    assert_memory_equal(v, nul_inside, 3);
    assert_string_equal(rpc_ctx_metadata(&c, "nul-inside"), "k");

    /* a full arena: rpc_ctx_metadata says NULL as if absent, and
     * rpc_ctx_metadata_n, which copies nothing, still answers */
    c.arena.total = RPC_ARENA_MAX;
    assert_null(rpc_ctx_metadata(&c, "x-request-id"));
    assert_int_equal(rpc_ctx_metadata_n(&c, "x-request-id", &v, &len), RPC_MD_ONE);
    assert_memory_equal(v, "req-8", 5);

    /* no metadata at all */
    assert_int_equal(rpc_md_lookup(NULL, "x-request-id", &v, &len), RPC_MD_ABSENT);
    assert_null(v);
    rpc__arena_dispose(&c.arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(method_table_validation),
        cmocka_unit_test(dispatch_decodes_and_calls_handler),
        cmocka_unit_test(handler_errors_pass_through),
        cmocka_unit_test(expired_deadline_skips_the_handler),
        cmocka_unit_test(garbage_is_invalid_argument),
        cmocka_unit_test(nul_in_a_string_is_invalid_argument),
        cmocka_unit_test(empty_request_is_valid),
        cmocka_unit_test(arena_aligns_grows_resets_and_is_bounded),
        cmocka_unit_test(metadata_lookup),
        cmocka_unit_test(metadata_presence_and_exact_bytes),
    };
    return cmocka_run_group_tests_name("rpc_dispatch", tests, NULL, NULL);
}
