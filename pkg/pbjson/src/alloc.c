/* SPDX-License-Identifier: Apache-2.0 */
/*
 * alloc.c - memory for pbjson: the caller's ProtobufCAllocator (or
 * malloc/free), array growth, and the bounded output buffer.
 *
 * Every allocation goes through a ProtobufCAllocator so that a message can
 * be released with protobuf_c_message_free_unpacked() and the same
 * allocator, and so that tests can fail the Nth allocation.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void *system_alloc(void *data, size_t n)
{
    (void)data;
    return malloc(n);
}

static void system_free(void *data, void *p)
{
    (void)data;
    free(p);
}

/* Same behaviour as protobuf-c's (static) default allocator, which is what
 * protobuf_c_message_free_unpacked(m, NULL) uses. */
static ProtobufCAllocator system_allocator = {system_alloc, system_free, NULL};

ProtobufCAllocator *pbj__allocator(ProtobufCAllocator *a)
{
    return a != NULL ? a : &system_allocator;
}

void *pbj__alloc(ProtobufCAllocator *a, size_t n)
{
    if (n == 0)
        return NULL;
    a = pbj__allocator(a);
    return a->alloc(a->allocator_data, n);
}

void pbj__free(ProtobufCAllocator *a, void *p)
{
    if (p == NULL)
        return;
    a = pbj__allocator(a);
    a->free(a->allocator_data, p);
}

void pbj_free(ProtobufCAllocator *alloc, void *p)
{
    pbj__free(alloc, p);
}

bool pbj__add_ok(size_t a, size_t b, size_t *out)
{
    if (a > SIZE_MAX - b)
        return false;
    *out = a + b;
    return true;
}

svc_err_t pbj__array_grow(ProtobufCAllocator *a, void **arr, size_t n, size_t *cap,
                          size_t elem_size)
{
    size_t want;
    void *grown;

    if (n < *cap)
        return SVC_OK;
    /* ProtobufCAllocator has no realloc: allocate, copy, free. Doubling
     * keeps that linear overall. */
    want = n < 4 ? 4 : n * 2;
    if (want < n || want > SIZE_MAX / elem_size)
        return SVC_ENOMEM;
    grown = pbj__alloc(a, want * elem_size);
    if (grown == NULL)
        return SVC_ENOMEM;
    if (n > 0)
        memcpy(grown, *arr, n * elem_size);
    pbj__free(a, *arr);
    *arr = grown;
    *cap = want;
    return SVC_OK;
}

void pbj__buf_init(pbj__buf_t *b, ProtobufCAllocator *a, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->alloc = a;
    b->max = max;
    b->err = SVC_OK;
}

void pbj__buf_dispose(pbj__buf_t *b)
{
    pbj__free(b->alloc, b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* Makes room for n more bytes plus a NUL. */
static bool buf_reserve(pbj__buf_t *b, size_t n)
{
    size_t need, cap;
    char *grown;

    if (b->err != SVC_OK)
        return false;
    if (!pbj__add_ok(b->len, n, &need) || need > b->max) {
        b->err = SVC_EEXHAUSTED;
        return false;
    }
    if (need < b->cap)
        return true;
    cap = b->cap < 256 ? 256 : b->cap;
    while (cap <= need)
        cap = cap > b->max / 2 ? b->max + 1 : cap * 2;
    grown = pbj__alloc(b->alloc, cap);
    if (grown == NULL) {
        b->err = SVC_ENOMEM;
        return false;
    }
    if (b->len > 0)
        memcpy(grown, b->data, b->len);
    pbj__free(b->alloc, b->data);
    b->data = grown;
    b->cap = cap;
    return true;
}

void pbj__buf_put(pbj__buf_t *b, const char *p, size_t n)
{
    if (n == 0 || !buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

char *pbj__buf_extend(pbj__buf_t *b, size_t n)
{
    char *p;

    if (!buf_reserve(b, n))
        return NULL;
    p = b->data + b->len;
    b->len += n;
    b->data[b->len] = '\0';
    return p;
}

void pbj__buf_putc(pbj__buf_t *b, char c)
{
    pbj__buf_put(b, &c, 1);
}

void pbj__buf_puts(pbj__buf_t *b, const char *s)
{
    pbj__buf_put(b, s, strlen(s));
}

/* The escape protojson writes for byte c, or NULL when c is copied as is
 * (internal/encoding/json/string.go: only control characters, '"' and '\\'
 * are escaped; there is no HTML escaping). */
static const char *escape_for(unsigned char c, char tmp[7])
{
    static const char hex[] = "0123456789abcdef";

    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        break;
    }
    if (c >= 0x20)
        return NULL;
    memcpy(tmp, "\\u00", 4);
    tmp[4] = hex[c >> 4];
    tmp[5] = hex[c & 0xf];
    tmp[6] = '\0';
    return tmp;
}

bool pbj__buf_put_json_string(pbj__buf_t *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, run = 0;
    char tmp[7];

    if (!pbj__utf8_valid(s, n))
        return false;
    pbj__buf_putc(b, '"');
    /* Copy runs of bytes that need no escape in one go. */
    for (i = 0; i < n; i++) {
        const char *esc = escape_for(p[i], tmp);
        if (esc == NULL)
            continue;
        pbj__buf_put(b, s + run, i - run);
        pbj__buf_puts(b, esc);
        run = i + 1;
    }
    pbj__buf_put(b, s + run, n - run);
    pbj__buf_putc(b, '"');
    return true;
}
