/* SPDX-License-Identifier: Apache-2.0 */
/*
 * decode.c - JSON -> protobuf-c message, as protojson.UnmarshalOptions{
 * DiscardUnknown: true} reads it (the rules are in include/pbj/pbjson.h;
 * the protojson source is encoding/protojson/decode.go).
 *
 * Values are stored into the message as soon as they are read, and every
 * sub-message or array is attached before it is filled, so the message is
 * always in a state protobuf_c_message_free_unpacked() can release: on any
 * error, freeing the top-level message frees everything.
 */
#include <math.h>
#include <string.h>

#include "lex.h"

/* Fields seen in one JSON object: for duplicates, oneof conflicts and the
 * required-field check. Three bitsets of n_fields bits. */
typedef struct seen {
    uint64_t small[3 * 4];
    uint64_t *bits;
    size_t words;
} seen_t;

enum { SEEN_KEY, SEEN_ONEOF, SEEN_SET };

typedef struct msg_ctx {
    ProtobufCMessage *m;
    seen_t seen;
} msg_ctx_t;

static svc_err_t decode_object(pbj__dec_t *d, ProtobufCMessage *m);

/* ------------------------------------------------------------------------
 * Bookkeeping
 * ------------------------------------------------------------------------ */

static svc_err_t seen_init(pbj__dec_t *d, seen_t *s, unsigned n_fields)
{
    s->words = (n_fields + 63) / 64;
    s->bits = s->small;
    if (s->words * 3 > SVC_COUNTOF(s->small)) {
        s->bits = pbj__alloc(d->alloc, s->words * 3 * sizeof(uint64_t));
        if (s->bits == NULL)
            return pbj__nomem(d);
    }
    memset(s->bits, 0, s->words * 3 * sizeof(uint64_t));
    return SVC_OK;
}

static void seen_dispose(pbj__dec_t *d, seen_t *s)
{
    if (s->bits != s->small)
        pbj__free(d->alloc, s->bits);
}

static bool seen_get(const seen_t *s, int set, unsigned i)
{
    return (s->bits[(size_t)set * s->words + i / 64] >> (i % 64)) & 1;
}

static void seen_put(seen_t *s, int set, unsigned i)
{
    s->bits[(size_t)set * s->words + i / 64] |= UINT64_C(1) << (i % 64);
}

/* Marks every member of f's oneof (they share the case word). */
static void claim_oneof(seen_t *s, const ProtobufCMessageDescriptor *desc,
                        const ProtobufCFieldDescriptor *f)
{
    for (unsigned i = 0; i < desc->n_fields; i++)
        if (pbj__is_oneof(&desc->fields[i]) &&
            desc->fields[i].quantifier_offset == f->quantifier_offset)
            seen_put(s, SEEN_ONEOF, i);
}

static svc_err_t invalid_value(pbj__dec_t *d, const ProtobufCFieldDescriptor *f,
                               const pbj__tok_t *t)
{
    char name[PBJ__ERR_PIECE], raw[PBJ__ERR_PIECE];

    pbj__json_name(f->name, name, sizeof(name));
    return pbj__fail_at(d, t->start, "invalid value for %s field %s: %s", pbj__kind_name(f->type),
                        name, pbj__raw(d, t, raw));
}

/* ------------------------------------------------------------------------
 * Scalars
 * ------------------------------------------------------------------------ */

/* The text of a number given as a JSON number or as a string that holds
 * exactly one JSON number (protojson: no spaces, nothing else). */
static svc_err_t number_text(pbj__dec_t *d, const pbj__tok_t *t, const char **s, size_t *n,
                             bool *ok)
{
    svc_err_t err;

    *ok = false;
    if (t->kind == PBJ__T_NUM) {
        *s = d->in + t->start;
        *n = t->end - t->start;
        *ok = true;
        return SVC_OK;
    }
    if (t->kind != PBJ__T_STR)
        return SVC_OK;
    err = pbj__str_text(d, t, s, n);
    *ok = err == SVC_OK && *n > 0 && pbj__json_number_len(*s, *n) == *n;
    return err;
}

static bool is_wide(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_INT64 || t == PROTOBUF_C_TYPE_SINT64 ||
           t == PROTOBUF_C_TYPE_SFIXED64 || t == PROTOBUF_C_TYPE_UINT64 ||
           t == PROTOBUF_C_TYPE_FIXED64;
}

static bool is_unsigned(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_UINT32 || t == PROTOBUF_C_TYPE_FIXED32 ||
           t == PROTOBUF_C_TYPE_UINT64 || t == PROTOBUF_C_TYPE_FIXED64;
}

/* A JSON number's text as an integer of type t (enums are int32): whole
 * and in range, else false. */
static bool int_value(ProtobufCType t, const char *s, size_t n, pbj__value_t *v)
{
    uint64_t limit, mag;
    bool neg;

    if (t == PROTOBUF_C_TYPE_ENUM)
        t = PROTOBUF_C_TYPE_INT32;
    limit = is_wide(t) ? (is_unsigned(t) ? UINT64_MAX : (uint64_t)INT64_MAX)
                       : (is_unsigned(t) ? UINT32_MAX : (uint64_t)INT32_MAX);
    if (!pbj__json_integer(s, n, &neg, &mag))
        return false;
    /* The most negative value's magnitude is one above the maximum. */
    if (neg ? (is_unsigned(t) || mag > limit + 1) : mag > limit)
        return false;
    if (is_unsigned(t) && is_wide(t))
        v->u64 = mag;
    else if (is_unsigned(t))
        v->u32 = (uint32_t)mag;
    else if (is_wide(t))
        v->i64 = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    else
        v->i32 = (int32_t)(neg ? (int64_t)(0 - mag) : (int64_t)mag);
    return true;
}

/* Integer and enum-number fields: a whole number in range for the type. */
static svc_err_t decode_int(pbj__dec_t *d, const ProtobufCFieldDescriptor *f, const pbj__tok_t *t,
                            pbj__value_t *v)
{
    const char *s;
    size_t n;
    bool ok;
    svc_err_t err = number_text(d, t, &s, &n, &ok);

    if (err != SVC_OK)
        return err;
    if (!ok || !int_value(f->type, s, n, v))
        return invalid_value(d, f, t);
    return SVC_OK;
}

static bool text_is(const char *s, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(s, word, n) == 0;
}

static svc_err_t decode_float(pbj__dec_t *d, const ProtobufCFieldDescriptor *f, const pbj__tok_t *t,
                              pbj__value_t *v)
{
    unsigned bits = f->type == PROTOBUF_C_TYPE_FLOAT ? 32 : 64;
    const char *s;
    size_t n;
    double x = 0;
    bool ok, nomem = false;
    svc_err_t err = number_text(d, t, &s, &n, &ok);

    if (err != SVC_OK)
        return err;
    if (t->kind == PBJ__T_STR && !ok) {
        /* Only strings may spell the special values. */
        ok = true;
        if (text_is(s, n, "NaN"))
            x = NAN;
        else if (text_is(s, n, "Infinity"))
            x = INFINITY;
        else if (text_is(s, n, "-Infinity"))
            x = -INFINITY;
        else
            ok = false;
    } else if (ok) {
        ok = pbj__strtod(d->alloc, s, n, bits, &x, &nomem);
    }
    if (nomem)
        return pbj__nomem(d);
    if (!ok)
        return invalid_value(d, f, t);
    if (bits == 32)
        v->f32 = (float)x;
    else
        v->f64 = x;
    return SVC_OK;
}

/* Strings get their own allocation, except the empty value of a proto3
 * field, which keeps the shared default (protobuf-c never frees that). */
static svc_err_t decode_string(pbj__dec_t *d, const ProtobufCFieldDescriptor *f,
                               const pbj__tok_t *t, bool in_list, pbj__value_t *v)
{
    char name[PBJ__ERR_PIECE];
    size_t n;

    if (t->kind != PBJ__T_STR)
        return invalid_value(d, f, t);
    if (t->end - t->start == 2 && !in_list && f->label == PROTOBUF_C_LABEL_NONE &&
        !pbj__is_oneof(f)) {
        v->str = (char *)f->default_value;
        return SVC_OK;
    }
    v->str = pbj__alloc(d->alloc, t->end - t->start - 1);
    if (v->str == NULL)
        return pbj__nomem(d);
    n = pbj__unescape(d, t, v->str);
    v->str[n] = '\0';
    if (memchr(v->str, '\0', n) == NULL)
        return SVC_OK;
    pbj__free(d->alloc, v->str);
    pbj__json_name(f->name, name, sizeof(name));
    return pbj__fail_at(d, t->start,
                        "string field %s contains U+0000, which protobuf-c cannot store", name);
}

static svc_err_t decode_bytes(pbj__dec_t *d, const ProtobufCFieldDescriptor *f, const pbj__tok_t *t,
                              pbj__value_t *v)
{
    const char *s;
    size_t n, out_len = 0;
    uint8_t *out;
    svc_err_t err;

    if (t->kind != PBJ__T_STR)
        return invalid_value(d, f, t);
    err = pbj__str_text(d, t, &s, &n);
    if (err != SVC_OK)
        return err;
    v->bytes = (ProtobufCBinaryData){0, NULL};
    if (n == 0)
        return SVC_OK;
    out = pbj__alloc(d->alloc, n / 4 * 3 + 3);
    if (out == NULL)
        return pbj__nomem(d);
    if (!pbj__b64_decode_protojson(s, n, out, &out_len)) {
        pbj__free(d->alloc, out);
        return invalid_value(d, f, t);
    }
    if (out_len == 0) {
        pbj__free(d->alloc, out);
        out = NULL;
    }
    v->bytes = (ProtobufCBinaryData){out_len, out};
    return SVC_OK;
}

/* Enums: a name, or any int32. An unknown name sets *ignored. */
static svc_err_t decode_enum(pbj__dec_t *d, const ProtobufCFieldDescriptor *f, const pbj__tok_t *t,
                             pbj__value_t *v, bool *ignored)
{
    const ProtobufCEnumValue *ev;
    const char *s;
    size_t n;
    svc_err_t err;

    if (t->kind == PBJ__T_NUM) {
        if (!int_value(f->type, d->in + t->start, t->end - t->start, v))
            return invalid_value(d, f, t);
        v->e = v->i32;
        return SVC_OK;
    }
    if (t->kind != PBJ__T_STR)
        return invalid_value(d, f, t);
    err = pbj__str_text(d, t, &s, &n);
    if (err != SVC_OK)
        return err;
    ev = pbj__enum_by_name(f->descriptor, s, n);
    if (ev == NULL) {
        *ignored = true; /* DiscardUnknown also discards unknown enum names */
        return SVC_OK;
    }
    v->e = ev->value;
    return SVC_OK;
}

/* One scalar (not message) value of field f from token t. */
static svc_err_t decode_scalar(pbj__dec_t *d, const ProtobufCFieldDescriptor *f,
                               const pbj__tok_t *t, bool in_list, pbj__value_t *v, bool *ignored)
{
    *ignored = false;
    memset(v, 0, sizeof(*v));
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        if (t->kind != PBJ__T_TRUE && t->kind != PBJ__T_FALSE)
            return invalid_value(d, f, t);
        v->b = t->kind == PBJ__T_TRUE;
        return SVC_OK;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
        return decode_float(d, f, t, v);
    case PROTOBUF_C_TYPE_STRING:
        return decode_string(d, f, t, in_list, v);
    case PROTOBUF_C_TYPE_BYTES:
        return decode_bytes(d, f, t, v);
    case PROTOBUF_C_TYPE_ENUM:
        return decode_enum(d, f, t, v, ignored);
    case PROTOBUF_C_TYPE_MESSAGE:
        return invalid_value(d, f, t); /* not reached */
    default:
        return decode_int(d, f, t, v);
    }
}

/* ------------------------------------------------------------------------
 * Messages, lists, maps
 * ------------------------------------------------------------------------ */

/* A new sub-message for field f, attached to m (singular) or appended to
 * it (repeated) before it is filled. */
static svc_err_t decode_sub(pbj__dec_t *d, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            const pbj__tok_t *t, size_t *cap)
{
    pbj__value_t v;
    svc_err_t err;

    if (t->kind != PBJ__T_OBJ)
        return pbj__unexpected(d, t);
    err = pbj__msg_new(d->alloc, f->descriptor, &v.msg);
    if (err != SVC_OK)
        return pbj__nomem(d);
    if (cap == NULL)
        pbj__set(d->alloc, m, f, &v);
    else if (pbj__append(d->alloc, m, f, cap, &v) != SVC_OK)
        return pbj__nomem(d);
    return decode_object(d, v.msg);
}

typedef struct list_ctx {
    ProtobufCMessage *m;
    const ProtobufCFieldDescriptor *f;
    size_t cap;
} list_ctx_t;

static svc_err_t list_elem(pbj__dec_t *d, void *ctx)
{
    list_ctx_t *c = ctx;
    pbj__tok_t t;
    pbj__value_t v;
    bool ignored;
    svc_err_t err = pbj__next(d, &t);

    if (err != SVC_OK)
        return err;
    if (c->f->type == PROTOBUF_C_TYPE_MESSAGE)
        return decode_sub(d, c->m, c->f, &t, &c->cap);
    err = decode_scalar(d, c->f, &t, true, &v, &ignored);
    if (err != SVC_OK || ignored)
        return err;
    return pbj__append(d->alloc, c->m, c->f, &c->cap, &v) == SVC_OK ? SVC_OK : pbj__nomem(d);
}

static svc_err_t decode_list(pbj__dec_t *d, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                             const pbj__tok_t *t)
{
    list_ctx_t c = {m, f, 0};

    if (t->kind != PBJ__T_ARR)
        return pbj__unexpected(d, t);
    return pbj__read_array(d, list_elem, &c);
}

typedef struct map_ctx {
    ProtobufCMessage *m;
    const ProtobufCFieldDescriptor *f;
    size_t cap;
    pbj__tok_t *keys; /* key token of each entry, for the duplicate error */
    size_t keys_cap;
} map_ctx_t;

/* A map key is a JSON object name: strings as they are, integers in base
 * 10 (strconv.Parse*(key, 10, bits)), bools as "true"/"false". */
static svc_err_t parse_map_key(pbj__dec_t *d, const ProtobufCFieldDescriptor *kf,
                               const pbj__tok_t *key, pbj__value_t *v)
{
    char raw[PBJ__ERR_PIECE];
    const char *s;
    size_t n;
    bool ok = true;
    svc_err_t err = pbj__str_text(d, key, &s, &n);

    if (err != SVC_OK)
        return err;
    memset(v, 0, sizeof(*v));
    switch (kf->type) {
    case PROTOBUF_C_TYPE_STRING:
        if (memchr(s, '\0', n) != NULL)
            return pbj__fail_at(d, key->start,
                                "map key %s contains U+0000, which protobuf-c cannot store",
                                pbj__raw(d, key, raw));
        v->str = pbj__strndup(d->alloc, s, n);
        return v->str != NULL ? SVC_OK : pbj__nomem(d);
    case PROTOBUF_C_TYPE_BOOL:
        ok = text_is(s, n, "true") || text_is(s, n, "false");
        v->b = text_is(s, n, "true");
        break;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        ok = pbj__parse_int(s, n, 10, 32, &v->i64) == PBJ__NUM_OK;
        v->i32 = (int32_t)v->i64;
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        ok = pbj__parse_uint(s, n, 10, 32, &v->u64) == PBJ__NUM_OK;
        v->u32 = (uint32_t)v->u64;
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        ok = pbj__parse_uint(s, n, 10, 64, &v->u64) == PBJ__NUM_OK;
        break;
    default:
        ok = pbj__parse_int(s, n, 10, 64, &v->i64) == PBJ__NUM_OK;
        break;
    }
    if (!ok)
        return pbj__fail_at(d, key->start, "invalid value for %s key: %s", pbj__kind_name(kf->type),
                            pbj__raw(d, key, raw));
    return SVC_OK;
}

/* Drops the last entry of map field f (its value was an unknown enum name,
 * which protojson leaves out of the map). */
static void drop_last_entry(pbj__dec_t *d, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    size_t *n = pbj__quantifier(m, f);
    ProtobufCMessage **entries = *(ProtobufCMessage ***)pbj__member(m, f);

    (*n)--;
    pbj_message_free(entries[*n], d->alloc);
}

static svc_err_t map_value(pbj__dec_t *d, map_ctx_t *c, ProtobufCMessage *entry)
{
    const ProtobufCFieldDescriptor *vf = pbj__map_value(c->f);
    pbj__tok_t t;
    pbj__value_t v;
    bool ignored;
    svc_err_t err = pbj__next(d, &t);

    if (err != SVC_OK)
        return err;
    if (vf->type == PROTOBUF_C_TYPE_MESSAGE)
        return decode_sub(d, entry, vf, &t, NULL);
    err = decode_scalar(d, vf, &t, false, &v, &ignored);
    if (err == SVC_OK && ignored)
        drop_last_entry(d, c->m, c->f);
    else if (err == SVC_OK)
        pbj__set(d->alloc, entry, vf, &v);
    return err;
}

static svc_err_t map_member(pbj__dec_t *d, const pbj__tok_t *key, void *ctx)
{
    map_ctx_t *c = ctx;
    size_t n = *(size_t *)pbj__quantifier(c->m, c->f);
    pbj__value_t entry, k;
    svc_err_t err;

    if (pbj__array_grow(d->alloc, (void **)&c->keys, n, &c->keys_cap, sizeof(*c->keys)) != SVC_OK)
        return pbj__nomem(d);
    c->keys[n] = *key;
    if (pbj__msg_new(d->alloc, c->f->descriptor, &entry.msg) != SVC_OK)
        return pbj__nomem(d);
    if (pbj__append(d->alloc, c->m, c->f, &c->cap, &entry) != SVC_OK)
        return pbj__nomem(d);
    err = parse_map_key(d, pbj__map_key(c->f), key, &k);
    if (err != SVC_OK)
        return err;
    pbj__set(d->alloc, entry.msg, pbj__map_key(c->f), &k);
    return map_value(d, c, entry.msg);
}

static svc_err_t decode_map(pbj__dec_t *d, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            const pbj__tok_t *t)
{
    map_ctx_t c = {m, f, 0, NULL, 0};
    char raw[PBJ__ERR_PIECE];
    size_t dup, n;
    svc_err_t err;

    if (t->kind != PBJ__T_OBJ)
        return pbj__unexpected(d, t);
    err = pbj__read_object(d, map_member, &c);
    if (err != SVC_OK)
        goto out;
    /* Duplicates are found once the map is read (by sorting, so a large
     * map stays O(n log n)); the earliest repeat is reported. */
    n = *(size_t *)pbj__quantifier(m, f);
    err = pbj__map_first_duplicate(d->alloc, f, *(ProtobufCMessage * *const *)pbj__member(m, f), n,
                                   &dup);
    if (err != SVC_OK)
        err = pbj__nomem(d);
    else if (dup < n)
        err = pbj__fail_at(d, c.keys[dup].start, "duplicate map key %s",
                           pbj__raw(d, &c.keys[dup], raw));
out:
    pbj__free(d->alloc, c.keys);
    return err;
}

static svc_err_t decode_singular(pbj__dec_t *d, ProtobufCMessage *m,
                                 const ProtobufCFieldDescriptor *f, const pbj__tok_t *t,
                                 bool *stored)
{
    pbj__value_t v;
    bool ignored;
    svc_err_t err;

    *stored = true;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        return decode_sub(d, m, f, t, NULL);
    err = decode_scalar(d, f, t, false, &v, &ignored);
    if (err != SVC_OK || ignored) {
        *stored = false;
        return err;
    }
    pbj__set(d->alloc, m, f, &v);
    return SVC_OK;
}

/* Checks that f may be read now: not seen before (under either name), and
 * no other member of its oneof set. */
static svc_err_t claim_field(pbj__dec_t *d, msg_ctx_t *c, const ProtobufCFieldDescriptor *f,
                             const pbj__tok_t *key, bool is_null)
{
    const ProtobufCMessageDescriptor *desc = c->m->descriptor;
    unsigned i = (unsigned)(f - desc->fields);
    char raw[PBJ__ERR_PIECE];

    if (seen_get(&c->seen, SEEN_KEY, i))
        return pbj__fail_at(d, key->start, "duplicate field %s", pbj__raw(d, key, raw));
    seen_put(&c->seen, SEEN_KEY, i);
    /* null does not claim a oneof (protojson skips it before the check). */
    if (!pbj__is_oneof(f) || is_null)
        return SVC_OK;
    if (seen_get(&c->seen, SEEN_ONEOF, i))
        return pbj__fail_at(d, key->start,
                            "error parsing %s, another field of its oneof is already set",
                            pbj__raw(d, key, raw));
    claim_oneof(&c->seen, desc, f);
    return SVC_OK;
}

static svc_err_t message_member(pbj__dec_t *d, const pbj__tok_t *key, void *ctx)
{
    msg_ctx_t *c = ctx;
    const ProtobufCFieldDescriptor *f;
    pbj__tok_t t;
    const char *name;
    size_t n;
    bool stored = true;
    svc_err_t err = pbj__str_text(d, key, &name, &n);

    if (err == SVC_OK)
        err = pbj__next(d, &t);
    if (err != SVC_OK)
        return err;
    f = pbj__field_by_name(c->m->descriptor, name, n);
    if (f == NULL)
        return pbj__skip(d, &t); /* DiscardUnknown */
    err = claim_field(d, c, f, key, t.kind == PBJ__T_NULL);
    if (err != SVC_OK || t.kind == PBJ__T_NULL)
        return err; /* null leaves the field unset */
    if (f->label != PROTOBUF_C_LABEL_REPEATED)
        err = decode_singular(d, c->m, f, &t, &stored);
    else if (pbj__is_map(c->m->descriptor, f))
        err = decode_map(d, c->m, f, &t);
    else
        err = decode_list(d, c->m, f, &t);
    if (err == SVC_OK && stored)
        seen_put(&c->seen, SEEN_SET, (unsigned)(f - c->m->descriptor->fields));
    return err;
}

/* protojson runs proto.CheckInitialized after decoding (AllowPartial is
 * false): proto2 required fields must have been given a value. */
static svc_err_t check_required(pbj__dec_t *d, const msg_ctx_t *c)
{
    const ProtobufCMessageDescriptor *desc = c->m->descriptor;

    for (unsigned i = 0; i < desc->n_fields; i++) {
        if (desc->fields[i].label == PROTOBUF_C_LABEL_REQUIRED &&
            !seen_get(&c->seen, SEEN_SET, i)) {
            pbj__errf(d->errbuf, "required field %s.%s not set", desc->name, desc->fields[i].name);
            return SVC_EINVAL;
        }
    }
    return SVC_OK;
}

/* Reads the members of an object (its '{' already consumed) into m. */
static svc_err_t decode_object(pbj__dec_t *d, ProtobufCMessage *m)
{
    msg_ctx_t c = {.m = m};
    svc_err_t err = seen_init(d, &c.seen, m->descriptor->n_fields);

    if (err != SVC_OK)
        return err;
    err = pbj__read_object(d, message_member, &c);
    if (err == SVC_OK)
        err = check_required(d, &c);
    seen_dispose(d, &c.seen);
    return err;
}

static bool only_whitespace(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return false;
    return true;
}

svc_err_t pbj_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                     unsigned flags, ProtobufCAllocator *alloc, ProtobufCMessage **out,
                     char errbuf[static SVC_ERRBUF_LEN])
{
    pbj__dec_t d = {.in = json, .len = len, .alloc = alloc, .errbuf = errbuf};
    ProtobufCMessage *m = NULL;
    pbj__tok_t t;
    svc_err_t err;

    if (desc == NULL || desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC || out == NULL ||
        (json == NULL && len > 0)) {
        pbj__errf(errbuf, "pbj_decode: invalid argument");
        return SVC_EINVAL;
    }
    if (only_whitespace(json, len) && (flags & PBJ_DECODE_ALLOW_EMPTY) != 0) {
        err = pbj__msg_new(alloc, desc, &m);
        if (err != SVC_OK)
            return pbj__nomem(&d);
        *out = m;
        return SVC_OK;
    }
    if (only_whitespace(json, len)) {
        pbj__errf(errbuf, "empty input");
        return SVC_EINVAL;
    }
    err = pbj__next(&d, &t);
    if (err == SVC_OK && t.kind != PBJ__T_OBJ)
        err = pbj__unexpected(&d, &t);
    if (err == SVC_OK && pbj__msg_new(alloc, desc, &m) != SVC_OK)
        err = pbj__nomem(&d);
    /* Only the first JSON value is read: like the Go gateway, whatever
     * follows it is ignored. */
    if (err == SVC_OK)
        err = decode_object(&d, m);
    pbj__free(alloc, d.scratch);
    if (err != SVC_OK) {
        pbj_message_free(m, alloc);
        return err;
    }
    *out = m;
    return SVC_OK;
}

svc_err_t pbj_message_new(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                          ProtobufCMessage **out)
{
    if (out == NULL)
        return SVC_EINVAL;
    return pbj__msg_new(alloc, desc, out);
}

void pbj_message_free(ProtobufCMessage *msg, ProtobufCAllocator *alloc)
{
    if (msg != NULL)
        protobuf_c_message_free_unpacked(msg, pbj__allocator(alloc));
}
