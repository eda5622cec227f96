/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fields.c - reading AMQP field tables: header values as text, and the
 * x-death count of the retry tiers; rendering any value for people (the
 * dead-letter CLI); the header list of a moved copy. Pure functions,
 * unit-tested without a broker.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

bool rmq__bytes_eq(amqp_bytes_t b, const char *s)
{
    size_t n = strlen(s);

    return b.len == n && (n == 0 || memcmp(b.bytes, s, n) == 0);
}

static bool bytes_prefix(amqp_bytes_t b, const char *prefix)
{
    size_t n = strlen(prefix);

    return b.len > n && memcmp(b.bytes, prefix, n) == 0;
}

bool rmq__field_int(const amqp_field_value_t *v, int64_t *out)
{
    switch (v->kind) {
    case AMQP_FIELD_KIND_I8:
        *out = v->value.i8;
        return true;
    case AMQP_FIELD_KIND_U8:
        *out = v->value.u8;
        return true;
    case AMQP_FIELD_KIND_I16:
        *out = v->value.i16;
        return true;
    case AMQP_FIELD_KIND_U16:
        *out = v->value.u16;
        return true;
    case AMQP_FIELD_KIND_I32:
        *out = v->value.i32;
        return true;
    case AMQP_FIELD_KIND_U32:
        *out = v->value.u32;
        return true;
    case AMQP_FIELD_KIND_I64:
        *out = v->value.i64;
        return true;
    /* A u64 above INT64_MAX is no count or status of ours: refused. */
    case AMQP_FIELD_KIND_U64:
        if (v->value.u64 > INT64_MAX)
            return false;
        *out = (int64_t)v->value.u64;
        return true;
    default:
        return false;
    }
}

bool rmq__field_text(const amqp_field_value_t *v, char *out, size_t cap)
{
    int64_t i;

    if (cap == 0)
        return false;
    if (v->kind == AMQP_FIELD_KIND_UTF8 || v->kind == AMQP_FIELD_KIND_BYTES) {
        /* Cut at the cap rather than refused: a header is shown, not parsed. */
        size_t n = v->value.bytes.len < cap - 1 ? v->value.bytes.len : cap - 1;
        if (n > 0)
            memcpy(out, v->value.bytes.bytes, n);
        out[n] = '\0';
        return memchr(out, '\0', n) == NULL;
    }
    if (v->kind == AMQP_FIELD_KIND_BOOLEAN) {
        snprintf(out, cap, "%s", v->value.boolean ? "true" : "false");
        return true;
    }
    if (rmq__field_int(v, &i)) {
        snprintf(out, cap, "%" PRId64, i);
        return true;
    }
    return false;
}

const amqp_field_value_t *rmq__table_get(const amqp_table_t *t, const char *name)
{
    for (int i = 0; t != NULL && i < t->num_entries; i++)
        if (rmq__bytes_eq(t->entries[i].key, name))
            return &t->entries[i].value;
    return NULL;
}

/* One x-death entry: RabbitMQ keeps one per (queue, reason) and counts the
 * deaths in it, so a message that went through tier 1 twice has count 2 in
 * one entry, not two entries. */
static unsigned entry_count(const amqp_table_t *e, const char *tier_prefix)
{
    const amqp_field_value_t *queue = rmq__table_get(e, "queue");
    const amqp_field_value_t *reason = rmq__table_get(e, "reason");
    const amqp_field_value_t *count = rmq__table_get(e, "count");
    int64_t n;

    if (queue == NULL || reason == NULL || count == NULL || queue->kind != AMQP_FIELD_KIND_UTF8 ||
        reason->kind != AMQP_FIELD_KIND_UTF8 || !bytes_prefix(queue->value.bytes, tier_prefix) ||
        !rmq__bytes_eq(reason->value.bytes, "expired") || !rmq__field_int(count, &n) || n < 0 ||
        n > 1000000)
        return 0;
    return (unsigned)n;
}

unsigned rmq__xdeath_tier_count(const amqp_table_t *headers, const char *tier_prefix)
{
    const amqp_field_value_t *xd = rmq__table_get(headers, "x-death");
    unsigned sum = 0;

    if (xd == NULL || xd->kind != AMQP_FIELD_KIND_ARRAY)
        return 0;
    for (int i = 0; i < xd->value.array.num_entries; i++) {
        const amqp_field_value_t *e = &xd->value.array.entries[i];
        if (e->kind == AMQP_FIELD_KIND_TABLE)
            sum += entry_count(&e->value.table, tier_prefix);
    }
    return sum;
}

unsigned rmq_tier_next(unsigned passes, size_t n_tiers)
{
    return passes < n_tiers ? passes + 1 : 0;
}

/* A bounded writer for rmq__field_render: a value longer than the buffer
 * is cut, and the cut is shown. */
typedef struct render {
    char *out;
    size_t cap, len;
    bool cut;
} render_t;

static void put(render_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(render_t *r, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (r->cut)
        return;
    va_start(ap, fmt);
    n = vsnprintf(r->out + r->len, r->cap - r->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= r->cap - r->len) {
        r->cut = true;
        r->len = r->cap - 1;
        return;
    }
    r->len += (size_t)n;
}

static void put_bytes(render_t *r, amqp_bytes_t b)
{
    put(r, "%.*s", (int)(b.len > 65535 ? 65535 : b.len), (const char *)b.bytes);
}

/* Nesting deeper than this (x-death is two levels) is shown as "...". */
#define RENDER_DEPTH 6

static void render(render_t *r, const amqp_field_value_t *v, int depth)
{
    char text[64];
    int64_t i;

    if (depth > RENDER_DEPTH) {
        put(r, "...");
        return;
    }
    switch (v->kind) {
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
        put_bytes(r, v->value.bytes);
        return;
    case AMQP_FIELD_KIND_TIMESTAMP: {
        /* AMQP timestamps are seconds since the epoch (x-death's "time"). */
        time_t t = (time_t)v->value.u64;
        struct tm tm;
        if (gmtime_r(&t, &tm) != NULL && strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm))
            put(r, "%s", text);
        else
            put(r, "%" PRIu64, v->value.u64);
        return;
    }
    case AMQP_FIELD_KIND_F32:
        put(r, "%g", (double)v->value.f32);
        return;
    case AMQP_FIELD_KIND_F64:
        put(r, "%g", v->value.f64);
        return;
    case AMQP_FIELD_KIND_VOID:
        put(r, "void");
        return;
    case AMQP_FIELD_KIND_ARRAY:
        put(r, "[");
        for (int k = 0; k < v->value.array.num_entries; k++) {
            put(r, "%s", k ? ", " : "");
            render(r, &v->value.array.entries[k], depth + 1);
        }
        put(r, "]");
        return;
    case AMQP_FIELD_KIND_TABLE:
        put(r, "{");
        for (int k = 0; k < v->value.table.num_entries; k++) {
            put(r, "%s", k ? ", " : "");
            put_bytes(r, v->value.table.entries[k].key);
            put(r, "=");
            render(r, &v->value.table.entries[k].value, depth + 1);
        }
        put(r, "}");
        return;
    default:
        if (rmq__field_text(v, text, sizeof text))
            put(r, "%s", text);
        else if (rmq__field_int(v, &i))
            put(r, "%" PRId64, i);
        else
            put(r, "(kind %c)", (char)v->kind);
        return;
    }
}

void rmq__field_render(const amqp_field_value_t *v, char *out, size_t cap)
{
    render_t r = {.out = out, .cap = cap};

    if (cap == 0)
        return;
    out[0] = '\0';
    render(&r, v, 0);
    if (r.cut && cap > 4)
        memcpy(out + cap - 4, "...", 4);
}

/* True when key is named by pattern: equal, or pattern ends in '*' and key
 * starts with what is before it. */
static bool name_matches(amqp_bytes_t key, const char *pattern)
{
    size_t n = strlen(pattern);

    if (n > 0 && pattern[n - 1] == '*')
        return key.len >= n - 1 && memcmp(key.bytes, pattern, n - 1) == 0;
    return rmq__bytes_eq(key, pattern);
}

amqp_table_entry_t *rmq__headers_edit(const amqp_table_t *h, const char *const *drop, size_t n_drop,
                                      const amqp_table_entry_t *set, int n_set, int *n_out)
{
    int n_orig = h != NULL ? h->num_entries : 0, n = 0;
    amqp_table_entry_t *e = calloc((size_t)(n_orig + n_set) + 1, sizeof *e);

    if (e == NULL)
        return NULL;
    for (int i = 0; i < n_orig; i++) {
        bool gone = false;
        for (size_t j = 0; j < n_drop && !gone; j++)
            gone = name_matches(h->entries[i].key, drop[j]);
        for (int j = 0; j < n_set && !gone; j++)
            gone = h->entries[i].key.len == set[j].key.len &&
                   memcmp(h->entries[i].key.bytes, set[j].key.bytes, set[j].key.len) == 0;
        if (!gone)
            e[n++] = h->entries[i];
    }
    for (int j = 0; j < n_set; j++)
        e[n++] = set[j];
    *n_out = n;
    return e;
}
