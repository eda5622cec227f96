/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbj_set_query_param and pbj_set_path_param: grpc-gateway's query parser
 * and path-variable conversion, error texts included.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pbj_test.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "types.pb-c.h"

typedef struct fixture {
    pbjt_alloc_t a;
    ProtobufCMessage *m;
    char errbuf[SVC_ERRBUF_LEN];
} fixture_t;

static fixture_t *fx(void **state)
{
    return *state;
}

static int setup_with(void **state, const ProtobufCMessageDescriptor *d)
{
    fixture_t *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    pbjt_alloc_init(&f->a);
    if (pbj_message_new(d, &f->a.base, &f->m) != SVC_OK)
        return -1;
    *state = f;
    return 0;
}

static int setup_list(void **state)
{
    return setup_with(state, &shopmicro__catalog__v1__list_products_request__descriptor);
}

static int setup_scalars(void **state)
{
    return setup_with(state, &pbjtest__scalars__descriptor);
}

static int setup_repeated(void **state)
{
    return setup_with(state, &pbjtest__repeated__descriptor);
}

static int setup_maps(void **state)
{
    return setup_with(state, &pbjtest__maps__descriptor);
}

static int setup_choice(void **state)
{
    return setup_with(state, &pbjtest__choice__descriptor);
}

static int teardown(void **state)
{
    fixture_t *f = *state;

    pbj_message_free(f->m, &f->a.base);
    assert_int_equal(f->a.live, 0); /* nothing leaked, errors included */
    free(f);
    return 0;
}

static pbj_str_t S(const char *s)
{
    return (pbj_str_t){s, strlen(s)};
}

static svc_err_t query(fixture_t *f, const char *key, const char *v1, const char *v2)
{
    pbj_str_t values[2] = {S(v1), v2 != NULL ? S(v2) : S("")};

    f->errbuf[0] = '\0';
    return pbj_set_query_param(f->m, &f->a.base, S(key), values, v2 != NULL ? 2 : 1, NULL, 0,
                               f->errbuf);
}

static svc_err_t path(fixture_t *f, const char *field, const char *value)
{
    f->errbuf[0] = '\0';
    return pbj_set_path_param(f->m, &f->a.base, field, S(value), f->errbuf);
}

static void page_size_any_spelling(void **state)
{
    fixture_t *f = fx(state);
    Shopmicro__Catalog__V1__ListProductsRequest *r = (void *)f->m;

    assert_int_equal(query(f, "page_size", "10", NULL), SVC_OK);
    assert_int_equal(r->page_size, 10);
    assert_int_equal(query(f, "pageSize", "-20", NULL), SVC_OK);
    assert_int_equal(r->page_size, -20);
    assert_int_equal(query(f, "page_token", "abc", NULL), SVC_OK);
    assert_string_equal(r->page_token, "abc");
    assert_int_equal(query(f, "pageToken", "", NULL), SVC_OK); /* replaces, frees the old one */
    assert_string_equal(r->page_token, "");
    assert_int_equal(query(f, "page_size", "+7", NULL), SVC_OK);
    assert_int_equal(r->page_size, 7);
}

static void page_size_errors(void **state)
{
    fixture_t *f = fx(state);

    assert_int_equal(query(f, "page_size", "abc", NULL), SVC_EINVAL);
    assert_string_equal(
        f->errbuf,
        "parsing field \"page_size\": strconv.ParseInt: parsing \"abc\": invalid syntax");
    assert_int_equal(query(f, "pageSize", "2147483648", NULL), SVC_EINVAL);
    assert_string_equal(f->errbuf, "parsing field \"page_size\": strconv.ParseInt: parsing "
                                   "\"2147483648\": value out of range");
    assert_int_equal(query(f, "page_size", "0x10", NULL), SVC_EINVAL); /* base 10 only */
    assert_int_equal(query(f, "page_size", " 1", NULL), SVC_EINVAL);
    assert_int_equal(query(f, "page_size", "", NULL), SVC_EINVAL);
    assert_string_equal(
        f->errbuf, "parsing field \"page_size\": strconv.ParseInt: parsing \"\": invalid syntax");
    assert_int_equal(query(f, "page_size", "10", "20"), SVC_EINVAL);
    assert_string_equal(f->errbuf, "too many values for field \"page_size\": 10, 20");
    assert_int_equal(query(f, "page_token", "\xff", NULL), SVC_EINVAL);
    assert_string_equal(f->errbuf, "parsing field \"page_token\": invalid UTF-8");
}

static void unknown_and_bound_keys_are_ignored(void **state)
{
    fixture_t *f = fx(state);
    Shopmicro__Catalog__V1__ListProductsRequest *r = (void *)f->m;
    const char *bound[] = {"page_size"};
    pbj_str_t v = S("5");

    assert_int_equal(query(f, "colour", "red", NULL), SVC_OK);
    assert_int_equal(query(f, "page_size.x", "1", NULL), SVC_EINVAL);
    assert_string_equal(f->errbuf, "invalid path: \"page_size\" is not a message");
    assert_int_equal(
        pbj_set_query_param(f->m, &f->a.base, S("pageSize"), &v, 1, bound, 1, SVC_ERRBUF_SCRATCH),
        SVC_OK);
    assert_int_equal(r->page_size, 0);
    assert_int_equal(
        pbj_set_query_param(f->m, &f->a.base, S("page_token"), &v, 1, bound, 1, SVC_ERRBUF_SCRATCH),
        SVC_OK);
    assert_string_equal(r->page_token, "5");
}

static void scalar_types(void **state)
{
    fixture_t *f = fx(state);
    Pbjtest__Scalars *s = (void *)f->m;

    assert_int_equal(query(f, "fInt64", "-9223372036854775808", NULL), SVC_OK);
    assert_true(s->f_int64 == INT64_MIN);
    assert_int_equal(query(f, "f_uint64", "18446744073709551615", NULL), SVC_OK);
    assert_true(s->f_uint64 == UINT64_MAX);
    assert_int_equal(query(f, "fUint32", "-1", NULL), SVC_EINVAL);
    assert_string_equal(
        f->errbuf, "parsing field \"f_uint32\": strconv.ParseUint: parsing \"-1\": invalid syntax");
    for (const char *const *t = (const char *const[]){"1", "t", "T", "TRUE", "true", "True", NULL};
         *t != NULL; t++) {
        s->f_bool = 0;
        assert_int_equal(query(f, "fBool", *t, NULL), SVC_OK);
        assert_true(s->f_bool);
    }
    assert_int_equal(query(f, "fBool", "F", NULL), SVC_OK);
    assert_false(s->f_bool);
    assert_int_equal(query(f, "fBool", "yes", NULL), SVC_EINVAL);
    assert_string_equal(
        f->errbuf, "parsing field \"f_bool\": strconv.ParseBool: parsing \"yes\": invalid syntax");
    assert_int_equal(query(f, "fDouble", "1_000.5", NULL), SVC_OK);
    assert_true(s->f_double == 1000.5);
    assert_int_equal(query(f, "fDouble", "0x1p-2", NULL), SVC_OK);
    assert_true(s->f_double == 0.25);
    assert_int_equal(query(f, "fDouble", "-Inf", NULL), SVC_OK);
    assert_true(isinf(s->f_double) && s->f_double < 0);
    assert_int_equal(query(f, "fDouble", "nan", NULL), SVC_OK);
    assert_true(isnan(s->f_double));
    assert_int_equal(query(f, "fFloat", "1e39", NULL), SVC_EINVAL);
    assert_string_equal(f->errbuf,
                        "parsing field \"f_float\": strconv.ParseFloat: parsing \"1e39\": "
                        "value out of range");
    assert_int_equal(query(f, "fDouble", "0x1", NULL), SVC_EINVAL);
    assert_int_equal(query(f, "fDouble", "1__0", NULL), SVC_EINVAL);
    assert_int_equal(query(f, "fDouble", "+nan", NULL), SVC_EINVAL);
    assert_int_equal(query(f, "fEnum", "COLOR_RED", NULL), SVC_OK);
    assert_int_equal(s->f_enum, PBJTEST__COLOR__COLOR_RED);
    assert_int_equal(query(f, "fEnum", "2", NULL), SVC_OK);
    assert_int_equal(s->f_enum, PBJTEST__COLOR__COLOR_GREEN);
    assert_int_equal(query(f, "fEnum", "7", NULL), SVC_EINVAL);
    assert_string_equal(f->errbuf, "parsing field \"f_enum\": \"7\" is not a valid value");
    assert_int_equal(query(f, "fBytes", "Zm9v", NULL), SVC_OK);
    assert_int_equal(s->f_bytes.len, 3);
    assert_int_equal(query(f, "fBytes", "-_8=", NULL), SVC_OK);
    assert_memory_equal(s->f_bytes.data, "\xfb\xff", 2);
    assert_int_equal(query(f, "fBytes", "Zm9", NULL), SVC_EINVAL);
    assert_int_equal(query(f, "fMessage", "{}", NULL), SVC_EINVAL);
    assert_string_equal(f->errbuf, "parsing field \"f_message\": unsupported message type: "
                                   "\"pbjtest.Inner\"");
}

static void nested_fields(void **state)
{
    fixture_t *f = fx(state);
    Pbjtest__Scalars *s = (void *)f->m;

    assert_int_equal(query(f, "fMessage.a", "5", NULL), SVC_OK);
    assert_int_equal(query(f, "f_message.child.b_value", "x", NULL), SVC_OK);
    assert_int_equal(query(f, "fMessage.bValue", "y", NULL), SVC_OK);
    assert_int_equal(s->f_message->a, 5);
    assert_string_equal(s->f_message->child->b_value, "x");
    assert_string_equal(s->f_message->b_value, "y");
    assert_int_equal(query(f, "fMessage.children.a", "1", NULL), SVC_EINVAL);
    assert_string_equal(f->errbuf, "invalid path: \"children\" is not a message");
    assert_int_equal(query(f, "fMessage.nope", "1", NULL), SVC_OK);
}

static void repeated_values_append(void **state)
{
    fixture_t *f = fx(state);
    Pbjtest__Repeated *r = (void *)f->m;

    assert_int_equal(query(f, "rInt32", "1", "2"), SVC_OK);
    assert_int_equal(query(f, "r_int32", "3", NULL), SVC_OK);
    assert_int_equal(r->n_r_int32, 3);
    assert_int_equal(r->r_int32[2], 3);
    assert_int_equal(query(f, "rString", "a", "b"), SVC_OK);
    assert_string_equal(r->r_string[1], "b");
    assert_int_equal(query(f, "rEnum", "COLOR_RED", "2"), SVC_OK);
    assert_int_equal(r->r_enum[1], 2);
    assert_int_equal(query(f, "rInt32", "4", "x"), SVC_EINVAL);
    assert_string_equal(
        f->errbuf, "parsing list \"r_int32\": strconv.ParseInt: parsing \"x\": invalid syntax");
    assert_int_equal(r->n_r_int32, 4); /* the good value before the bad one stays */
}

static void map_entries(void **state)
{
    fixture_t *f = fx(state);
    Pbjtest__Maps *m = (void *)f->m;

    assert_int_equal(query(f, "strInt[a]", "1", NULL), SVC_OK);
    assert_int_equal(query(f, "str_int[b]", "2", NULL), SVC_OK);
    assert_int_equal(query(f, "strInt[a]", "3", NULL), SVC_OK); /* same key: replaced */
    assert_int_equal(m->n_str_int, 2);
    assert_string_equal(m->str_int[0]->key, "a");
    assert_int_equal(m->str_int[0]->value, 3);
    assert_int_equal(query(f, "intStr[-4]", "x", NULL), SVC_OK);
    assert_true(m->int_str[0]->key == -4);
    assert_int_equal(query(f, "strInt[a]", "1", "2"), SVC_EINVAL);
    assert_string_equal(f->errbuf, "more than one value provided for key \"a\" in map "
                                   "\"pbjtest.Maps.str_int\"");
    assert_int_equal(query(f, "intStr[x]", "1", NULL), SVC_EINVAL);
    assert_string_equal(
        f->errbuf, "parsing map key \"int_str\": strconv.ParseInt: parsing \"x\": invalid syntax");
    assert_int_equal(query(f, "strInt[k]", "v", NULL), SVC_EINVAL);
    assert_string_equal(
        f->errbuf,
        "parsing map value \"str_int\": strconv.ParseInt: parsing \"v\": invalid syntax");
    assert_int_equal(query(f, "uintMsg[1]", "v", NULL), SVC_EINVAL);
    assert_int_equal(query(f, "strDouble[x]", "2.5", NULL), SVC_OK);
    assert_true(m->str_double[0]->value == 2.5);
}

static void oneof_conflicts(void **state)
{
    fixture_t *f = fx(state);
    Pbjtest__Choice *c = (void *)f->m;

    assert_int_equal(query(f, "pString", "a", NULL), SVC_OK);
    assert_int_equal(c->pick_case, PBJTEST__CHOICE__PICK_P_STRING);
    assert_int_equal(query(f, "pInt64", "1", NULL), SVC_EINVAL);
    assert_string_equal(f->errbuf, "field already set for the oneof of \"p_int64\"");
    assert_int_equal(query(f, "name", "n", NULL), SVC_OK);
}

static void oneof_message_paths(void **state)
{
    fixture_t *f = fx(state);
    Pbjtest__Choice *c = (void *)f->m;

    assert_int_equal(query(f, "pMessage.a", "1", NULL), SVC_OK);
    assert_int_equal(query(f, "pMessage.bValue", "x", NULL), SVC_OK);
    assert_int_equal(c->pick_case, PBJTEST__CHOICE__PICK_P_MESSAGE);
    assert_int_equal(c->p_message->a, 1);
    assert_int_equal(query(f, "pEnum", "1", NULL), SVC_EINVAL);
}

static void path_params(void **state)
{
    fixture_t *f = fx(state);
    Pbjtest__Scalars *s = (void *)f->m;

    assert_int_equal(path(f, "f_string", "p 1/\xc3\xa9"), SVC_OK);
    assert_string_equal(s->f_string, "p 1/\xc3\xa9");
    assert_int_equal(path(f, "f_string", ""), SVC_OK);
    assert_string_equal(s->f_string, "");
    /* Top-level integers use base 0, as runtime.Int64 does. */
    assert_int_equal(path(f, "f_int64", "0x10"), SVC_OK);
    assert_true(s->f_int64 == 16);
    assert_int_equal(path(f, "f_int64", "0o17"), SVC_OK);
    assert_true(s->f_int64 == 15);
    assert_int_equal(path(f, "f_int64", "017"), SVC_OK);
    assert_true(s->f_int64 == 15);
    assert_int_equal(path(f, "f_int64", "-0b101"), SVC_OK);
    assert_true(s->f_int64 == -5);
    assert_int_equal(path(f, "f_int64", "1_000"), SVC_OK);
    assert_true(s->f_int64 == 1000);
    assert_int_equal(path(f, "f_int32", "abc"), SVC_EINVAL);
    assert_string_equal(f->errbuf, "type mismatch, parameter: f_int32, error: strconv.ParseInt: "
                                   "parsing \"abc\": invalid syntax");
    assert_int_equal(path(f, "f_int32", "08"), SVC_EINVAL);
    assert_int_equal(path(f, "f_int32", "1__0"), SVC_EINVAL);
    assert_int_equal(path(f, "f_int32", "_1"), SVC_EINVAL);
    assert_int_equal(path(f, "f_uint32", "0x"), SVC_EINVAL);
    assert_int_equal(path(f, "f_enum", "0x2"), SVC_OK);
    assert_int_equal(s->f_enum, PBJTEST__COLOR__COLOR_GREEN);
    assert_int_equal(path(f, "f_enum", "COLOR_RED"), SVC_OK);
    assert_int_equal(s->f_enum, PBJTEST__COLOR__COLOR_RED);
    assert_int_equal(path(f, "f_enum", "9"), SVC_EINVAL);
    assert_string_equal(f->errbuf, "type mismatch, parameter: f_enum, error: 9 is not valid");
    /* Nested variables follow the query rules (base 10). */
    assert_int_equal(path(f, "f_message.a", "12"), SVC_OK);
    assert_int_equal(s->f_message->a, 12);
    assert_int_equal(path(f, "f_message.a", "0x1"), SVC_EINVAL);
    assert_string_equal(f->errbuf, "type mismatch, parameter: f_message.a, error: parsing field "
                                   "\"a\": strconv.ParseInt: parsing \"0x1\": invalid syntax");
    assert_int_equal(path(f, "nope", "1"), SVC_EINTERNAL);
    assert_string_equal(f->errbuf, "path parameter nope names no field of pbjtest.Scalars");
}

static void repeated_path_param_is_a_comma_list(void **state)
{
    fixture_t *f = fx(state);
    Pbjtest__Repeated *r = (void *)f->m;

    assert_int_equal(path(f, "r_int64", "1,0x2,-3"), SVC_OK);
    assert_int_equal(r->n_r_int64, 3);
    assert_true(r->r_int64[1] == 2 && r->r_int64[2] == -3);
    assert_int_equal(path(f, "r_string", "a,,b"), SVC_OK);
    assert_int_equal(r->n_r_string, 3);
    assert_string_equal(r->r_string[1], "");
    assert_int_equal(path(f, "r_bool", "true,x"), SVC_EINVAL);
}

static svc_err_t query_op(ProtobufCAllocator *a, void *ctx)
{
    pbj_str_t values[] = {S("1"), S("2")};
    ProtobufCMessage *m = NULL;
    svc_err_t err = pbj_message_new(ctx, a, &m);

    if (err == SVC_OK)
        err = pbj_set_query_param(m, a, S("rString"), values, 2, NULL, 0, SVC_ERRBUF_SCRATCH);
    if (err == SVC_OK)
        err = pbj_set_path_param(m, a, "r_int64", S("1,2,3,4,5"), SVC_ERRBUF_SCRATCH);
    if (err == SVC_OK)
        err = pbj_set_query_param(m, a, S("rMessage.a"), values, 1, NULL, 0, SVC_ERRBUF_SCRATCH);
    pbj_message_free(m, a);
    return err == SVC_EINVAL ? SVC_OK : err; /* rMessage.a is an invalid path: fine */
}

static svc_err_t map_op(ProtobufCAllocator *a, void *ctx)
{
    pbj_str_t values[] = {S("1")};
    ProtobufCMessage *m = NULL;
    svc_err_t err = pbj_message_new(ctx, a, &m);

    if (err == SVC_OK)
        err = pbj_set_query_param(m, a, S("strInt[k]"), values, 1, NULL, 0, SVC_ERRBUF_SCRATCH);
    if (err == SVC_OK)
        err = pbj_set_query_param(m, a, S("uintMsg[1]"), values, 1, NULL, 0, SVC_ERRBUF_SCRATCH);
    pbj_message_free(m, a);
    return err == SVC_EINVAL ? SVC_OK : err;
}

static void out_of_memory_at_every_step(void **state)
{
    (void)state;
    assert_true(pbjt_torture(query_op, (void *)&pbjtest__repeated__descriptor) > 3);
    assert_true(pbjt_torture(map_op, (void *)&pbjtest__maps__descriptor) > 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(page_size_any_spelling, setup_list, teardown),
        cmocka_unit_test_setup_teardown(page_size_errors, setup_list, teardown),
        cmocka_unit_test_setup_teardown(unknown_and_bound_keys_are_ignored, setup_list, teardown),
        cmocka_unit_test_setup_teardown(scalar_types, setup_scalars, teardown),
        cmocka_unit_test_setup_teardown(nested_fields, setup_scalars, teardown),
        cmocka_unit_test_setup_teardown(repeated_values_append, setup_repeated, teardown),
        cmocka_unit_test_setup_teardown(map_entries, setup_maps, teardown),
        cmocka_unit_test_setup_teardown(oneof_conflicts, setup_choice, teardown),
        cmocka_unit_test_setup_teardown(oneof_message_paths, setup_choice, teardown),
        cmocka_unit_test_setup_teardown(path_params, setup_scalars, teardown),
        cmocka_unit_test_setup_teardown(repeated_path_param_is_a_comma_list, setup_repeated,
                                        teardown),
        cmocka_unit_test(out_of_memory_at_every_step),
    };
    return cmocka_run_group_tests_name("pbj_text", tests, NULL, NULL);
}
