/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_pbjson.c - fuzz target for pkg/pbjson.
 *
 * Each input is decoded as JSON into every message type below. Whenever a
 * decode succeeds, the message must encode; the encoding must decode again
 * and re-encode to the very same bytes (no accepted input has two
 * canonical forms); the message must survive protobuf-c's own pack/unpack
 * with the same JSON; and nothing may stay allocated. The input is also
 * read as a query string (k=v&k=v) applied with pbj_set_query_param and
 * pbj_set_path_param, and the resulting messages must obey the same rules.
 * Any violation abort()s, which both libFuzzer and the standalone driver
 * report as a crash.
 *
 * Built two ways (tests/fuzz/CMakeLists.txt): with clang as a libFuzzer
 * binary (fuzz_pbjson), and with any compiler linked to the standalone
 * driver (driver.c: fuzz_pbjson_driver), so that the gcc build and ctest
 * exercise the same harness.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "legacy.pb-c.h"
#include "pbj/pbjson.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "shopmicro/order/v1/order.pb-c.h"
#include "types.pb-c.h"

#include "driver.h"

static const ProtobufCMessageDescriptor *const targets[] = {
    /* The requests the gateway decodes from bodies... */
    &shopmicro__catalog__v1__create_product_request__descriptor,
    &shopmicro__catalog__v1__get_product_request__descriptor,
    &shopmicro__catalog__v1__list_products_request__descriptor,
    &shopmicro__order__v1__create_order_request__descriptor,
    &shopmicro__order__v1__get_order_request__descriptor,
    /* ...the responses it encodes... */
    &shopmicro__catalog__v1__list_products_response__descriptor,
    &shopmicro__order__v1__order__descriptor,
    &shopmicro__order__v1__create_order_response__descriptor,
    /* ...and every other field shape. */
    &pbjtest__scalars__descriptor,
    &pbjtest__repeated__descriptor,
    &pbjtest__maps__descriptor,
    &pbjtest__choice__descriptor,
    &pbjtest__order__descriptor,
    &pbjtest2__legacy__descriptor,
    &pbjtest2__holder__descriptor,
};

/* Query parameters go to the messages that have the most field kinds. */
static const ProtobufCMessageDescriptor *const query_targets[] = {
    &shopmicro__catalog__v1__list_products_request__descriptor,
    &pbjtest__scalars__descriptor,
    &pbjtest__repeated__descriptor,
    &pbjtest__maps__descriptor,
    &pbjtest__choice__descriptor,
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Counts live allocations, to find leaks in every build (not only ASan). */
typedef struct counter {
    ProtobufCAllocator base;
    size_t live;
} counter_t;

static void *count_alloc(void *data, size_t n)
{
    ((counter_t *)data)->live++;
    return malloc(n);
}

static void count_free(void *data, void *p)
{
    ((counter_t *)data)->live--;
    free(p);
}

static void counter_init(counter_t *c)
{
    c->base = (ProtobufCAllocator){count_alloc, count_free, c};
    c->live = 0;
}

static void die(const char *what, const ProtobufCMessageDescriptor *d, const char *detail)
{
    fprintf(stderr, "fuzz_pbjson: %s (%s): %s\n", what, d->name, detail);
    abort();
}

static char *encode_or_die(counter_t *c, const ProtobufCMessage *m, size_t *len)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    char *out = NULL;

    if (pbj_encode(m, &c->base, &out, len, errbuf) != SVC_OK)
        die("a decoded message does not encode", m->descriptor, errbuf);
    return out;
}

/* Copies json with every JSON number -0 written as 0. protobuf-c does not
 * pack a proto3 float or double field whose value == 0, so -0.0 comes back
 * from the wire as 0 (Go sends -0); that is protobuf-c's behaviour, not
 * the codec's, and the comparison below must not trip over it. */
static char *without_negative_zero(const char *json, size_t n, size_t *out_len)
{
    char *out = malloc(n + 1);
    size_t o = 0;

    if (out == NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        bool value_start = i > 0 && strchr(":,[", json[i - 1]) != NULL;
        bool zero_ends = i + 2 < n && json[i + 1] == '0' && strchr(",]}", json[i + 2]) != NULL;
        if (json[i] == '-' && value_start && zero_ends)
            continue;
        out[o++] = json[i];
    }
    *out_len = o;
    return out;
}

static bool same_json(const char *a, size_t na, const char *b, size_t nb)
{
    size_t la, lb;
    char *x = without_negative_zero(a, na, &la), *y = without_negative_zero(b, nb, &lb);
    bool same = la == lb && memcmp(x, y, la) == 0;

    free(x);
    free(y);
    return same;
}

/* The JSON of m after protobuf-c's pack + unpack must equal `json`. */
static void check_wire_round_trip(counter_t *c, const ProtobufCMessage *m, const char *json,
                                  size_t json_len)
{
    size_t size = protobuf_c_message_get_packed_size(m), len = 0;
    uint8_t *wire = malloc(size + 1);
    ProtobufCMessage *back;
    char *again;

    if (wire == NULL)
        abort();
    if (protobuf_c_message_pack(m, wire) != size)
        die("pack size mismatch", m->descriptor, json);
    back = protobuf_c_message_unpack(m->descriptor, &c->base, size, wire);
    if (back == NULL)
        die("protobuf-c cannot unpack what it packed", m->descriptor, json);
    again = encode_or_die(c, back, &len);
    if (!same_json(again, len, json, json_len))
        die("JSON changes across the wire format", m->descriptor, again);
    pbj_free(&c->base, again);
    protobuf_c_message_free_unpacked(back, &c->base);
    free(wire);
}

/* m was accepted: its encoding must be canonical and survive everything. */
static void check_accepted(counter_t *c, const ProtobufCMessage *m)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *m2 = NULL;
    size_t len1 = 0, len2 = 0;
    char *e1 = encode_or_die(c, m, &len1), *e2;

    if (pbj_decode(m->descriptor, e1, len1, 0, &c->base, &m2, errbuf) != SVC_OK)
        die("an encoding does not decode", m->descriptor, errbuf);
    e2 = encode_or_die(c, m2, &len2);
    if (len1 != len2 || memcmp(e1, e2, len1) != 0)
        die("re-encoding differs", m->descriptor, e1);
    check_wire_round_trip(c, m, e1, len1);
    pbj_free(&c->base, e1);
    pbj_free(&c->base, e2);
    pbj_message_free(m2, &c->base);
}

static void fuzz_json(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < COUNT(targets); i++) {
        counter_t c;
        ProtobufCMessage *m = NULL;
        char errbuf[SVC_ERRBUF_LEN];
        svc_err_t err;

        counter_init(&c);
        err = pbj_decode(targets[i], (const char *)data, size, i % 2 ? PBJ_DECODE_ALLOW_EMPTY : 0,
                         &c.base, &m, errbuf);
        if (err == SVC_OK)
            check_accepted(&c, m);
        else if (err != SVC_EINVAL || m != NULL)
            die("unexpected decode result", targets[i], errbuf);
        pbj_message_free(m, &c.base);
        if (c.live != 0)
            die("leak", targets[i], "after decode");
    }
}

/* Splits s at the first `sep`: s becomes the head, the tail is returned. */
static pbj_str_t cut(pbj_str_t *s, char sep)
{
    const char *p = memchr(s->ptr, sep, s->len);
    pbj_str_t tail = {s->ptr + s->len, 0};

    if (p != NULL) {
        tail = (pbj_str_t){p + 1, s->len - (size_t)(p - s->ptr) - 1};
        s->len = (size_t)(p - s->ptr);
    }
    return tail;
}

/* Applies "k=v&k=v2&..." (no percent-decoding) to one message. */
static void apply_query(counter_t *c, ProtobufCMessage *m, pbj_str_t q)
{
    static const char *const bound[] = {"f_int32", "r_message.a"};

    while (q.len > 0) {
        pbj_str_t pair = q, value, values[2];
        char path[64];
        q = cut(&pair, '&');
        value = cut(&pair, '=');
        values[0] = value;
        values[1] = pair;
        if (pbj_set_query_param(m, &c->base, pair, values, value.len % 3 == 0 ? 2 : 1, bound, 2,
                                SVC_ERRBUF_SCRATCH) == SVC_ENOMEM)
            abort();
        if (pair.len < sizeof(path) && memchr(pair.ptr, '\0', pair.len) == NULL) {
            memcpy(path, pair.ptr, pair.len);
            path[pair.len] = '\0';
            if (pbj_set_path_param(m, &c->base, path, value, SVC_ERRBUF_SCRATCH) == SVC_ENOMEM)
                abort();
        }
    }
}

static void fuzz_query(const uint8_t *data, size_t size)
{
    pbj_str_t q = {(const char *)data, size};

    if (size > 1024 || memchr(data, '=', size) == NULL)
        return;
    for (size_t i = 0; i < COUNT(query_targets); i++) {
        counter_t c;
        ProtobufCMessage *m = NULL;

        counter_init(&c);
        if (pbj_message_new(query_targets[i], &c.base, &m) != SVC_OK)
            abort();
        apply_query(&c, m, q);
        check_accepted(&c, m);
        pbj_message_free(m, &c.base);
        if (c.live != 0)
            die("leak", query_targets[i], "after query parameters");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_json(data, size);
    fuzz_query(data, size);
    return 0;
}

/* JSON fragments that make mutations reach deeper than random bytes. */
const char *const fuzz_tokens[] = {
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e2",
    "1.5",
    "18446744073709551615",
    "9223372036854775808",
    "\"NaN\"",
    "\"Infinity\"",
    "\\u0000",
    "\\ud83d\\ude00",
    "\\ud800",
    "\xc3\xa9",
    "\xff",
    "\"priceCents\"",
    "\"price_cents\"",
    "\"items\"",
    "\"quantity\"",
    "\"fMessage\"",
    "\"children\"",
    "\"strInt\"",
    "\"uintMsg\"",
    "\"pString\"",
    "\"pInt64\"",
    "\"rEnum\"",
    "\"COLOR_RED\"",
    "\"fBytes\"",
    "\"AP8Q\"",
    "\"-_8\"",
    "\"id\"",
    "\"next\"",
    "\"item\"",
    "=",
    "&",
    ".",
    "[a]",
    "0x10",
    "1_0",
};
const size_t fuzz_n_tokens = sizeof fuzz_tokens / sizeof fuzz_tokens[0];
