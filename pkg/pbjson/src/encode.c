/* SPDX-License-Identifier: Apache-2.0 */
/*
 * encode.c - protobuf-c message -> JSON, as protojson.MarshalOptions{
 * EmitUnpopulated: true} writes it (the rules are in include/pbj/pbjson.h).
 *
 * Output goes to a buffer with a sticky error (see pbj__buf_t), so the code
 * below writes without checking each append; functions return an error only
 * for what makes the message itself unencodable.
 */
#include <stdint.h>
#include <string.h>

#include "internal.h"

typedef struct enc {
    pbj__buf_t buf;
    ProtobufCAllocator *alloc;
    char *errbuf;
} enc_t;

static svc_err_t encode_message(enc_t *e, const ProtobufCMessage *m, unsigned depth);

/* "<before> <full name> <after>": protojson names the field by its full
 * name in encoding errors ("field shopmicro.catalog.v1.Product.name
 * contains invalid UTF-8"). */
static svc_err_t field_error(enc_t *e, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                             const char *before, const char *after)
{
    pbj__errf(e->errbuf, "%s %s.%s %s", before, m->descriptor->name, f->name, after);
    return SVC_EINVAL;
}

/* An integer in decimal, as printf's %llu / %lld would write it (with a
 * minus sign when negative), without parsing a format: the gateway writes
 * two of them for every product it answers. */
static void put_uint(enc_t *e, bool quoted, bool negative, uint64_t v)
{
    char tmp[24], *p = tmp + sizeof tmp;

    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    if (negative)
        *--p = '-';
    if (quoted)
        pbj__buf_putc(&e->buf, '"');
    pbj__buf_put(&e->buf, p, (size_t)(tmp + sizeof tmp - p));
    if (quoted)
        pbj__buf_putc(&e->buf, '"');
}

static void put_sint(enc_t *e, bool quoted, int64_t v)
{
    /* The magnitude in unsigned arithmetic: -INT64_MIN does not fit. */
    put_uint(e, quoted, v < 0, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

static svc_err_t put_bytes(enc_t *e, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                           const ProtobufCBinaryData *b)
{
    char *dst;

    if (b->len > 0 && b->data == NULL)
        return field_error(e, m, f, "field", "holds bytes without data");
    pbj__buf_putc(&e->buf, '"');
    dst = pbj__buf_extend(&e->buf, pbj__b64_encoded_len(b->len));
    if (dst != NULL && b->len > 0)
        pbj__b64_encode(b->data, b->len, dst);
    pbj__buf_putc(&e->buf, '"');
    return SVC_OK;
}

static svc_err_t put_string(enc_t *e, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            const char *s)
{
    if (s == NULL)
        return field_error(e, m, f, "field", "holds a NULL string");
    if (!pbj__buf_put_json_string(&e->buf, s, strlen(s)))
        return field_error(e, m, f, "field", "contains invalid UTF-8");
    return SVC_OK;
}

static void put_enum(enc_t *e, const ProtobufCFieldDescriptor *f, int v)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, v);

    /* A number without a name (from a newer peer) is written as a number. */
    if (ev == NULL || !pbj__buf_put_json_string(&e->buf, ev->name, strlen(ev->name)))
        put_sint(e, false, v);
}

static void put_double(enc_t *e, double v, bool is_float)
{
    char tmp[PBJ__NUM_MAX];
    size_t n = is_float ? pbj__fmt_float((float)v, tmp) : pbj__fmt_double(v, tmp);

    pbj__buf_put(&e->buf, tmp, n);
}

/* One value of field f stored at v: a singular member or a list element.
 * `m` is the containing message, for error messages. */
static svc_err_t encode_value(enc_t *e, const ProtobufCMessage *m,
                              const ProtobufCFieldDescriptor *f, const void *v, unsigned depth)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        put_sint(e, false, *(const int32_t *)v);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        put_uint(e, false, false, *(const uint32_t *)v);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        put_sint(e, true, *(const int64_t *)v);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        put_uint(e, true, false, *(const uint64_t *)v);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        put_double(e, *(const float *)v, true);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        put_double(e, *(const double *)v, false);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        pbj__buf_puts(&e->buf, *(const protobuf_c_boolean *)v ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_ENUM:
        put_enum(e, f, *(const int *)v);
        break;
    case PROTOBUF_C_TYPE_BYTES:
        return put_bytes(e, m, f, v);
    case PROTOBUF_C_TYPE_STRING:
        return put_string(e, m, f, *(const char *const *)v);
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)v;
        if (sub == NULL)
            return field_error(e, m, f, "field", "holds a NULL message");
        return encode_message(e, sub, depth + 1);
    }
    }
    return SVC_OK;
}

static svc_err_t encode_list(enc_t *e, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                             unsigned depth)
{
    size_t n = *(const size_t *)pbj__quantifier(m, f);
    const char *arr = *(const char *const *)pbj__member(m, f);
    size_t elem = pbj__elem_size(f->type);
    svc_err_t err = SVC_OK;

    pbj__buf_putc(&e->buf, '[');
    for (size_t i = 0; i < n && err == SVC_OK; i++) {
        if (i > 0)
            pbj__buf_putc(&e->buf, ',');
        err = encode_value(e, m, f, arr + i * elem, depth);
    }
    pbj__buf_putc(&e->buf, ']');
    return err;
}

/* A map key is always a JSON string: integers and bools are quoted. */
static svc_err_t encode_map_key(enc_t *e, const ProtobufCMessage *entry,
                                const ProtobufCFieldDescriptor *kf)
{
    const void *k = pbj__member(entry, kf);

    switch (kf->type) {
    case PROTOBUF_C_TYPE_STRING:
        return encode_value(e, entry, kf, k, 0);
    case PROTOBUF_C_TYPE_BOOL:
        pbj__buf_puts(&e->buf, *(const protobuf_c_boolean *)k ? "\"true\"" : "\"false\"");
        return SVC_OK;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        put_sint(e, true, *(const int32_t *)k);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        put_uint(e, true, false, *(const uint32_t *)k);
        break;
    default:
        return encode_value(e, entry, kf, k, 0); /* 64-bit: already quoted */
    }
    return SVC_OK;
}

/* A map value message that is not set is written as the default message,
 * with all its fields (Go maps never hold a nil message). */
static svc_err_t encode_map_value(enc_t *e, const ProtobufCMessage *entry,
                                  const ProtobufCFieldDescriptor *vf, unsigned depth)
{
    const void *v = pbj__member(entry, vf);
    ProtobufCMessage *def = NULL;
    svc_err_t err;

    if (vf->type != PROTOBUF_C_TYPE_MESSAGE || *(void *const *)v != NULL)
        return encode_value(e, entry, vf, v, depth);
    err = pbj__msg_new(e->alloc, vf->descriptor, &def);
    if (err == SVC_OK)
        err = encode_message(e, def, depth + 1);
    else
        pbj__errf(e->errbuf, "out of memory");
    pbj_message_free(def, e->alloc);
    return err;
}

static svc_err_t encode_map(enc_t *e, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            unsigned depth)
{
    size_t n = *(const size_t *)pbj__quantifier(m, f), n_order = 0;
    ProtobufCMessage *const *entries = *(ProtobufCMessage *const *const *)pbj__member(m, f);
    size_t *order = NULL;
    svc_err_t err;

    for (size_t i = 0; i < n; i++)
        if (entries[i] == NULL)
            return field_error(e, m, f, "map field", "holds a NULL entry");
    err = pbj__map_order(e->alloc, f, entries, n, &order, &n_order);
    if (err != SVC_OK) {
        pbj__errf(e->errbuf, "out of memory");
        return err;
    }
    pbj__buf_putc(&e->buf, '{');
    for (size_t i = 0; i < n_order && err == SVC_OK; i++) {
        const ProtobufCMessage *entry = entries[order[i]];
        if (i > 0)
            pbj__buf_putc(&e->buf, ',');
        err = encode_map_key(e, entry, pbj__map_key(f));
        pbj__buf_putc(&e->buf, ':');
        if (err == SVC_OK)
            err = encode_map_value(e, entry, pbj__map_value(f), depth);
    }
    pbj__buf_putc(&e->buf, '}');
    pbj__free(e->alloc, order);
    return err;
}

static svc_err_t encode_field(enc_t *e, const ProtobufCMessage *m,
                              const ProtobufCFieldDescriptor *f, unsigned depth)
{
    const void *member = pbj__member(m, f);

    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return pbj__is_map(m->descriptor, f) ? encode_map(e, m, f, depth)
                                             : encode_list(e, m, f, depth);
    if (pbj__has_presence(f) && !pbj__has(m, f)) {
        if (f->label == PROTOBUF_C_LABEL_REQUIRED)
            return field_error(e, m, f, "required field", "not set");
        pbj__buf_puts(&e->buf, "null");
        return SVC_OK;
    }
    if (f->label == PROTOBUF_C_LABEL_REQUIRED && f->type == PROTOBUF_C_TYPE_STRING &&
        *(const char *const *)member == NULL)
        return field_error(e, m, f, "required field", "not set");
    /* A proto3 string left NULL by hand-built code means "". */
    if (f->type == PROTOBUF_C_TYPE_STRING && *(const char *const *)member == NULL) {
        pbj__buf_puts(&e->buf, "\"\"");
        return SVC_OK;
    }
    return encode_value(e, m, f, member, depth);
}

static void put_name(enc_t *e, const ProtobufCFieldDescriptor *f)
{
    char small[64];
    size_t n = pbj__json_name(f->name, small, sizeof(small));
    char *name = pbj__buf_extend(&e->buf, n + 3);

    if (name == NULL)
        return;
    name[0] = '"';
    if (n < sizeof(small))
        memcpy(name + 1, small, n);
    else
        pbj__json_name(f->name, name + 1, n + 1);
    name[n + 1] = '"';
    name[n + 2] = ':';
}

static svc_err_t encode_message(enc_t *e, const ProtobufCMessage *m, unsigned depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    pbj__order_t small[32], *order = NULL;
    bool first = true;
    svc_err_t err;

    if (d == NULL || d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC) {
        pbj__errf(e->errbuf, "not a protobuf-c message");
        return SVC_EINVAL;
    }
    if (depth > PBJ_MAX_DEPTH) {
        pbj__errf(e->errbuf, "message nesting exceeds %u levels", PBJ_MAX_DEPTH);
        return SVC_EINVAL;
    }
    err = pbj__field_order(e->alloc, d, small, SVC_COUNTOF(small), &order);
    if (err != SVC_OK) {
        pbj__errf(e->errbuf, "out of memory");
        return err;
    }
    pbj__buf_putc(&e->buf, '{');
    for (unsigned i = 0; i < d->n_fields && err == SVC_OK; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[order[i].index];
        /* EmitUnpopulated still omits unset oneof members. */
        if (pbj__is_oneof(f) && !pbj__has(m, f))
            continue;
        if (!first)
            pbj__buf_putc(&e->buf, ',');
        first = false;
        put_name(e, f);
        err = encode_field(e, m, f, depth);
    }
    pbj__buf_putc(&e->buf, '}');
    if (order != small)
        pbj__free(e->alloc, order);
    return err;
}

/* pbj_encode with the output cap as a parameter, so that tests can reach
 * the limit without building a 64 MiB message. */
svc_err_t pbj__encode_max(const ProtobufCMessage *msg, ProtobufCAllocator *alloc, size_t max,
                          char **out, size_t *out_len, char errbuf[static SVC_ERRBUF_LEN]);
svc_err_t pbj__encode_max(const ProtobufCMessage *msg, ProtobufCAllocator *alloc, size_t max,
                          char **out, size_t *out_len, char errbuf[static SVC_ERRBUF_LEN])
{
    enc_t e = {.alloc = alloc, .errbuf = errbuf};
    svc_err_t err;

    if (msg == NULL || out == NULL || out_len == NULL) {
        pbj__errf(errbuf, "pbj_encode: NULL argument");
        return SVC_EINVAL;
    }
    pbj__buf_init(&e.buf, alloc, max);
    err = encode_message(&e, msg, 1);
    if (err == SVC_OK && e.buf.err != SVC_OK) {
        err = e.buf.err;
        if (err == SVC_EEXHAUSTED)
            pbj__errf(errbuf, "encoded JSON exceeds %zu bytes", max);
        else
            pbj__errf(errbuf, "out of memory");
    }
    if (err != SVC_OK) {
        pbj__buf_dispose(&e.buf);
        return err;
    }
    *out = e.buf.data;
    *out_len = e.buf.len;
    return SVC_OK;
}

svc_err_t pbj_encode(const ProtobufCMessage *msg, ProtobufCAllocator *alloc, char **out,
                     size_t *out_len, char errbuf[static SVC_ERRBUF_LEN])
{
    return pbj__encode_max(msg, alloc, PBJ_MAX_OUTPUT, out, out_len, errbuf);
}
