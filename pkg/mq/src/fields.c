/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fields.c - reading AMQP field tables: header values as text, and the
 * x-death count of the retry tiers. Pure functions, unit-tested without a
 * broker.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mq_int.h"

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
    case AMQP_FIELD_KIND_I8:  *out = v->value.i8;  return true;
    case AMQP_FIELD_KIND_U8:  *out = v->value.u8;  return true;
    case AMQP_FIELD_KIND_I16: *out = v->value.i16; return true;
    case AMQP_FIELD_KIND_U16: *out = v->value.u16; return true;
    case AMQP_FIELD_KIND_I32: *out = v->value.i32; return true;
    case AMQP_FIELD_KIND_U32: *out = v->value.u32; return true;
    case AMQP_FIELD_KIND_I64: *out = v->value.i64; return true;
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
