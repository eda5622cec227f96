/* SPDX-License-Identifier: Apache-2.0 */
/*
 * field.c - what the codec needs to know about protobuf-c descriptors and
 * message memory: names, presence, declaration order, map detection, and
 * storing values the way protobuf_c_message_free_unpacked() expects to find
 * them (so that a half-built message can always be freed).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool pbj__is_oneof(const ProtobufCFieldDescriptor *f)
{
    return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
}

/* What the codec needs per protobuf-c type: protojson's kind name (for
 * error messages) and the size of one element of a repeated field. */
static const struct {
    const char *kind;
    size_t size;
} types[] = {
    [PROTOBUF_C_TYPE_INT32] = {"int32", sizeof(int32_t)},
    [PROTOBUF_C_TYPE_SINT32] = {"sint32", sizeof(int32_t)},
    [PROTOBUF_C_TYPE_SFIXED32] = {"sfixed32", sizeof(int32_t)},
    [PROTOBUF_C_TYPE_INT64] = {"int64", sizeof(int64_t)},
    [PROTOBUF_C_TYPE_SINT64] = {"sint64", sizeof(int64_t)},
    [PROTOBUF_C_TYPE_SFIXED64] = {"sfixed64", sizeof(int64_t)},
    [PROTOBUF_C_TYPE_UINT32] = {"uint32", sizeof(uint32_t)},
    [PROTOBUF_C_TYPE_FIXED32] = {"fixed32", sizeof(uint32_t)},
    [PROTOBUF_C_TYPE_UINT64] = {"uint64", sizeof(uint64_t)},
    [PROTOBUF_C_TYPE_FIXED64] = {"fixed64", sizeof(uint64_t)},
    [PROTOBUF_C_TYPE_FLOAT] = {"float", sizeof(float)},
    [PROTOBUF_C_TYPE_DOUBLE] = {"double", sizeof(double)},
    [PROTOBUF_C_TYPE_BOOL] = {"bool", sizeof(protobuf_c_boolean)},
    [PROTOBUF_C_TYPE_ENUM] = {"enum", sizeof(int)}, /* protoc-c forces int-sized enums */
    [PROTOBUF_C_TYPE_STRING] = {"string", sizeof(char *)},
    [PROTOBUF_C_TYPE_BYTES] = {"bytes", sizeof(ProtobufCBinaryData)},
    [PROTOBUF_C_TYPE_MESSAGE] = {"message", sizeof(ProtobufCMessage *)},
};

size_t pbj__elem_size(ProtobufCType t)
{
    return (unsigned)t < SVC_COUNTOF(types) ? types[t].size : 0;
}

const char *pbj__kind_name(ProtobufCType t)
{
    return (unsigned)t < SVC_COUNTOF(types) ? types[t].kind : "unknown";
}

/* ------------------------------------------------------------------------
 * Names
 * ------------------------------------------------------------------------ */

static char ascii_upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

size_t pbj__json_name(const char *proto_name, char *out, size_t cap)
{
    size_t n = 0;
    bool up = false;

    /* protoc's ToJsonName: drop '_', upper-case the next ASCII letter. */
    for (const char *p = proto_name; *p != '\0'; p++) {
        char c = *p;
        if (c == '_') {
            up = true;
            continue;
        }
        if (up)
            c = ascii_upper(c);
        up = false;
        if (n + 1 < cap)
            out[n] = c;
        n++;
    }
    if (cap > 0)
        out[n < cap ? n : cap - 1] = '\0';
    return n;
}

/* Whether the JSON name of proto_name is s[0..n), without building it. */
static bool json_name_equals(const char *proto_name, const char *s, size_t n)
{
    size_t i = 0;
    bool up = false;

    for (const char *p = proto_name; *p != '\0'; p++) {
        char c = *p;
        if (c == '_') {
            up = true;
            continue;
        }
        if (up)
            c = ascii_upper(c);
        up = false;
        if (i == n || s[i] != c)
            return false;
        i++;
    }
    return i == n;
}

static bool name_equals(const char *name, const char *s, size_t n)
{
    /* A NUL in s would end the comparison early; no field name has one. */
    return memchr(s, '\0', n) == NULL && strncmp(name, s, n) == 0 && name[n] == '\0';
}

const ProtobufCFieldDescriptor *pbj__field_by_name(const ProtobufCMessageDescriptor *d,
                                                   const char *s, size_t n)
{
    /* protojson tries the JSON name first, then the proto name. protoc
     * rejects a JSON name that collides with another field's name, so the
     * order only matters for hand-written descriptors. */
    for (unsigned i = 0; i < d->n_fields; i++)
        if (json_name_equals(d->fields[i].name, s, n))
            return &d->fields[i];
    for (unsigned i = 0; i < d->n_fields; i++)
        if (name_equals(d->fields[i].name, s, n))
            return &d->fields[i];
    return NULL;
}

/* Compares the NUL-terminated name with s[0..n) like strcmp would. */
static int cmp_name(const char *name, const char *s, size_t n)
{
    size_t i = 0;

    for (; i < n && name[i] != '\0'; i++)
        if (name[i] != s[i])
            return (unsigned char)name[i] < (unsigned char)s[i] ? -1 : 1;
    if (i < n)
        return -1; /* name is a proper prefix of s */
    return name[i] != '\0';
}

const ProtobufCEnumValue *pbj__enum_by_name(const ProtobufCEnumDescriptor *e, const char *s,
                                            size_t n)
{
    size_t lo = 0, hi = e->n_value_names;

    /* values_by_name is sorted by strcmp; a binary search that takes a
     * length, because the name comes from JSON and may hold a NUL. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_name(e->values_by_name[mid].name, s, n);
        if (c == 0)
            return &e->values[e->values_by_name[mid].index];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Maps
 * ------------------------------------------------------------------------ */

/* protoc's MapEntryName: "item_counts" -> "ItemCountsEntry". */
static bool is_entry_name(const char *field_name, const char *entry_name)
{
    const char *e = entry_name;
    bool up = true;

    for (const char *p = field_name; *p != '\0'; p++) {
        char c = *p;
        if (c == '_') {
            up = true;
            continue;
        }
        if (up)
            c = ascii_upper(c);
        up = false;
        if (*e++ != c)
            return false;
    }
    return strcmp(e, "Entry") == 0;
}

static bool valid_map_key(ProtobufCType t)
{
    return t != PROTOBUF_C_TYPE_FLOAT && t != PROTOBUF_C_TYPE_DOUBLE &&
           t != PROTOBUF_C_TYPE_BYTES && t != PROTOBUF_C_TYPE_ENUM && t != PROTOBUF_C_TYPE_MESSAGE;
}

bool pbj__is_map(const ProtobufCMessageDescriptor *parent, const ProtobufCFieldDescriptor *f)
{
    const ProtobufCMessageDescriptor *e = f->descriptor;
    size_t plen = strlen(parent->name);

    /* protobuf-c drops the map_entry option, so recognise the shape protoc
     * gives every map: a nested <Parent>.<CamelName>Entry type with exactly
     * key = 1 and value = 2. A hand-written message of that exact name and
     * shape is indistinguishable, and protoc rejects such a clash anyway. */
    if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE || e == NULL)
        return false;
    if (e->n_fields != 2 || e->fields[0].id != 1 || e->fields[1].id != 2 ||
        strcmp(e->fields[0].name, "key") != 0 || strcmp(e->fields[1].name, "value") != 0)
        return false;
    if (e->fields[0].label == PROTOBUF_C_LABEL_REPEATED ||
        e->fields[1].label == PROTOBUF_C_LABEL_REPEATED || !valid_map_key(e->fields[0].type))
        return false;
    return strncmp(e->name, parent->name, plen) == 0 && e->name[plen] == '.' &&
           is_entry_name(f->name, e->name + plen + 1);
}

/* ------------------------------------------------------------------------
 * Presence and order
 * ------------------------------------------------------------------------ */

bool pbj__has_presence(const ProtobufCFieldDescriptor *f)
{
    return f->type == PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_OPTIONAL;
}

bool pbj__has(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    const void *member = pbj__member(m, f);
    bool pointer = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE;

    if (pbj__is_oneof(f)) {
        /* The case says which member is set; a NULL pointer there would
         * crash protobuf-c's packer, so treat it as unset. */
        return *(const uint32_t *)pbj__quantifier(m, f) == f->id &&
               (!pointer || *(void *const *)member != NULL);
    }
    if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        return *(void *const *)member != NULL;
    if (f->label != PROTOBUF_C_LABEL_OPTIONAL)
        return true;
    /* proto2 optional: has_ flag, except strings, which have none and are
     * unset while they point at the default (protobuf-c's rule). */
    if (f->type == PROTOBUF_C_TYPE_STRING)
        return *(void *const *)member != NULL && *(void *const *)member != f->default_value;
    return *(const protobuf_c_boolean *)pbj__quantifier(m, f) != 0;
}

static int cmp_order(const void *a, const void *b)
{
    const pbj__order_t *x = a, *y = b;

    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

svc_err_t pbj__field_order(ProtobufCAllocator *a, const ProtobufCMessageDescriptor *d,
                           pbj__order_t *small, size_t n_small, pbj__order_t **out)
{
    pbj__order_t *keys = small;
    bool sorted = true;

    if (d->n_fields > n_small) {
        keys = pbj__alloc(a, d->n_fields * sizeof(*keys));
        if (keys == NULL)
            return SVC_ENOMEM;
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        keys[i] = (pbj__order_t){d->fields[i].offset, i};
        if (i > 0 && keys[i].offset < keys[i - 1].offset)
            sorted = false;
    }
    /* Declaration order equals number order in most messages; oneof
     * members share one offset and then keep number order. */
    if (!sorted)
        qsort(keys, d->n_fields, sizeof(*keys), cmp_order);
    *out = keys;
    return SVC_OK;
}

/* ------------------------------------------------------------------------
 * Message memory
 * ------------------------------------------------------------------------ */

svc_err_t pbj__msg_new(ProtobufCAllocator *a, const ProtobufCMessageDescriptor *d,
                       ProtobufCMessage **out)
{
    ProtobufCMessage *m;

    if (d == NULL || d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
        return SVC_EINVAL;
    m = pbj__alloc(a, d->sizeof_message);
    if (m == NULL)
        return SVC_ENOMEM;
    memset(m, 0, d->sizeof_message);
    if (d->message_init != NULL)
        d->message_init(m);
    else
        m->descriptor = d;
    *out = m;
    return SVC_OK;
}

char *pbj__strndup(ProtobufCAllocator *a, const char *s, size_t n)
{
    char *p = pbj__alloc(a, n + 1);

    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void pbj__value_dispose(ProtobufCAllocator *a, ProtobufCType t, pbj__value_t *v)
{
    if (t == PROTOBUF_C_TYPE_STRING)
        pbj__free(a, v->str);
    else if (t == PROTOBUF_C_TYPE_BYTES)
        pbj__free(a, v->bytes.data);
    else if (t == PROTOBUF_C_TYPE_MESSAGE)
        protobuf_c_message_free_unpacked(v->msg, pbj__allocator(a));
}

/* Frees what a singular field owns and puts its default back, with the
 * same tests as protobuf_c_message_free_unpacked(). */
static void clear_singular(ProtobufCAllocator *a, ProtobufCMessage *m,
                           const ProtobufCFieldDescriptor *f)
{
    void *member = pbj__member(m, f);

    if (f->type == PROTOBUF_C_TYPE_STRING) {
        char **s = member;
        if (*s != NULL && *s != f->default_value)
            pbj__free(a, *s);
        *s = (char *)f->default_value;
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
        ProtobufCBinaryData *b = member;
        const ProtobufCBinaryData *def = f->default_value;
        if (b->data != NULL && (def == NULL || b->data != def->data))
            pbj__free(a, b->data);
        *b = def != NULL ? *def : (ProtobufCBinaryData){0, NULL};
    } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        ProtobufCMessage **sub = member;
        if (*sub != NULL && *sub != f->default_value)
            protobuf_c_message_free_unpacked(*sub, pbj__allocator(a));
        *sub = NULL;
    }
}

/* For a oneof member: clears whichever member of the same oneof is set. */
static void clear_oneof(ProtobufCAllocator *a, ProtobufCMessage *m,
                        const ProtobufCFieldDescriptor *f)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    uint32_t *which = pbj__quantifier(m, f);

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *g = &d->fields[i];
        if (pbj__is_oneof(g) && g->quantifier_offset == f->quantifier_offset && g->id == *which)
            clear_singular(a, m, g);
    }
    *which = 0;
}

static void store(void *dst, ProtobufCType t, const pbj__value_t *v)
{
    memcpy(dst, v, pbj__elem_size(t));
}

void pbj__set(ProtobufCAllocator *a, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
              pbj__value_t *v)
{
    if (pbj__is_oneof(f))
        clear_oneof(a, m, f);
    else
        clear_singular(a, m, f);
    store(pbj__member(m, f), f->type, v);
    if (pbj__is_oneof(f))
        *(uint32_t *)pbj__quantifier(m, f) = f->id;
    else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
             f->type != PROTOBUF_C_TYPE_MESSAGE)
        *(protobuf_c_boolean *)pbj__quantifier(m, f) = 1;
}

svc_err_t pbj__append(ProtobufCAllocator *a, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                      size_t *cap, pbj__value_t *v)
{
    size_t *n = pbj__quantifier(m, f);
    void **arr = pbj__member(m, f);
    size_t elem = pbj__elem_size(f->type);
    svc_err_t err;

    err = pbj__array_grow(a, arr, *n, cap, elem);
    if (err != SVC_OK) {
        pbj__value_dispose(a, f->type, v);
        return err;
    }
    store((char *)*arr + *n * elem, f->type, v);
    (*n)++;
    return SVC_OK;
}
