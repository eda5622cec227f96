/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbj_decode: every input rule of protojson with DiscardUnknown, both the
 * accepting and the rejecting side, plus limits and allocation failures.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "legacy.pb-c.h"
#include "pbj_test.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "shopmicro/order/v1/order.pb-c.h"
#include "types.pb-c.h"

#define CREATE_PRODUCT (&shopmicro__catalog__v1__create_product_request__descriptor)
#define LIST_PRODUCTS  (&shopmicro__catalog__v1__list_products_response__descriptor)
#define CREATE_ORDER   (&shopmicro__order__v1__create_order_request__descriptor)
#define ORDER_RESPONSE (&shopmicro__order__v1__create_order_response__descriptor)
#define SCALARS        (&pbjtest__scalars__descriptor)
#define REPEATED       (&pbjtest__repeated__descriptor)
#define MAPS           (&pbjtest__maps__descriptor)
#define CHOICE         (&pbjtest__choice__descriptor)
#define INNER          (&pbjtest__inner__descriptor)
#define LEGACY         (&pbjtest2__legacy__descriptor)

typedef Shopmicro__Catalog__V1__CreateProductRequest create_product_t;

static Pbjtest__Scalars *scalars(const char *json)
{
    return (Pbjtest__Scalars *)pbjt_decode(SCALARS, json);
}

static void free_msg(void *m)
{
    pbj_message_free(m, NULL);
}

static void create_product_snake_and_camel(void **state)
{
    static const char *const inputs[] = {
        "{\"name\":\"Mug\",\"description\":\"Blue\",\"price_cents\":1299,\"stock\":10}",
        "{\"name\":\"Mug\",\"description\":\"Blue\",\"priceCents\":\"1299\",\"stock\":\"10\"}",
        " \n\t{ \"stock\" : 10 ,\"priceCents\":1.299e3,\"description\":\"Blue\",\"name\":\"Mug\"}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        create_product_t *p = (create_product_t *)pbjt_decode(CREATE_PRODUCT, inputs[i]);
        assert_string_equal(p->name, "Mug");
        assert_string_equal(p->description, "Blue");
        assert_int_equal(p->price_cents, 1299);
        assert_int_equal(p->stock, 10);
        free_msg(p);
    }
}

static void create_order_request(void **state)
{
    static const char *const inputs[] = {
        "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"p1\",\"quantity\":2}]}",
        "{\"customerId\":\"c1\",\"items\":[{\"productId\":\"p1\",\"quantity\":2}]}",
        "{\"customerId\":\"c1\",\"items\":[{\"productId\":\"p1\",\"quantity\":\"2\"}]}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        Shopmicro__Order__V1__CreateOrderRequest *r =
            (Shopmicro__Order__V1__CreateOrderRequest *)pbjt_decode(CREATE_ORDER, inputs[i]);
        assert_string_equal(r->customer_id, "c1");
        assert_int_equal(r->n_items, 1);
        assert_string_equal(r->items[0]->product_id, "p1");
        assert_int_equal(r->items[0]->quantity, 2);
        assert_int_equal(r->items[0]->unit_price_cents, 0);
        free_msg(r);
    }
}

static void integers_accepted(void **state)
{
    static const struct {
        const char *json;
        int32_t i32;
        int64_t i64;
    } cases[] = {
        {"{\"fInt32\":1e2,\"fInt64\":\"1e2\"}", 100, 100},
        {"{\"fInt32\":1.0,\"fInt64\":1.000}", 1, 1},
        {"{\"fInt32\":100e-2,\"fInt64\":\"0.5e1\"}", 1, 5},
        {"{\"fInt32\":-0,\"fInt64\":0.0e7}", 0, 0},
        {"{\"fInt32\":-2147483648,\"fInt64\":\"-9223372036854775808\"}", INT32_MIN, INT64_MIN},
        {"{\"fInt32\":2147483647,\"fInt64\":9223372036854775807}", INT32_MAX, INT64_MAX},
        {"{\"fInt32\":\"-5\",\"fInt64\":\"9007199254740993\"}", -5, 9007199254740993ll},
        {"{\"fInt32\":0e999999999999,\"fInt64\":12.5e1}", 0, 125},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Pbjtest__Scalars *s = scalars(cases[i].json);
        assert_int_equal(s->f_int32, cases[i].i32);
        assert_true(s->f_int64 == cases[i].i64);
        free_msg(s);
    }
}

static void integers_rejected(void **state)
{
    (void)state;
    pbjt_rejects(CREATE_PRODUCT, "{\"price_cents\":\"abc\"}",
                 "=(line 1:16): invalid value for int64 field priceCents: \"abc\"");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":1.5}",
                 "=(line 1:10): invalid value for int32 field stock: 1.5");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":\" 2\"}",
                 "invalid value for int32 field stock: \" 2\"");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":\"2 \"}", "invalid value for int32 field stock");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":\"\"}", "invalid value for int32 field stock: \"\"");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":\"0x10\"}", "invalid value for int32 field stock");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":\"+1\"}", "invalid value for int32 field stock");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":2147483648}", "invalid value for int32 field stock");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":-2147483649}", "invalid value for int32 field stock");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":1e-2}", "invalid value for int32 field stock");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":1e10}", "invalid value for int32 field stock");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":true}", "invalid value for int32 field stock: true");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":{}}", "invalid value for int32 field stock: {");
    pbjt_rejects(CREATE_PRODUCT, "{\"stock\":[1]}", "invalid value for int32 field stock: [");
    pbjt_rejects(CREATE_PRODUCT, "{\"priceCents\":9223372036854775808}", "field priceCents");
    pbjt_rejects(CREATE_PRODUCT, "{\"priceCents\":1e19}", "field priceCents");
    pbjt_rejects(CREATE_PRODUCT, "{\"priceCents\":1e400}", "field priceCents");
    pbjt_rejects(SCALARS, "{\"fUint64\":-1}", "invalid value for uint64 field fUint64: -1");
    pbjt_rejects(SCALARS, "{\"fUint32\":4294967296}", "invalid value for uint32 field fUint32");
    pbjt_rejects(SCALARS, "{\"fUint64\":18446744073709551616}", "field fUint64");
    pbjt_rejects(SCALARS, "{\"fFixed32\":-1}", "invalid value for fixed32 field fFixed32");
    pbjt_rejects(SCALARS, "{\"fSfixed64\":\"1.5\"}", "invalid value for sfixed64 field fSfixed64");
    /* An excerpt, not the whole value, goes into the message. */
    pbjt_rejects(
        CREATE_PRODUCT,
        "{\"stock\":\"0123456789012345678901234567890123456789012345678901234567890123456789\"}",
        "stock: \"012345678901234567890123456789012345678901234567890123456789012...");
}

static void unsigned_types_accepted(void **state)
{
    Pbjtest__Scalars *s = scalars("{\"fUint32\":4294967295,\"fUint64\":18446744073709551615,"
                                  "\"fSint32\":-1,\"fSint64\":\"-2\",\"fFixed32\":\"3\","
                                  "\"fFixed64\":\"18446744073709551615\",\"fSfixed32\":-4,"
                                  "\"fSfixed64\":-5e0}");

    (void)state;
    assert_true(s->f_uint32 == UINT32_MAX);
    assert_true(s->f_uint64 == UINT64_MAX);
    assert_int_equal(s->f_sint32, -1);
    assert_true(s->f_sint64 == -2);
    assert_int_equal(s->f_fixed32, 3);
    assert_true(s->f_fixed64 == UINT64_MAX);
    assert_int_equal(s->f_sfixed32, -4);
    assert_true(s->f_sfixed64 == -5);
    free_msg(s);
    s = scalars("{\"fUint64\":-0,\"fUint32\":\"-0.0\"}");
    assert_true(s->f_uint64 == 0 && s->f_uint32 == 0);
    free_msg(s);
}

static void strings_and_bools(void **state)
{
    Pbjtest__Scalars *s;

    (void)state;
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":123}",
                 "=(line 1:9): invalid value for string field name: 123");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":true}", "invalid value for string field name: true");
    pbjt_rejects(SCALARS, "{\"fBool\":\"true\"}", "invalid value for bool field fBool: \"true\"");
    pbjt_rejects(SCALARS, "{\"fBool\":1}", "invalid value for bool field fBool: 1");
    s = scalars(
        "{\"fBool\":true,\"fString\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u20ac\"}");
    assert_true(s->f_bool);
    assert_string_equal(s->f_string, "\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac");
    free_msg(s);
    s = scalars("{\"fBool\":false,\"fString\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}");
    assert_false(s->f_bool);
    assert_string_equal(s->f_string, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    free_msg(s);
}

static void utf8_and_escapes_rejected(void **state)
{
    (void)state;
    pbjt_rejects(SCALARS, "{\"fString\":\"\xff\"}",
                 "=syntax error (line 1:13): invalid UTF-8 in string");
    pbjt_rejects(SCALARS, "{\"fString\":\"\xc0\xaf\"}", "invalid UTF-8 in string");
    pbjt_rejects(SCALARS, "{\"fString\":\"\xed\xa0\x80\"}", "invalid UTF-8 in string");
    pbjt_rejects(SCALARS, "{\"fString\":\"\\ud800\"}", "invalid escape code");
    pbjt_rejects(SCALARS, "{\"fString\":\"\\ud800", "=unexpected EOF");
    pbjt_rejects(SCALARS, "{\"fString\":\"\\ud800\\u0041\"}", "invalid escape code");
    pbjt_rejects(SCALARS, "{\"fString\":\"\\udc00\\udc00\"}", "invalid escape code");
    pbjt_rejects(SCALARS, "{\"fString\":\"\\u12G4\"}", "invalid escape code");
    pbjt_rejects(SCALARS, "{\"fString\":\"\\x\"}", "invalid escape code \"\\x\" in string");
    pbjt_rejects(SCALARS, "{\"fString\":\"a\tb\"}", "invalid character U+0009 in string");
    pbjt_rejects(SCALARS, "{\"fString\":\"\\u0000\"}",
                 "string field fString contains U+0000, which protobuf-c cannot store");
    /* Invalid UTF-8 is refused in keys and in skipped values too. */
    pbjt_rejects(SCALARS, "{\"\xff\":1}", "invalid UTF-8 in string");
    pbjt_rejects(SCALARS, "{\"unknown\":[\"\xff\"]}", "invalid UTF-8 in string");
}

static void floats_accepted_and_rejected(void **state)
{
    Pbjtest__Scalars *s;

    (void)state;
    s = scalars("{\"fDouble\":\"NaN\",\"fFloat\":\"-Infinity\"}");
    assert_true(isnan(s->f_double));
    assert_true(isinf(s->f_float) && s->f_float < 0);
    free_msg(s);
    s = scalars("{\"fDouble\":\"1.5\",\"fFloat\":3.4028235e38}");
    assert_true(s->f_double == 1.5);
    assert_true(s->f_float == 3.4028235e38f);
    free_msg(s);
    s = scalars("{\"fDouble\":1e-400,\"fFloat\":-0.0}");
    assert_true(s->f_double == 0);
    assert_true(s->f_float == 0 && signbit(s->f_float));
    free_msg(s);
    s = scalars("{\"fDouble\":\"Infinity\",\"fFloat\":1}");
    assert_true(isinf(s->f_double) && s->f_double > 0);
    assert_true(s->f_float == 1);
    free_msg(s);
    pbjt_rejects(SCALARS, "{\"fDouble\":1e400}", "invalid value for double field fDouble: 1e400");
    pbjt_rejects(SCALARS, "{\"fFloat\":3.5e38}", "invalid value for float field fFloat: 3.5e38");
    pbjt_rejects(SCALARS, "{\"fDouble\":\"nan\"}", "invalid value for double field fDouble");
    pbjt_rejects(SCALARS, "{\"fDouble\":\"inf\"}", "invalid value for double field fDouble");
    pbjt_rejects(SCALARS, "{\"fDouble\":\" 1\"}", "invalid value for double field fDouble");
    pbjt_rejects(SCALARS, "{\"fDouble\":true}", "invalid value for double field fDouble");
}

static void bytes_accepted_and_rejected(void **state)
{
    static const struct {
        const char *b64;
        const char *raw;
        size_t len;
    } ok[] = {
        {"", "", 0},
        {"Zm9v", "foo", 3},
        {"Zm9vYg==", "foob", 4},
        {"Zm9vYg", "foob", 4},
        {"+/8=", "\xfb\xff", 2},
        {"-_8", "\xfb\xff", 2},
        {"-_8=", "\xfb\xff", 2},
        {"Zm9v\\nYg", "foob", 4},
        {"Zm9\\r\\nv", "foo", 3},
        {"QR==", "A", 1}, /* Go's decoder ignores the unused bits */
    };
    /* protojson picks the unpadded decoder when the length (newlines
     * included) is not a multiple of 4, so "Zm9v\\nYg==" is refused. */
    static const char *const bad[] = {
        "Zm9vY", "Zm9vYg=", "Zm9vYg==\\n", "Zm9v\\nYg==", "Zm9v!", "Zg==Zg==", "====", "Z==="};
    char json[96];

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        Pbjtest__Scalars *s;
        snprintf(json, sizeof(json), "{\"fBytes\":\"%s\"}", ok[i].b64);
        s = scalars(json);
        assert_int_equal(s->f_bytes.len, ok[i].len);
        if (ok[i].len > 0)
            assert_memory_equal(s->f_bytes.data, ok[i].raw, ok[i].len);
        free_msg(s);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(json, sizeof(json), "{\"fBytes\":\"%s\"}", bad[i]);
        pbjt_rejects(SCALARS, json, "invalid value for bytes field fBytes");
    }
    pbjt_rejects(SCALARS, "{\"fBytes\":12}", "invalid value for bytes field fBytes: 12");
}

static void enums(void **state)
{
    Shopmicro__Order__V1__CreateOrderResponse *r;
    Pbjtest__Repeated *rep;

    (void)state;
    r = (void *)pbjt_decode(ORDER_RESPONSE, "{\"status\":\"ORDER_STATUS_CONFIRMED\"}");
    assert_int_equal(r->status, SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_CONFIRMED);
    free_msg(r);
    r = (void *)pbjt_decode(ORDER_RESPONSE, "{\"status\":3}");
    assert_int_equal(r->status, 3);
    free_msg(r);
    /* Open enums keep numbers they do not know. */
    r = (void *)pbjt_decode(ORDER_RESPONSE, "{\"status\":-77}");
    assert_int_equal((int)r->status, -77);
    free_msg(r);
    /* Unknown names are discarded; a numeric string is a (wrong) name. */
    r = (void *)pbjt_decode(ORDER_RESPONSE, "{\"status\":\"BOGUS\",\"id\":\"x\"}");
    assert_int_equal(r->status, 0);
    assert_string_equal(r->id, "x");
    free_msg(r);
    r = (void *)pbjt_decode(ORDER_RESPONSE, "{\"status\":\"2\"}");
    assert_int_equal(r->status, 0);
    free_msg(r);
    rep = (void *)pbjt_decode(REPEATED, "{\"rEnum\":[\"COLOR_RED\",\"NOPE\",2,\"COLOR_GREEN\"]}");
    assert_int_equal(rep->n_r_enum, 3);
    assert_int_equal(rep->r_enum[0], PBJTEST__COLOR__COLOR_RED);
    assert_int_equal(rep->r_enum[1], 2);
    assert_int_equal(rep->r_enum[2], PBJTEST__COLOR__COLOR_GREEN);
    free_msg(rep);
    pbjt_rejects(ORDER_RESPONSE, "{\"status\":1.5}", "invalid value for enum field status: 1.5");
    pbjt_rejects(ORDER_RESPONSE, "{\"status\":2147483648}", "invalid value for enum field status");
    pbjt_rejects(ORDER_RESPONSE, "{\"status\":true}", "invalid value for enum field status: true");
}

static void nulls(void **state)
{
    Pbjtest__Scalars *s;
    Shopmicro__Catalog__V1__ListProductsResponse *l;

    (void)state;
    s = scalars(
        "{\"fInt32\":null,\"fString\":null,\"fMessage\":null,\"fEnum\":null,\"fBytes\":null}");
    assert_int_equal(s->f_int32, 0);
    assert_string_equal(s->f_string, "");
    assert_null(s->f_message);
    free_msg(s);
    l = (void *)pbjt_decode(LIST_PRODUCTS, "{\"products\":null,\"nextPageToken\":null}");
    assert_int_equal(l->n_products, 0);
    free_msg(l);
    pbjt_rejects(LIST_PRODUCTS, "{\"products\":[null]}",
                 "=syntax error (line 1:14): unexpected token null");
    pbjt_rejects(REPEATED, "{\"rInt32\":[1,null]}", "invalid value for int32 field rInt32: null");
    pbjt_rejects(REPEATED, "{\"rString\":[null]}", "invalid value for string field rString: null");
}

static void messages_and_lists(void **state)
{
    Pbjtest__Scalars *s;
    Pbjtest__Repeated *r;

    (void)state;
    s = scalars(
        "{\"fMessage\":{\"a\":1,\"child\":{\"bValue\":\"x\"},\"children\":[{},{\"a\":2}]}}");
    assert_int_equal(s->f_message->a, 1);
    assert_string_equal(s->f_message->child->b_value, "x");
    assert_int_equal(s->f_message->n_children, 2);
    assert_int_equal(s->f_message->children[1]->a, 2);
    free_msg(s);
    s = scalars("{\"fMessage\":{}}");
    assert_non_null(s->f_message);
    free_msg(s);
    r = (void *)pbjt_decode(REPEATED,
                            "{\"rInt32\":[],\"rString\":[\"\",\"a\"],\"rBytes\":[\"\",\"AQ==\"],"
                            "\"rDouble\":[1,\"NaN\"],\"rBool\":[true],\"rUint64\":[\"1\",2]}");
    assert_int_equal(r->n_r_int32, 0);
    assert_int_equal(r->n_r_string, 2);
    assert_string_equal(r->r_string[0], "");
    assert_string_equal(r->r_string[1], "a");
    assert_int_equal(r->r_bytes[1].len, 1);
    assert_true(isnan(r->r_double[1]));
    assert_true(r->r_uint64[1] == 2);
    free_msg(r);
    pbjt_rejects(REPEATED, "{\"rInt32\":5}", "=syntax error (line 1:11): unexpected token 5");
    pbjt_rejects(REPEATED, "{\"rMessage\":{}}", "unexpected token {");
    pbjt_rejects(SCALARS, "{\"fMessage\":5}", "unexpected token 5");
    pbjt_rejects(SCALARS, "{\"fMessage\":[]}", "unexpected token [");
}

static void many_elements(void **state)
{
    size_t n = 20000, o = 0;
    char *json = malloc(n * 2 + 32);
    Pbjtest__Repeated *r;

    (void)state;
    o += (size_t)sprintf(json, "{\"rInt32\":[");
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(json + o, "%s%zu", i > 0 ? "," : "", i % 10);
    strcpy(json + o, "]}");
    r = (void *)pbjt_decode(REPEATED, json);
    assert_int_equal(r->n_r_int32, n);
    assert_int_equal(r->r_int32[n - 1], (n - 1) % 10);
    free_msg(r);
    free(json);
}

static void unknown_fields_ignored(void **state)
{
    create_product_t *p;

    (void)state;
    p = (void *)pbjt_decode(CREATE_PRODUCT,
                            "{\"colour\":\"red\",\"name\":\"x\",\"extra\":{\"a\":[1,"
                            "{\"b\":null},true,false,-1.5e3,\"\\u00e9\"]},"
                            "\"Name\":5,\"NAME\":{},\"price-cents\":\"junk\"}");
    assert_string_equal(p->name, "x");
    assert_int_equal(p->price_cents, 0);
    free_msg(p);
    /* Unknown values must still be valid JSON. */
    pbjt_rejects(CREATE_PRODUCT, "{\"colour\":[1,]}", "unexpected character ]");
    pbjt_rejects(CREATE_PRODUCT, "{\"colour\":tru}", "invalid value tru");
    pbjt_rejects(CREATE_PRODUCT, "{\"colour\":01}", "invalid number 01");
    pbjt_rejects(CREATE_PRODUCT, "{\"colour\":{\"a\"}}", "missing \":\" after object name");
}

static void duplicates(void **state)
{
    (void)state;
    pbjt_rejects(CREATE_PRODUCT, "{\"price_cents\":1,\"priceCents\":2}",
                 "=(line 1:18): duplicate field \"priceCents\"");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":\"a\",\"name\":\"b\"}", "duplicate field \"name\"");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":null,\"name\":\"b\"}", "duplicate field \"name\"");
    pbjt_rejects(LIST_PRODUCTS, "{\"products\":[],\"products\":[]}",
                 "duplicate field \"products\"");
    pbjt_rejects(CREATE_PRODUCT, "{\"na\\u006de\":\"a\",\"name\":\"b\"}",
                 "duplicate field \"name\"");
    /* The same unknown key twice is not checked (protojson skips it). */
    free_msg(pbjt_decode(CREATE_PRODUCT, "{\"x\":1,\"x\":2}"));
}

static void top_level_must_be_an_object(void **state)
{
    (void)state;
    pbjt_rejects(CREATE_PRODUCT, "[]", "=syntax error (line 1:1): unexpected token [");
    pbjt_rejects(CREATE_PRODUCT, "\"x\"", "=syntax error (line 1:1): unexpected token \"x\"");
    pbjt_rejects(CREATE_PRODUCT, "123", "=syntax error (line 1:1): unexpected token 123");
    pbjt_rejects(CREATE_PRODUCT, "null", "=syntax error (line 1:1): unexpected token null");
    pbjt_rejects(CREATE_PRODUCT, "  true", "=syntax error (line 1:3): unexpected token true");
    pbjt_rejects(CREATE_PRODUCT, "{bad", "=syntax error (line 1:2): invalid value bad");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":", "=unexpected EOF");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":\"x\"", "=unexpected EOF");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":\"x", "=unexpected EOF");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\"", "=unexpected EOF");
    pbjt_rejects(CREATE_PRODUCT, "{", "=unexpected EOF");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":\"x\",}", "unexpected character }");
    pbjt_rejects(CREATE_PRODUCT, "{\"name\":\"x\" \"stock\":1}", "unexpected character \"");
    pbjt_rejects(CREATE_PRODUCT, "{,}", "unexpected character ,");
    pbjt_rejects(CREATE_PRODUCT, "\xef\xbb\xbf{}", "invalid value");
    pbjt_rejects(CREATE_PRODUCT, "", "=empty input");
    pbjt_rejects(CREATE_PRODUCT, " \r\n\t", "=empty input");
}

static void positions_count_lines_and_characters(void **state)
{
    (void)state;
    pbjt_rejects(CREATE_PRODUCT, "{\n  \"name\": \"x\",\n  \"stock\": \"many\"\n}",
                 "=(line 3:12): invalid value for int32 field stock: \"many\"");
    /* Columns count characters: "é" is one. */
    pbjt_rejects(CREATE_PRODUCT, "{\"description\":\"\xc3\xa9\",\"stock\":x}",
                 "=syntax error (line 1:28): invalid value x");
}

static void empty_input_with_flag(void **state)
{
    static const char *const inputs[] = {"", "  \n"};
    ProtobufCMessage *m = NULL;

    (void)state;
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(pbj_decode(CREATE_PRODUCT, inputs[i], strlen(inputs[i]),
                                    PBJ_DECODE_ALLOW_EMPTY, NULL, &m, SVC_ERRBUF_SCRATCH),
                         SVC_OK);
        pbjt_encodes(m, "{\"name\":\"\",\"description\":\"\",\"priceCents\":\"0\",\"stock\":0}");
        free_msg(m);
    }
    assert_int_equal(
        pbj_decode(CREATE_PRODUCT, NULL, 0, PBJ_DECODE_ALLOW_EMPTY, NULL, &m, SVC_ERRBUF_SCRATCH),
        SVC_OK);
    free_msg(m);
}

static void data_after_the_value_is_ignored(void **state)
{
    create_product_t *p;

    (void)state;
    p = (void *)pbjt_decode(CREATE_PRODUCT, "{\"name\":\"x\"} trailing {garbage");
    assert_string_equal(p->name, "x");
    free_msg(p);
    free_msg(pbjt_decode(CREATE_PRODUCT, "{}}"));
}

static void input_need_not_be_nul_terminated(void **state)
{
    const char json[] = {'{', '"', 'n', 'a', 'm', 'e', '"', ':', '"', 'x', '"', '}'};
    const char num[] = {'{', '"', 's', 't', 'o', 'c', 'k', '"', ':', '1', '2'};
    ProtobufCMessage *m = NULL;

    (void)state;
    assert_int_equal(
        pbj_decode(CREATE_PRODUCT, json, sizeof(json), 0, NULL, &m, SVC_ERRBUF_SCRATCH), SVC_OK);
    free_msg(m);
    m = NULL;
    assert_int_equal(pbj_decode(CREATE_PRODUCT, num, sizeof(num), 0, NULL, &m, SVC_ERRBUF_SCRATCH),
                     SVC_EINVAL);
    assert_null(m);
}

/* "{"a":" + depth-1 "[" ... "]" + "}" is `depth` levels deep. */
static char *nested_arrays(size_t depth)
{
    char *s = malloc(2 * depth + 16), *p = s;

    p += sprintf(p, "{\"x\":");
    for (size_t i = 1; i < depth; i++)
        *p++ = '[';
    for (size_t i = 1; i < depth; i++)
        *p++ = ']';
    strcpy(p, "}");
    return s;
}

static void nesting_limit(void **state)
{
    char *ok = nested_arrays(PBJ_MAX_DEPTH), *deep = nested_arrays(PBJ_MAX_DEPTH + 1);
    char *huge = nested_arrays(100000);
    char inner[4096], *p = inner;

    (void)state;
    free_msg(pbjt_decode(CREATE_PRODUCT, ok));
    pbjt_rejects(CREATE_PRODUCT, deep, "exceeded max nesting depth 64");
    pbjt_rejects(CREATE_PRODUCT, huge, "exceeded max nesting depth 64");
    /* Message nesting counts the same way. */
    for (size_t i = 0; i < PBJ_MAX_DEPTH; i++)
        p += sprintf(p, "{\"child\":");
    p += sprintf(p, "{}");
    for (size_t i = 0; i < PBJ_MAX_DEPTH; i++)
        *p++ = '}';
    *p = '\0';
    pbjt_rejects(INNER, inner, "exceeded max nesting depth 64");
    free(ok);
    free(deep);
    free(huge);
}

static void maps(void **state)
{
    Pbjtest__Maps *m;

    (void)state;
    m = (void *)pbjt_decode(MAPS,
                            "{\"strInt\":{\"b\":1,\"a\":\"2\",\"\":3},\"int_str\":{\"-5\":\"x\","
                            "\"+6\":\"y\",\"007\":\"z\"},\"uintMsg\":{\"1\":{\"a\":4},\"2\":{}},"
                            "\"boolEnum\":{\"true\":\"COLOR_RED\",\"false\":\"NOPE\"},"
                            "\"sintBytes\":{\"-1\":\"AQ==\"},\"strDouble\":{\"x\":\"NaN\"}}");
    assert_int_equal(m->n_str_int, 3);
    assert_string_equal(m->str_int[1]->key, "a");
    assert_int_equal(m->str_int[1]->value, 2);
    assert_int_equal(m->n_int_str, 3);
    assert_true(m->int_str[0]->key == -5);
    assert_true(m->int_str[1]->key == 6);
    assert_true(m->int_str[2]->key == 7);
    assert_int_equal(m->n_uint_msg, 2);
    assert_int_equal(m->uint_msg[0]->value->a, 4);
    assert_non_null(m->uint_msg[1]->value);
    /* An unknown enum name drops the entry. */
    assert_int_equal(m->n_bool_enum, 1);
    assert_true(m->bool_enum[0]->key);
    assert_int_equal(m->sint_bytes[0]->key, -1);
    free_msg(m);
    pbjt_rejects(MAPS, "{\"strInt\":{\"a\":1,\"b\":2,\"a\":3}}",
                 "=(line 1:24): duplicate map key \"a\"");
    pbjt_rejects(MAPS, "{\"intStr\":{\"1\":\"a\",\"01\":\"b\"}}", "duplicate map key \"01\"");
    pbjt_rejects(MAPS, "{\"intStr\":{\"x\":\"a\"}}",
                 "=(line 1:12): invalid value for int64 key: \"x\"");
    pbjt_rejects(MAPS, "{\"intStr\":{\" 1\":\"a\"}}", "invalid value for int64 key");
    pbjt_rejects(MAPS, "{\"uintMsg\":{\"-1\":{}}}", "invalid value for uint32 key: \"-1\"");
    pbjt_rejects(MAPS, "{\"boolEnum\":{\"True\":1}}", "invalid value for bool key: \"True\"");
    pbjt_rejects(MAPS, "{\"strInt\":{\"a\":null}}", "invalid value for int32 field value: null");
    pbjt_rejects(MAPS, "{\"uintMsg\":{\"1\":null}}", "unexpected token null");
    pbjt_rejects(MAPS, "{\"strInt\":[]}", "unexpected token [");
    pbjt_rejects(MAPS, "{\"strInt\":{\"a\\u0000\":1}}", "contains U+0000");
}

static void many_map_entries(void **state)
{
    size_t n = 5000, o = 0;
    char *json = malloc(n * 16 + 32);
    Pbjtest__Maps *m;

    (void)state;
    o += (size_t)sprintf(json, "{\"intStr\":{");
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(json + o, "%s\"%zu\":\"v\"", i > 0 ? "," : "", n - i);
    strcpy(json + o, "}}");
    m = (void *)pbjt_decode(MAPS, json);
    assert_int_equal(m->n_int_str, n);
    free_msg(m);
    /* A repeat at the very end is still found. */
    strcpy(json + o, ",\"17\":\"w\"}}");
    pbjt_rejects(MAPS, json, "duplicate map key \"17\"");
    free(json);
}

static void oneofs(void **state)
{
    Pbjtest__Choice *c;

    (void)state;
    c = (void *)pbjt_decode(CHOICE, "{\"pString\":\"\"}");
    assert_int_equal(c->pick_case, PBJTEST__CHOICE__PICK_P_STRING);
    /* An own allocation, so that protobuf-c packs the empty member too. */
    assert_ptr_not_equal(c->p_string, protobuf_c_empty_string);
    pbjt_encodes(&c->base, "{\"name\":\"\",\"after\":0,\"pString\":\"\"}");
    free_msg(c);
    c = (void *)pbjt_decode(CHOICE, "{\"pString\":null,\"p_int64\":\"5\"}");
    assert_int_equal(c->pick_case, PBJTEST__CHOICE__PICK_P_INT64);
    assert_true(c->p_int64 == 5);
    free_msg(c);
    c = (void *)pbjt_decode(CHOICE, "{\"pMessage\":{\"a\":1}}");
    assert_int_equal(c->p_message->a, 1);
    free_msg(c);
    c = (void *)pbjt_decode(CHOICE, "{\"pEnum\":\"NOPE\"}");
    assert_int_equal(c->pick_case, 0);
    free_msg(c);
    pbjt_rejects(
        CHOICE, "{\"pString\":\"a\",\"pInt64\":\"1\"}",
        "=(line 1:16): error parsing \"pInt64\", another field of its oneof is already set");
    pbjt_rejects(CHOICE, "{\"pMessage\":{},\"pEnum\":1}",
                 "another field of its oneof is already set");
}

static void proto2_required_and_optional(void **state)
{
    Pbjtest2__Legacy *l;

    (void)state;
    l = (void *)pbjt_decode(
        LEGACY, "{\"id\":1,\"count\":0,\"label\":\"hi\",\"blob\":\"\",\"level\":\"HIGH\","
                "\"tags\":[\"a\"],\"next\":{\"id\":2}}");
    assert_true(l->has_count && l->count == 0);
    assert_string_equal(l->label, "hi");
    assert_true(l->has_blob && l->blob.len == 0);
    assert_true(l->has_level && l->level == PBJTEST2__LEVEL__HIGH);
    assert_false(l->has_ratio);
    assert_null(l->note);
    assert_int_equal(l->next->id, 2);
    pbjt_encodes(&l->base, "{\"id\":1,\"count\":0,\"label\":\"hi\",\"note\":null,\"blob\":\"\","
                           "\"next\":{\"id\":2,\"count\":null,\"label\":null,\"note\":null,"
                           "\"blob\":null,\"next\":null,\"level\":null,\"ratio\":null,\"tags\":[]},"
                           "\"level\":\"HIGH\",\"ratio\":null,\"tags\":[\"a\"]}");
    free_msg(l);
    l = (void *)pbjt_decode(LEGACY, "{\"id\":1,\"count\":null}");
    assert_false(l->has_count);
    assert_int_equal(l->count, 7);
    free_msg(l);
    pbjt_rejects(LEGACY, "{}", "=required field pbjtest2.Legacy.id not set");
    pbjt_rejects(LEGACY, "{\"id\":null}", "=required field pbjtest2.Legacy.id not set");
    pbjt_rejects(LEGACY, "{\"id\":1,\"next\":{}}", "=required field pbjtest2.Legacy.id not set");
    pbjt_rejects(&pbjtest2__holder__descriptor, "{}",
                 "required field pbjtest2.Holder.item not set");
}

static void round_trips(void **state)
{
    (void)state;
    pbjt_round_trips(ORDER_RESPONSE,
                     "{\"id\":\"abc\",\"status\":\"ORDER_STATUS_PENDING\",\"totalCents\":\"2598\"}",
                     NULL);
    pbjt_round_trips(SCALARS,
                     "{\"fInt32\":-1,\"fInt64\":\"-9223372036854775808\",\"fUint32\":4294967295,"
                     "\"fUint64\":\"18446744073709551615\",\"fSint32\":-2,\"fSint64\":\"3\","
                     "\"fFixed32\":4,\"fFixed64\":\"5\",\"fSfixed32\":-6,\"fSfixed64\":\"-7\","
                     "\"fBool\":true,\"fString\":\"\\u0001\\\"\xc3\xa9\",\"fBytes\":\"AP8Q\","
                     "\"fDouble\":1e+21,\"fFloat\":0.1,\"fEnum\":\"COLOR_RED\","
                     "\"fMessage\":{\"a\":0,\"bValue\":\"\",\"child\":null,\"children\":[]}}",
                     NULL);
    pbjt_round_trips(
        SCALARS, "{\"fInt64\":1e3,\"fDouble\":\"-Infinity\",\"fFloat\":\"NaN\",\"fBytes\":\"-_8\"}",
        "{\"fInt32\":0,\"fInt64\":\"1000\",\"fUint32\":0,\"fUint64\":\"0\",\"fSint32\":0,"
        "\"fSint64\":\"0\",\"fFixed32\":0,\"fFixed64\":\"0\",\"fSfixed32\":0,"
        "\"fSfixed64\":\"0\",\"fBool\":false,\"fString\":\"\",\"fBytes\":\"+/8=\","
        "\"fDouble\":\"-Infinity\",\"fFloat\":\"NaN\",\"fEnum\":\"COLOR_UNSPECIFIED\","
        "\"fMessage\":null}");
    pbjt_round_trips(MAPS,
                     "{\"strInt\":{\"b\":1,\"a\":2},\"intStr\":{\"10\":\"\",\"9\":\"x\"},"
                     "\"uintMsg\":{},\"boolEnum\":{\"true\":1},\"sintBytes\":{},\"strDouble\":{}}",
                     "{\"strInt\":{\"a\":2,\"b\":1},\"intStr\":{\"9\":\"x\",\"10\":\"\"},"
                     "\"uintMsg\":{},\"boolEnum\":{\"true\":\"COLOR_RED\"},\"sintBytes\":{},"
                     "\"strDouble\":{}}");
}

typedef struct {
    const ProtobufCMessageDescriptor *d;
    const char *json;
} decode_job_t;

static svc_err_t decode_op(ProtobufCAllocator *a, void *ctx)
{
    decode_job_t *job = ctx;
    ProtobufCMessage *m = NULL;
    svc_err_t err = pbj_decode(job->d, job->json, strlen(job->json), 0, a, &m, SVC_ERRBUF_SCRATCH);

    pbj_message_free(m, a);
    return err;
}

static void out_of_memory_at_every_step(void **state)
{
    decode_job_t jobs[] = {
        {MAPS, "{\"strInt\":{\"b\":1,\"a\":2},\"intStr\":{\"1\":\"x\"},\"uintMsg\":{\"3\":{\"a\":1,"
               "\"children\":[{},{}]}},\"boolEnum\":{\"true\":\"NOPE\"}}"},
        {REPEATED, "{\"rString\":[\"a\",\"b\",\"c\",\"d\",\"e\"],\"rBytes\":[\"AQ==\"],"
                   "\"rMessage\":[{\"bValue\":\"x\"},{\"child\":{}}],\"rDouble\":[1e5]}"},
        {SCALARS, "{\"fString\":\"x\",\"fBytes\":\"AQ==\",\"fMessage\":{\"child\":{}},"
                  "\"fDouble\":1.00000000000000000000000000000000000000000000000000000000000000001,"
                  "\"\\u0066Int32\":1}"},
        {CHOICE, "{\"pMessage\":{\"a\":1}}"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++)
        assert_true(pbjt_torture(decode_op, &jobs[i]) >= 3);
}

static void bad_arguments(void **state)
{
    ProtobufCMessage *m = NULL;
    ProtobufCMessageDescriptor fake = pbjtest__inner__descriptor;

    (void)state;
    assert_int_equal(pbj_decode(NULL, "{}", 2, 0, NULL, &m, SVC_ERRBUF_SCRATCH), SVC_EINVAL);
    assert_int_equal(pbj_decode(INNER, "{}", 2, 0, NULL, NULL, SVC_ERRBUF_SCRATCH), SVC_EINVAL);
    assert_int_equal(pbj_decode(INNER, NULL, 2, 0, NULL, &m, SVC_ERRBUF_SCRATCH), SVC_EINVAL);
    fake.magic = 0;
    assert_int_equal(pbj_decode(&fake, "{}", 2, 0, NULL, &m, SVC_ERRBUF_SCRATCH), SVC_EINVAL);
    assert_int_equal(pbj_message_new(&fake, NULL, &m), SVC_EINVAL);
    assert_null(m);
    pbj_message_free(NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_product_snake_and_camel),
        cmocka_unit_test(create_order_request),
        cmocka_unit_test(integers_accepted),
        cmocka_unit_test(integers_rejected),
        cmocka_unit_test(unsigned_types_accepted),
        cmocka_unit_test(strings_and_bools),
        cmocka_unit_test(utf8_and_escapes_rejected),
        cmocka_unit_test(floats_accepted_and_rejected),
        cmocka_unit_test(bytes_accepted_and_rejected),
        cmocka_unit_test(enums),
        cmocka_unit_test(nulls),
        cmocka_unit_test(messages_and_lists),
        cmocka_unit_test(many_elements),
        cmocka_unit_test(unknown_fields_ignored),
        cmocka_unit_test(duplicates),
        cmocka_unit_test(top_level_must_be_an_object),
        cmocka_unit_test(positions_count_lines_and_characters),
        cmocka_unit_test(empty_input_with_flag),
        cmocka_unit_test(data_after_the_value_is_ignored),
        cmocka_unit_test(input_need_not_be_nul_terminated),
        cmocka_unit_test(nesting_limit),
        cmocka_unit_test(maps),
        cmocka_unit_test(many_map_entries),
        cmocka_unit_test(oneofs),
        cmocka_unit_test(proto2_required_and_optional),
        cmocka_unit_test(round_trips),
        cmocka_unit_test(out_of_memory_at_every_step),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests_name("pbj_decode", tests, NULL, NULL);
}
