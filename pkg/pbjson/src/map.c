/* SPDX-License-Identifier: Apache-2.0 */
/*
 * map.c - ordering map entries by key.
 *
 * protobuf-c keeps a map as an array of entry messages, in wire order and
 * possibly with repeated keys. protojson writes a Go map: one entry per key
 * (the last one wins, as when parsing the wire format) in sorted key order.
 * On input a repeated key is an error. Both need the entries sorted by key;
 * sorting (rather than comparing every pair) keeps a hostile 100k-entry map
 * at O(n log n).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef enum { KEY_STRING, KEY_SIGNED, KEY_UNSIGNED } key_class_t;

typedef struct {
    key_class_t cls;
    const char *s;
    int64_t i;
    uint64_t u;
    size_t idx;
} key_rec_t;

static key_class_t key_class(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_STRING:
        return KEY_STRING;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return KEY_SIGNED;
    default:
        return KEY_UNSIGNED; /* unsigned integers and bool (false < true) */
    }
}

static void read_key(const ProtobufCMessage *entry, const ProtobufCFieldDescriptor *kf,
                     key_rec_t *r)
{
    const void *k = pbj__member(entry, kf);

    r->cls = key_class(kf->type);
    switch (kf->type) {
    case PROTOBUF_C_TYPE_STRING:
        r->s = *(const char *const *)k != NULL ? *(const char *const *)k : "";
        break;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        r->i = *(const int32_t *)k;
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        r->i = *(const int64_t *)k;
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        r->u = *(const uint32_t *)k;
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        r->u = *(const uint64_t *)k;
        break;
    case PROTOBUF_C_TYPE_BOOL:
        r->u = *(const protobuf_c_boolean *)k != 0;
        break;
    default:
        break; /* not a valid key type; pbj__is_map() excludes it */
    }
}

static int cmp_key(const key_rec_t *x, const key_rec_t *y)
{
    switch (x->cls) {
    case KEY_STRING:
        return strcmp(x->s, y->s); /* byte order, like Go */
    case KEY_SIGNED:
        return x->i < y->i ? -1 : x->i > y->i;
    case KEY_UNSIGNED:
        return x->u < y->u ? -1 : x->u > y->u;
    }
    return 0;
}

/* Key order, then entry order: a total order, so qsort's instability does
 * not matter. */
static int cmp_rec(const void *a, const void *b)
{
    const key_rec_t *x = a, *y = b;
    int c = cmp_key(x, y);

    if (c != 0)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static svc_err_t sorted_keys(ProtobufCAllocator *a, const ProtobufCFieldDescriptor *f,
                             ProtobufCMessage *const *entries, size_t n, key_rec_t **out)
{
    const ProtobufCFieldDescriptor *kf = pbj__map_key(f);
    key_rec_t *recs;

    *out = NULL;
    if (n == 0)
        return SVC_OK;
    if (n > SIZE_MAX / sizeof(*recs))
        return SVC_ENOMEM;
    recs = pbj__alloc(a, n * sizeof(*recs));
    if (recs == NULL)
        return SVC_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        memset(&recs[i], 0, sizeof(recs[i]));
        read_key(entries[i], kf, &recs[i]);
        recs[i].idx = i;
    }
    qsort(recs, n, sizeof(*recs), cmp_rec);
    *out = recs;
    return SVC_OK;
}

svc_err_t pbj__map_order(ProtobufCAllocator *a, const ProtobufCFieldDescriptor *f,
                         ProtobufCMessage *const *entries, size_t n, size_t **out, size_t *n_out)
{
    key_rec_t *recs = NULL;
    size_t *order = NULL, k = 0;
    svc_err_t err;

    *out = NULL;
    *n_out = 0;
    err = sorted_keys(a, f, entries, n, &recs);
    if (err != SVC_OK || n == 0)
        goto out;
    order = pbj__alloc(a, n * sizeof(*order));
    if (order == NULL) {
        err = SVC_ENOMEM;
        goto out;
    }
    /* Within a run of equal keys the entries are in array order: keep the
     * last. */
    for (size_t i = 0; i < n; i++)
        if (i + 1 == n || cmp_key(&recs[i], &recs[i + 1]) != 0)
            order[k++] = recs[i].idx;
    *out = order;
    *n_out = k;
out:
    pbj__free(a, recs);
    return err;
}

svc_err_t pbj__map_first_duplicate(ProtobufCAllocator *a, const ProtobufCFieldDescriptor *f,
                                   ProtobufCMessage *const *entries, size_t n, size_t *dup)
{
    key_rec_t *recs = NULL;
    svc_err_t err;

    *dup = n;
    err = sorted_keys(a, f, entries, n, &recs);
    if (err != SVC_OK)
        return err;
    /* The second entry of each run is that key's first repeat; report the
     * earliest such entry, which is where protojson stops. */
    for (size_t i = 1; i < n; i++)
        if (cmp_key(&recs[i - 1], &recs[i]) == 0 && recs[i].idx < *dup &&
            (i < 2 || cmp_key(&recs[i - 2], &recs[i]) != 0))
            *dup = recs[i].idx;
    pbj__free(a, recs);
    return SVC_OK;
}
