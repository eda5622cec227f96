/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbj_encode: exact bytes for the ShopMicro messages and for every field
 * shape, as protojson with EmitUnpopulated writes them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "legacy.pb-c.h"
#include "pbj_test.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "shopmicro/order/v1/order.pb-c.h"
#include "types.pb-c.h"

/* pbj__encode_max is internal: pbj_encode with a smaller output cap. */
svc_err_t pbj__encode_max(const ProtobufCMessage *msg, ProtobufCAllocator *alloc, size_t max,
                          char **out, size_t *out_len, char errbuf[static SVC_ERRBUF_LEN]);

static void create_order_response(void **state)
{
    Shopmicro__Order__V1__CreateOrderResponse r = SHOPMICRO__ORDER__V1__CREATE_ORDER_RESPONSE__INIT;

    (void)state;
    r.id = (char *)"abc";
    r.status = SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_PENDING;
    r.total_cents = 2598;
    pbjt_encodes(&r.base,
                 "{\"id\":\"abc\",\"status\":\"ORDER_STATUS_PENDING\",\"totalCents\":\"2598\"}");
}

static void empty_list_products_response(void **state)
{
    Shopmicro__Catalog__V1__ListProductsResponse r =
        SHOPMICRO__CATALOG__V1__LIST_PRODUCTS_RESPONSE__INIT;

    (void)state;
    pbjt_encodes(&r.base, "{\"products\":[],\"nextPageToken\":\"\"}");
}

static void product(void **state)
{
    Shopmicro__Catalog__V1__Product p = SHOPMICRO__CATALOG__V1__PRODUCT__INIT;

    (void)state;
    p.id = (char *)"p1";
    p.name = (char *)"Mug";
    p.price_cents = 1299;
    pbjt_encodes(&p.base,
                 "{\"id\":\"p1\",\"name\":\"Mug\",\"description\":\"\",\"priceCents\":\"1299\","
                 "\"stock\":0,\"createdAt\":\"\"}");
}

static void list_with_products(void **state)
{
    Shopmicro__Catalog__V1__ListProductsResponse r =
        SHOPMICRO__CATALOG__V1__LIST_PRODUCTS_RESPONSE__INIT;
    Shopmicro__Catalog__V1__Product a = SHOPMICRO__CATALOG__V1__PRODUCT__INIT;
    Shopmicro__Catalog__V1__Product b = SHOPMICRO__CATALOG__V1__PRODUCT__INIT;
    Shopmicro__Catalog__V1__Product *items[] = {&a, &b};

    (void)state;
    a.id = (char *)"a";
    a.stock = 3;
    b.id = (char *)"b";
    b.price_cents = -5;
    b.created_at = (char *)"2025-01-02T03:04:05Z";
    r.n_products = 2;
    r.products = items;
    r.next_page_token = (char *)"tok";
    pbjt_encodes(
        &r.base,
        "{\"products\":[{\"id\":\"a\",\"name\":\"\",\"description\":\"\",\"priceCents\":\"0\","
        "\"stock\":3,\"createdAt\":\"\"},{\"id\":\"b\",\"name\":\"\",\"description\":\"\","
        "\"priceCents\":\"-5\",\"stock\":0,\"createdAt\":\"2025-01-02T03:04:05Z\"}],"
        "\"nextPageToken\":\"tok\"}");
}

static void order_with_items(void **state)
{
    Shopmicro__Order__V1__Order o = SHOPMICRO__ORDER__V1__ORDER__INIT;
    Shopmicro__Order__V1__OrderItem i = SHOPMICRO__ORDER__V1__ORDER_ITEM__INIT;
    Shopmicro__Order__V1__OrderItem *items[] = {&i};

    (void)state;
    o.id = (char *)"o1";
    o.customer_id = (char *)"c1";
    o.n_items = 1;
    o.items = items;
    i.product_id = (char *)"p1";
    i.quantity = 2;
    i.unit_price_cents = 1299;
    o.total_cents = 2598;
    pbjt_encodes(&o.base, "{\"id\":\"o1\",\"customerId\":\"c1\",\"items\":[{\"productId\":\"p1\","
                          "\"quantity\":2,\"unitPriceCents\":\"1299\"}],\"totalCents\":\"2598\","
                          "\"status\":\"ORDER_STATUS_UNSPECIFIED\",\"createdAt\":\"\","
                          "\"cancelReason\":\"\"}");
}

static void scalars_unpopulated(void **state)
{
    Pbjtest__Scalars s = PBJTEST__SCALARS__INIT;

    (void)state;
    pbjt_encodes(&s.base,
                 "{\"fInt32\":0,\"fInt64\":\"0\",\"fUint32\":0,\"fUint64\":\"0\",\"fSint32\":0,"
                 "\"fSint64\":\"0\",\"fFixed32\":0,\"fFixed64\":\"0\",\"fSfixed32\":0,"
                 "\"fSfixed64\":\"0\",\"fBool\":false,\"fString\":\"\",\"fBytes\":\"\","
                 "\"fDouble\":0,\"fFloat\":0,\"fEnum\":\"COLOR_UNSPECIFIED\",\"fMessage\":null}");
}

static void scalars_extremes(void **state)
{
    Pbjtest__Scalars s = PBJTEST__SCALARS__INIT;
    Pbjtest__Inner in = PBJTEST__INNER__INIT;
    uint8_t bytes[] = {0x00, 0xff, 0x10};

    (void)state;
    s.f_int32 = INT32_MIN;
    s.f_int64 = INT64_MIN;
    s.f_uint32 = UINT32_MAX;
    s.f_uint64 = UINT64_MAX;
    s.f_sint32 = INT32_MAX;
    s.f_sint64 = INT64_MAX;
    s.f_fixed32 = 7;
    s.f_fixed64 = 9007199254740993ull;
    s.f_sfixed32 = -7;
    s.f_sfixed64 = -9007199254740993ll;
    s.f_bool = 1;
    s.f_string = (char *)"x";
    s.f_bytes = (ProtobufCBinaryData){sizeof(bytes), bytes};
    s.f_double = -1.5;
    s.f_float = 0.1f;
    s.f_enum = PBJTEST__COLOR__COLOR_GREEN;
    s.f_message = &in;
    in.a = 1;
    pbjt_encodes(
        &s.base,
        "{\"fInt32\":-2147483648,\"fInt64\":\"-9223372036854775808\",\"fUint32\":4294967295,"
        "\"fUint64\":\"18446744073709551615\",\"fSint32\":2147483647,"
        "\"fSint64\":\"9223372036854775807\",\"fFixed32\":7,\"fFixed64\":\"9007199254740993\","
        "\"fSfixed32\":-7,\"fSfixed64\":\"-9007199254740993\",\"fBool\":true,\"fString\":\"x\","
        "\"fBytes\":\"AP8Q\",\"fDouble\":-1.5,\"fFloat\":0.1,\"fEnum\":\"COLOR_GREEN\","
        "\"fMessage\":{\"a\":1,\"bValue\":\"\",\"child\":null,\"children\":[]}}");
}

static void unknown_enum_number_is_a_number(void **state)
{
    Shopmicro__Order__V1__CreateOrderResponse r = SHOPMICRO__ORDER__V1__CREATE_ORDER_RESPONSE__INIT;

    (void)state;
    r.status = 42;
    pbjt_encodes(&r.base, "{\"id\":\"\",\"status\":42,\"totalCents\":\"0\"}");
    r.status = -3;
    pbjt_encodes(&r.base, "{\"id\":\"\",\"status\":-3,\"totalCents\":\"0\"}");
}

static void string_escaping(void **state)
{
    Shopmicro__Catalog__V1__GetProductRequest g = SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;

    (void)state;
    /* protojson escapes only '"', '\\' and control characters; no HTML
     * escaping, DEL and non-ASCII pass through. */
    g.id =
        (char *)"q\"b\\s/\b\f\n\r\t\x01\x1f<>&\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xe2\x80\xa8";
    pbjt_encodes(&g.base,
                 "{\"id\":\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0001\\u001f<>&\x7f\xc3\xa9\xe2\x82\xac"
                 "\xf0\x9f\x98\x80\xe2\x80\xa8\"}");
}

static void invalid_utf8_is_refused(void **state)
{
    static const char *const bad[] = {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80",
                                      "\xf4\x90\x80\x80"};
    Shopmicro__Catalog__V1__GetProductRequest g = SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
    char errbuf[SVC_ERRBUF_LEN];
    char *out = NULL;
    size_t len = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        g.id = (char *)bad[i];
        assert_int_equal(pbj_encode(&g.base, NULL, &out, &len, errbuf), SVC_EINVAL);
        assert_null(out);
        assert_string_equal(errbuf, "field shopmicro.catalog.v1.GetProductRequest.id contains "
                                    "invalid UTF-8");
    }
}

static void bytes_base64(void **state)
{
    static const struct {
        const char *in;
        const char *out;
    } cases[] = {{"", ""},        {"f", "Zg=="},        {"fo", "Zm8="},
                 {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"\xfb\xff", "+/8="}};
    Pbjtest__Scalars s = PBJTEST__SCALARS__INIT;
    char *out = NULL, want[64];
    size_t len;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        s.f_bytes = (ProtobufCBinaryData){strlen(cases[i].in), (uint8_t *)(uintptr_t)cases[i].in};
        assert_int_equal(pbj_encode(&s.base, NULL, &out, &len, SVC_ERRBUF_SCRATCH), SVC_OK);
        snprintf(want, sizeof(want), "\"fBytes\":\"%s\"", cases[i].out);
        assert_non_null(strstr(out, want));
        pbj_free(NULL, out);
    }
}

static void floats(void **state)
{
    static const struct {
        double v;
        const char *out;
    } dbl[] = {{0.0, "0"},
               {-0.0, "-0"},
               {1, "1"},
               {-1.5, "-1.5"},
               {0.1, "0.1"},
               {1.0 / 3, "0.3333333333333333"},
               {123456789, "123456789"},
               {1e20, "100000000000000000000"},
               {1e21, "1e+21"},
               {1.5e300, "1.5e+300"},
               {1e-6, "0.000001"},
               {1e-7, "1e-7"},
               {1.25e-10, "1.25e-10"},
               {5e-324, "5e-324"},
               {1.7976931348623157e308, "1.7976931348623157e+308"},
               {INFINITY, "\"Infinity\""},
               {-INFINITY, "\"-Infinity\""},
               {NAN, "\"NaN\""}};
    static const struct {
        float v;
        const char *out;
    } flt[] = {{0.1f, "0.1"},
               {16777216.0f, "16777216"},
               {3.4028235e38f, "3.4028235e+38"},
               {1e-7f, "1e-7"},
               {1.1754944e-38f, "1.1754944e-38"},
               {-2.5f, "-2.5"},
               {1e21f, "1e+21"},
               {9.999999e20f, "999999900000000000000"}};
    Pbjtest__Scalars s = PBJTEST__SCALARS__INIT;
    char *out = NULL, want[96];
    size_t len;

    (void)state;
    for (size_t i = 0; i < sizeof(dbl) / sizeof(dbl[0]); i++) {
        s.f_double = dbl[i].v;
        assert_int_equal(pbj_encode(&s.base, NULL, &out, &len, SVC_ERRBUF_SCRATCH), SVC_OK);
        snprintf(want, sizeof(want), "\"fDouble\":%s,", dbl[i].out);
        if (strstr(out, want) == NULL)
            fail_msg("double %.17g: want %s in %s", dbl[i].v, want, out);
        pbj_free(NULL, out);
    }
    s.f_double = 0;
    for (size_t i = 0; i < sizeof(flt) / sizeof(flt[0]); i++) {
        s.f_float = flt[i].v;
        assert_int_equal(pbj_encode(&s.base, NULL, &out, &len, SVC_ERRBUF_SCRATCH), SVC_OK);
        snprintf(want, sizeof(want), "\"fFloat\":%s,", flt[i].out);
        if (strstr(out, want) == NULL)
            fail_msg("float %.9g: want %s in %s", (double)flt[i].v, want, out);
        pbj_free(NULL, out);
    }
}

static void repeated_fields(void **state)
{
    Pbjtest__Repeated r = PBJTEST__REPEATED__INIT;
    int32_t i32[] = {1, -2};
    int64_t i64[] = {INT64_MAX};
    uint64_t u64[] = {0, UINT64_MAX};
    protobuf_c_boolean b[] = {1, 0};
    char *strs[] = {(char *)"a", (char *)""};
    ProtobufCBinaryData bytes[] = {{1, (uint8_t *)"f"}, {0, NULL}};
    double d[] = {NAN, 2.5};
    float f[] = {1.0f};
    Pbjtest__Color e[] = {PBJTEST__COLOR__COLOR_RED, 9};
    Pbjtest__Inner in = PBJTEST__INNER__INIT, *msgs[] = {&in};

    (void)state;
    pbjt_encodes(&r.base,
                 "{\"rInt32\":[],\"rInt64\":[],\"rUint64\":[],\"rBool\":[],\"rString\":[],"
                 "\"rBytes\":[],\"rDouble\":[],\"rFloat\":[],\"rEnum\":[],\"rMessage\":[]}");
    r.n_r_int32 = 2, r.r_int32 = i32;
    r.n_r_int64 = 1, r.r_int64 = i64;
    r.n_r_uint64 = 2, r.r_uint64 = u64;
    r.n_r_bool = 2, r.r_bool = b;
    r.n_r_string = 2, r.r_string = strs;
    r.n_r_bytes = 2, r.r_bytes = bytes;
    r.n_r_double = 2, r.r_double = d;
    r.n_r_float = 1, r.r_float = f;
    r.n_r_enum = 2, r.r_enum = e;
    r.n_r_message = 1, r.r_message = msgs;
    pbjt_encodes(&r.base,
                 "{\"rInt32\":[1,-2],\"rInt64\":[\"9223372036854775807\"],"
                 "\"rUint64\":[\"0\",\"18446744073709551615\"],\"rBool\":[true,false],"
                 "\"rString\":[\"a\",\"\"],\"rBytes\":[\"Zg==\",\"\"],\"rDouble\":[\"NaN\",2.5],"
                 "\"rFloat\":[1],\"rEnum\":[\"COLOR_RED\",9],"
                 "\"rMessage\":[{\"a\":0,\"bValue\":\"\",\"child\":null,\"children\":[]}]}");
}

static void null_repeated_message_is_refused(void **state)
{
    Pbjtest__Repeated r = PBJTEST__REPEATED__INIT;
    Pbjtest__Inner *msgs[] = {NULL};
    char errbuf[SVC_ERRBUF_LEN], *out = NULL;
    size_t len;

    (void)state;
    r.n_r_message = 1;
    r.r_message = msgs;
    assert_int_equal(pbj_encode(&r.base, NULL, &out, &len, errbuf), SVC_EINVAL);
    assert_string_equal(errbuf, "field pbjtest.Repeated.r_message holds a NULL message");
}

static void maps_sorted_and_last_wins(void **state)
{
    Pbjtest__Maps m = PBJTEST__MAPS__INIT;
    Pbjtest__Maps__StrIntEntry s1 = PBJTEST__MAPS__STR_INT_ENTRY__INIT, s2 = s1, s3 = s1, s4 = s1;
    Pbjtest__Maps__StrIntEntry *str_int[] = {&s1, &s2, &s3, &s4};
    Pbjtest__Maps__IntStrEntry i1 = PBJTEST__MAPS__INT_STR_ENTRY__INIT, i2 = i1, i3 = i1;
    Pbjtest__Maps__IntStrEntry *int_str[] = {&i1, &i2, &i3};
    Pbjtest__Maps__UintMsgEntry u1 = PBJTEST__MAPS__UINT_MSG_ENTRY__INIT;
    Pbjtest__Maps__UintMsgEntry *uint_msg[] = {&u1};
    Pbjtest__Maps__BoolEnumEntry b1 = PBJTEST__MAPS__BOOL_ENUM_ENTRY__INIT, b2 = b1;
    Pbjtest__Maps__BoolEnumEntry *bool_enum[] = {&b1, &b2};
    Pbjtest__Maps__SintBytesEntry sb = PBJTEST__MAPS__SINT_BYTES_ENTRY__INIT;
    Pbjtest__Maps__SintBytesEntry *sint_bytes[] = {&sb};

    (void)state;
    pbjt_encodes(&m.base, "{\"strInt\":{},\"intStr\":{},\"uintMsg\":{},\"boolEnum\":{},"
                          "\"sintBytes\":{},\"strDouble\":{}}");
    /* Byte order for strings; a repeated key keeps its last value. */
    s1.key = (char *)"b", s1.value = 1;
    s2.key = (char *)"a", s2.value = 2;
    s3.key = (char *)"B", s3.value = 3;
    s4.key = (char *)"b", s4.value = 4;
    m.n_str_int = 4, m.str_int = str_int;
    /* Numeric order for integers. */
    i1.key = 10, i1.value = (char *)"ten";
    i2.key = -1, i2.value = (char *)"minus one";
    i3.key = 2, i3.value = (char *)"two";
    m.n_int_str = 3, m.int_str = int_str;
    /* An unset message value is the default message. */
    u1.key = 7;
    m.n_uint_msg = 1, m.uint_msg = uint_msg;
    b1.key = 1, b1.value = PBJTEST__COLOR__COLOR_RED;
    b2.key = 0, b2.value = PBJTEST__COLOR__COLOR_GREEN;
    m.n_bool_enum = 2, m.bool_enum = bool_enum;
    sb.key = -4, sb.value = (ProtobufCBinaryData){2, (uint8_t *)"hi"};
    m.n_sint_bytes = 1, m.sint_bytes = sint_bytes;
    pbjt_encodes(&m.base,
                 "{\"strInt\":{\"B\":3,\"a\":2,\"b\":4},"
                 "\"intStr\":{\"-1\":\"minus one\",\"2\":\"two\",\"10\":\"ten\"},"
                 "\"uintMsg\":{\"7\":{\"a\":0,\"bValue\":\"\",\"child\":null,\"children\":[]}},"
                 "\"boolEnum\":{\"false\":\"COLOR_GREEN\",\"true\":\"COLOR_RED\"},"
                 "\"sintBytes\":{\"-4\":\"aGk=\"},\"strDouble\":{}}");
}

static void oneof_members(void **state)
{
    Pbjtest__Choice c = PBJTEST__CHOICE__INIT;
    Pbjtest__Inner in = PBJTEST__INNER__INIT;

    (void)state;
    /* Unset oneof members are omitted even with EmitUnpopulated. */
    pbjt_encodes(&c.base, "{\"name\":\"\",\"after\":0}");
    /* protoc-c lays oneof members out after the other fields: the one
     * ordering difference from protojson (see pbjson.h). */
    c.pick_case = PBJTEST__CHOICE__PICK_P_STRING;
    c.p_string = (char *)"";
    pbjt_encodes(&c.base, "{\"name\":\"\",\"after\":0,\"pString\":\"\"}");
    c.pick_case = PBJTEST__CHOICE__PICK_P_INT64;
    c.p_int64 = 0;
    pbjt_encodes(&c.base, "{\"name\":\"\",\"after\":0,\"pInt64\":\"0\"}");
    c.pick_case = PBJTEST__CHOICE__PICK_P_MESSAGE;
    c.p_message = &in;
    pbjt_encodes(&c.base, "{\"name\":\"\",\"after\":0,\"pMessage\":{\"a\":0,\"bValue\":\"\","
                          "\"child\":null,\"children\":[]}}");
    c.p_message = NULL; /* case set, no message: nothing to write */
    pbjt_encodes(&c.base, "{\"name\":\"\",\"after\":0}");
    c.pick_case = PBJTEST__CHOICE__PICK_P_ENUM;
    c.p_enum = PBJTEST__COLOR__COLOR_UNSPECIFIED;
    pbjt_encodes(&c.base, "{\"name\":\"\",\"after\":0,\"pEnum\":\"COLOR_UNSPECIFIED\"}");
}

static void declaration_order(void **state)
{
    Pbjtest__Order o = PBJTEST__ORDER__INIT;

    (void)state;
    o.zeta = (char *)"z";
    o.alpha = 1;
    pbjt_encodes(&o.base, "{\"zeta\":\"z\",\"alpha\":1,\"mid\":false}");
}

static void proto2_presence(void **state)
{
    Pbjtest2__Legacy l = PBJTEST2__LEGACY__INIT;
    uint8_t blob[] = {1};

    (void)state;
    /* Unset optional fields are null, whatever their default. */
    pbjt_encodes(&l.base, "{\"id\":0,\"count\":null,\"label\":null,\"note\":null,\"blob\":null,"
                          "\"next\":null,\"level\":null,\"ratio\":null,\"tags\":[]}");
    l.has_count = 1;
    l.label = (char *)"x";
    l.note = (char *)"";
    l.has_blob = 1;
    l.blob = (ProtobufCBinaryData){1, blob};
    l.has_level = 1;
    l.level = PBJTEST2__LEVEL__HIGH;
    l.has_ratio = 1;
    pbjt_encodes(&l.base, "{\"id\":0,\"count\":7,\"label\":\"x\",\"note\":\"\",\"blob\":\"AQ==\","
                          "\"next\":null,\"level\":\"HIGH\",\"ratio\":0,\"tags\":[]}");
    /* A proto2 enum's zero is not a value name: it is written as 0. */
    l.level = 0;
    pbjt_encodes(&l.base, "{\"id\":0,\"count\":7,\"label\":\"x\",\"note\":\"\",\"blob\":\"AQ==\","
                          "\"next\":null,\"level\":0,\"ratio\":0,\"tags\":[]}");
}

static void missing_required_message(void **state)
{
    Pbjtest2__Holder h = PBJTEST2__HOLDER__INIT;
    char errbuf[SVC_ERRBUF_LEN], *out = NULL;
    size_t len;

    (void)state;
    assert_int_equal(pbj_encode(&h.base, NULL, &out, &len, errbuf), SVC_EINVAL);
    assert_null(out);
    assert_string_equal(errbuf, "required field pbjtest2.Holder.item not set");
}

static void nesting_limit_and_cycles(void **state)
{
    Pbjtest__Inner chain[PBJ_MAX_DEPTH + 1];
    char errbuf[SVC_ERRBUF_LEN], *out = NULL;
    size_t len;

    (void)state;
    for (size_t i = 0; i <= PBJ_MAX_DEPTH; i++) {
        pbjtest__inner__init(&chain[i]);
        chain[i].child = i < PBJ_MAX_DEPTH ? &chain[i + 1] : NULL;
    }
    /* PBJ_MAX_DEPTH messages deep is fine, one more is not. */
    assert_int_equal(pbj_encode(&chain[1].base, NULL, &out, &len, errbuf), SVC_OK);
    pbj_free(NULL, out);
    out = NULL;
    assert_int_equal(pbj_encode(&chain[0].base, NULL, &out, &len, errbuf), SVC_EINVAL);
    assert_string_equal(errbuf, "message nesting exceeds 64 levels");
    /* A message that contains itself stops at the same limit. */
    chain[0].child = &chain[0];
    assert_int_equal(pbj_encode(&chain[0].base, NULL, &out, &len, errbuf), SVC_EINVAL);
    assert_null(out);
}

static void output_cap(void **state)
{
    Shopmicro__Catalog__V1__Product p = SHOPMICRO__CATALOG__V1__PRODUCT__INIT;
    char errbuf[SVC_ERRBUF_LEN], want[64], *out = NULL;
    size_t len, full;

    (void)state;
    assert_int_equal(pbj__encode_max(&p.base, NULL, 1000, &out, &len, errbuf), SVC_OK);
    full = len;
    pbj_free(NULL, out);
    out = NULL;
    assert_int_equal(pbj__encode_max(&p.base, NULL, full, &out, &len, errbuf), SVC_OK);
    pbj_free(NULL, out);
    out = NULL;
    assert_int_equal(pbj__encode_max(&p.base, NULL, full - 1, &out, &len, errbuf), SVC_EEXHAUSTED);
    assert_null(out);
    snprintf(want, sizeof(want), "encoded JSON exceeds %zu bytes", full - 1);
    assert_string_equal(errbuf, want);
}

typedef struct {
    const ProtobufCMessage *m;
} encode_job_t;

static svc_err_t encode_op(ProtobufCAllocator *a, void *ctx)
{
    encode_job_t *job = ctx;
    char *out = NULL;
    size_t len;
    svc_err_t err = pbj_encode(job->m, a, &out, &len, SVC_ERRBUF_SCRATCH);

    pbj_free(a, out);
    return err;
}

static void out_of_memory_at_every_step(void **state)
{
    Pbjtest__Maps m = PBJTEST__MAPS__INIT;
    Pbjtest__Maps__UintMsgEntry u1 = PBJTEST__MAPS__UINT_MSG_ENTRY__INIT, u2 = u1;
    Pbjtest__Maps__UintMsgEntry *uint_msg[] = {&u1, &u2};
    encode_job_t job = {&m.base};

    (void)state;
    u1.key = 2;
    u2.key = 1;
    m.n_uint_msg = 2;
    m.uint_msg = uint_msg;
    /* Buffer, map ordering and two default map values: several steps. */
    assert_true(pbjt_torture(encode_op, &job) >= 4);
}

static void bad_arguments(void **state)
{
    Shopmicro__Catalog__V1__Product p = SHOPMICRO__CATALOG__V1__PRODUCT__INIT;
    char *out = NULL;
    size_t len;

    (void)state;
    assert_int_equal(pbj_encode(NULL, NULL, &out, &len, SVC_ERRBUF_SCRATCH), SVC_EINVAL);
    assert_int_equal(pbj_encode(&p.base, NULL, NULL, &len, SVC_ERRBUF_SCRATCH), SVC_EINVAL);
    p.base.descriptor = NULL;
    assert_int_equal(pbj_encode(&p.base, NULL, &out, &len, SVC_ERRBUF_SCRATCH), SVC_EINVAL);
    assert_null(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_order_response),
        cmocka_unit_test(empty_list_products_response),
        cmocka_unit_test(product),
        cmocka_unit_test(list_with_products),
        cmocka_unit_test(order_with_items),
        cmocka_unit_test(scalars_unpopulated),
        cmocka_unit_test(scalars_extremes),
        cmocka_unit_test(unknown_enum_number_is_a_number),
        cmocka_unit_test(string_escaping),
        cmocka_unit_test(invalid_utf8_is_refused),
        cmocka_unit_test(bytes_base64),
        cmocka_unit_test(floats),
        cmocka_unit_test(repeated_fields),
        cmocka_unit_test(null_repeated_message_is_refused),
        cmocka_unit_test(maps_sorted_and_last_wins),
        cmocka_unit_test(oneof_members),
        cmocka_unit_test(declaration_order),
        cmocka_unit_test(proto2_presence),
        cmocka_unit_test(missing_required_message),
        cmocka_unit_test(nesting_limit_and_cycles),
        cmocka_unit_test(output_cap),
        cmocka_unit_test(out_of_memory_at_every_step),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests_name("pbj_encode", tests, NULL, NULL);
}
