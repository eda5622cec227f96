/* SPDX-License-Identifier: Apache-2.0 */
/*
 * text.c - setting fields from URL text: query parameters as grpc-gateway's
 * DefaultQueryParser does (runtime/query.go) and path variables as its
 * generated handlers do (runtime/convert.go for top-level fields,
 * PopulateFieldFromPath for nested ones).
 *
 * Error texts copy Go's, strconv wording included, because they reach the
 * client as the message of a 400.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

typedef enum { MODE_QUERY, MODE_PATH } text_mode_t;

/* Where a failed conversion explains itself (the part after "error: "). */
typedef struct why {
    char text[SVC_ERRBUF_LEN];
} why_t;

static svc_err_t set_why(why_t *w, const char *fmt, ...) PBJ__FMT(2, 3);
static svc_err_t set_why(why_t *w, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(w->text, sizeof(w->text), fmt, ap);
    va_end(ap);
    pbj__utf8_trim_tail(w->text);
    return SVC_EINVAL;
}

/* Prefixes the explanation: `<what> "<name>": <previous text>`. */
static svc_err_t wrap_why(why_t *w, const char *what, const char *name)
{
    char inner[sizeof(w->text)];

    memcpy(inner, w->text, sizeof(inner));
    return set_why(w, "%s \"%s\": %s", what, name, inner);
}

/* strconv's *NumError text: strconv.ParseInt: parsing "x": invalid syntax */
static svc_err_t num_why(why_t *w, const char *fn, pbj_str_t s, pbj__numerr_t r)
{
    char q[PBJ__ERR_PIECE];

    pbj__quote(s.ptr, s.len, q, sizeof(q));
    return set_why(w, "strconv.%s: parsing %s: %s", fn, q,
                   r == PBJ__NUM_RANGE ? "value out of range" : "invalid syntax");
}

static bool is_signed_int(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_INT32 || t == PROTOBUF_C_TYPE_SINT32 ||
           t == PROTOBUF_C_TYPE_SFIXED32 || t == PROTOBUF_C_TYPE_INT64 ||
           t == PROTOBUF_C_TYPE_SINT64 || t == PROTOBUF_C_TYPE_SFIXED64;
}

static unsigned int_bits(ProtobufCType t)
{
    return pbj__elem_size(t) == 8 ? 64 : 32;
}

/* strconv.ParseInt / ParseUint(s, base, the field's bit size). */
static svc_err_t int_from_text(const ProtobufCFieldDescriptor *f, int base, pbj_str_t s,
                               pbj__value_t *v, why_t *w)
{
    unsigned bits = int_bits(f->type);
    pbj__numerr_t r;
    int64_t i;
    uint64_t u;

    if (!is_signed_int(f->type)) {
        r = pbj__parse_uint(s.ptr, s.len, base, bits, &u);
        if (bits == 64)
            v->u64 = u;
        else
            v->u32 = (uint32_t)u;
        return r == PBJ__NUM_OK ? SVC_OK : num_why(w, "ParseUint", s, r);
    }
    r = pbj__parse_int(s.ptr, s.len, base, bits, &i);
    if (bits == 64)
        v->i64 = i;
    else
        v->i32 = (int32_t)i;
    return r == PBJ__NUM_OK ? SVC_OK : num_why(w, "ParseInt", s, r);
}

/* Query: a value name, or the number (strconv.Atoi) of a defined value.
 * Path: the same, but the number is read like runtime.Int32 (base 0). */
static svc_err_t enum_from_text(const ProtobufCFieldDescriptor *f, text_mode_t mode, pbj_str_t s,
                                pbj__value_t *v, why_t *w)
{
    const ProtobufCEnumValue *ev = pbj__enum_by_name(f->descriptor, s.ptr, s.len);
    char q[PBJ__ERR_PIECE];
    int64_t x;

    if (ev == NULL &&
        pbj__parse_int(s.ptr, s.len, mode == MODE_PATH ? 0 : 10, mode == MODE_PATH ? 32 : 64, &x) ==
            PBJ__NUM_OK &&
        x >= INT32_MIN && x <= INT32_MAX)
        ev = protobuf_c_enum_descriptor_get_value(f->descriptor, (int)x);
    if (ev == NULL) {
        pbj__quote(s.ptr, s.len, q, sizeof(q));
        if (mode == MODE_PATH) /* runtime.Enum: "%s is not valid" (unquoted) */
            return set_why(w, "%.*s is not valid", (int)(strlen(q) - 2), q + 1);
        return set_why(w, "%s is not a valid value", q);
    }
    v->e = ev->value;
    return SVC_OK;
}

/* runtime.Bytes: padded standard base64, else padded URL base64. */
static svc_err_t bytes_from_text(ProtobufCAllocator *a, pbj_str_t s, pbj__value_t *v, why_t *w)
{
    uint8_t *out = NULL;
    size_t n = 0;

    v->bytes = (ProtobufCBinaryData){0, NULL};
    if (s.len == 0)
        return SVC_OK;
    out = pbj__alloc(a, s.len / 4 * 3 + 3);
    if (out == NULL)
        return SVC_ENOMEM;
    if (!pbj__b64_decode(s.ptr, s.len, false, true, out, &n) &&
        !pbj__b64_decode(s.ptr, s.len, true, true, out, &n)) {
        pbj__free(a, out);
        return set_why(w, "illegal base64 data");
    }
    if (n == 0) {
        pbj__free(a, out);
        out = NULL;
    }
    v->bytes = (ProtobufCBinaryData){n, out};
    return SVC_OK;
}

static svc_err_t string_from_text(ProtobufCAllocator *a, pbj_str_t s, pbj__value_t *v, why_t *w)
{
    /* Go would pass these on and grpc-go would then refuse to marshal the
     * request; saying so here gives the client a 400 instead of a 500. */
    if (!pbj__utf8_valid(s.ptr, s.len))
        return set_why(w, "invalid UTF-8");
    if (memchr(s.ptr, '\0', s.len) != NULL)
        return set_why(w, "contains U+0000");
    v->str = pbj__strndup(a, s.ptr, s.len);
    return v->str != NULL ? SVC_OK : SVC_ENOMEM;
}

/* Go's parseField (query) or runtime.<Type> (path) for one value of f. */
static svc_err_t value_from_text(ProtobufCAllocator *a, const ProtobufCFieldDescriptor *f,
                                 text_mode_t mode, pbj_str_t s, pbj__value_t *v, why_t *w)
{
    char q[PBJ__ERR_PIECE];
    pbj__numerr_t r;
    double x = 0;
    bool b, nomem;

    memset(v, 0, sizeof(*v));
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        if (!pbj__parse_bool(s.ptr, s.len, &b)) {
            pbj__quote(s.ptr, s.len, q, sizeof(q));
            return set_why(w, "strconv.ParseBool: parsing %s: invalid syntax", q);
        }
        v->b = b;
        return SVC_OK;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
        r = pbj__parse_float(a, s.ptr, s.len, f->type == PROTOBUF_C_TYPE_FLOAT ? 32 : 64, &x,
                             &nomem);
        if (nomem)
            return SVC_ENOMEM;
        if (r != PBJ__NUM_OK)
            return num_why(w, "ParseFloat", s, r);
        if (f->type == PROTOBUF_C_TYPE_FLOAT)
            v->f32 = (float)x;
        else
            v->f64 = x;
        return SVC_OK;
    case PROTOBUF_C_TYPE_ENUM:
        return enum_from_text(f, mode, s, v, w);
    case PROTOBUF_C_TYPE_STRING:
        return string_from_text(a, s, v, w);
    case PROTOBUF_C_TYPE_BYTES:
        return bytes_from_text(a, s, v, w);
    case PROTOBUF_C_TYPE_MESSAGE:
        /* grpc-gateway only parses well-known types from text. */
        return set_why(w, "unsupported message type: \"%s\"",
                       ((const ProtobufCMessageDescriptor *)f->descriptor)->name);
    default:
        return int_from_text(f, mode == MODE_PATH ? 0 : 10, s, v, w);
    }
}

/* ------------------------------------------------------------------------
 * Field paths
 * ------------------------------------------------------------------------ */

typedef struct path {
    pbj_str_t seg[PBJ_MAX_DEPTH];
    size_t n;
} path_t;

/* strings.Split(s, "."); false when there are more than PBJ_MAX_DEPTH
 * parts (no message nests deeper than the encoder accepts). */
static bool split_path(pbj_str_t s, path_t *p)
{
    size_t start = 0;

    p->n = 0;
    for (size_t i = 0; i <= s.len; i++) {
        if (i < s.len && s.ptr[i] != '.')
            continue;
        if (p->n == PBJ_MAX_DEPTH)
            return false;
        p->seg[p->n++] = (pbj_str_t){s.ptr + start, i - start};
        start = i + 1;
    }
    return true;
}

static const ProtobufCFieldDescriptor *lookup(const ProtobufCMessageDescriptor *d, pbj_str_t s)
{
    return pbj__field_by_name(d, s.ptr, s.len);
}

static bool is_singular_message(const ProtobufCFieldDescriptor *f)
{
    return f->type == PROTOBUF_C_TYPE_MESSAGE && f->label != PROTOBUF_C_LABEL_REPEATED;
}

/* normalizeFieldPath: the proto names of the fields the key names, or the
 * key's own parts if it names no field. */
static void normalize(const ProtobufCMessageDescriptor *d, const path_t *key, path_t *norm)
{
    *norm = *key;
    for (size_t i = 0; i < key->n; i++) {
        const ProtobufCFieldDescriptor *f = lookup(d, key->seg[i]);
        if (f == NULL || (i + 1 < key->n && !is_singular_message(f))) {
            *norm = *key;
            return;
        }
        norm->seg[i] = (pbj_str_t){f->name, strlen(f->name)};
        d = f->descriptor;
    }
}

/* utilities.DoubleArray.HasCommonPrefix: some bound path is a prefix of
 * the key's (normalized) path. */
static bool is_bound(const path_t *norm, const char *const *bound, size_t n_bound)
{
    for (size_t b = 0; b < n_bound; b++) {
        path_t bp;
        size_t i = 0;
        if (bound[b] == NULL || !split_path((pbj_str_t){bound[b], strlen(bound[b])}, &bp) ||
            bp.n > norm->n)
            continue;
        while (i < bp.n && bp.seg[i].len == norm->seg[i].len &&
               memcmp(bp.seg[i].ptr, norm->seg[i].ptr, bp.seg[i].len) == 0)
            i++;
        if (i == bp.n)
            return true;
    }
    return false;
}

/* Go refuses to set a oneof member while another member is set (setting
 * the same message member again is fine: it is how a.x=1&a.y=2 works). */
static svc_err_t check_oneof(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, why_t *w)
{
    uint32_t which;

    if (!pbj__is_oneof(f))
        return SVC_OK;
    which = *(const uint32_t *)pbj__quantifier(m, f);
    if (which == 0 || (f->type == PROTOBUF_C_TYPE_MESSAGE && which == f->id))
        return SVC_OK;
    return set_why(w, "field already set for the oneof of \"%s\"", f->name);
}

/* Walks all but the last part of p, creating sub-messages as needed.
 * leaf_msg and leaf get the message and the field the last part names;
 * leaf is set to NULL if some part names no field. */
static svc_err_t walk(ProtobufCAllocator *a, ProtobufCMessage *m, const path_t *p,
                      ProtobufCMessage **leaf_msg, const ProtobufCFieldDescriptor **leaf, why_t *w)
{
    for (size_t i = 0;; i++) {
        const ProtobufCFieldDescriptor *f = lookup(m->descriptor, p->seg[i]);
        ProtobufCMessage **sub;
        svc_err_t err;
        *leaf = f;
        *leaf_msg = m;
        if (f == NULL)
            return SVC_OK;
        err = check_oneof(m, f, w);
        if (err != SVC_OK || i + 1 == p->n)
            return err;
        if (!is_singular_message(f))
            return set_why(w, "invalid path: \"%.*s\" is not a message", (int)p->seg[i].len,
                           p->seg[i].ptr);
        sub = pbj__member(m, f);
        if (!pbj__has(m, f)) {
            pbj__value_t v;
            err = pbj__msg_new(a, f->descriptor, &v.msg);
            if (err != SVC_OK)
                return err;
            pbj__set(a, m, f, &v);
        }
        m = *sub;
    }
}

/* ------------------------------------------------------------------------
 * Storing
 * ------------------------------------------------------------------------ */

static bool same_key(const ProtobufCFieldDescriptor *kf, const void *x, const pbj__value_t *k)
{
    if (kf->type == PROTOBUF_C_TYPE_STRING) {
        const char *have = *(const char *const *)x;
        return strcmp(have != NULL ? have : "", k->str) == 0;
    }
    return memcmp(x, k, pbj__elem_size(kf->type)) == 0;
}

/* populateMapField: values are the key and the value; an existing entry
 * with the same key gets the new value (a Go map assignment). */
static svc_err_t set_map(ProtobufCAllocator *a, ProtobufCMessage *m,
                         const ProtobufCFieldDescriptor *f, const pbj_str_t *values, size_t n,
                         why_t *w)
{
    const ProtobufCFieldDescriptor *kf = pbj__map_key(f), *vf = pbj__map_value(f);
    size_t n_entries = *(size_t *)pbj__quantifier(m, f), cap = 0;
    ProtobufCMessage **entries = *(ProtobufCMessage ***)pbj__member(m, f);
    pbj__value_t k, v, e;
    char q[PBJ__ERR_PIECE];
    svc_err_t err;

    if (n != 2) {
        pbj__quote(values[0].ptr, values[0].len, q, sizeof(q));
        return set_why(w, "more than one value provided for key %s in map \"%s.%s\"", q,
                       m->descriptor->name, f->name);
    }
    err = value_from_text(a, kf, MODE_QUERY, values[0], &k, w);
    if (err != SVC_OK)
        return err == SVC_EINVAL ? wrap_why(w, "parsing map key", f->name) : err;
    err = value_from_text(a, vf, MODE_QUERY, values[1], &v, w);
    if (err != SVC_OK) {
        pbj__value_dispose(a, kf->type, &k);
        return err == SVC_EINVAL ? wrap_why(w, "parsing map value", f->name) : err;
    }
    for (size_t i = 0; i < n_entries; i++) {
        if (same_key(kf, pbj__member(entries[i], kf), &k)) {
            pbj__value_dispose(a, kf->type, &k);
            pbj__set(a, entries[i], vf, &v);
            return SVC_OK;
        }
    }
    err = pbj__msg_new(a, f->descriptor, &e.msg);
    if (err == SVC_OK) {
        pbj__set(a, e.msg, kf, &k);
        pbj__set(a, e.msg, vf, &v);
        return pbj__append(a, m, f, &cap, &e);
    }
    pbj__value_dispose(a, kf->type, &k);
    pbj__value_dispose(a, vf->type, &v);
    return err;
}

static svc_err_t append_values(ProtobufCAllocator *a, ProtobufCMessage *m,
                               const ProtobufCFieldDescriptor *f, text_mode_t mode,
                               const pbj_str_t *values, size_t n, why_t *w)
{
    size_t cap = 0;

    for (size_t i = 0; i < n; i++) {
        pbj__value_t v;
        svc_err_t err = value_from_text(a, f, mode, values[i], &v, w);
        if (err == SVC_OK)
            err = pbj__append(a, m, f, &cap, &v);
        if (err != SVC_OK)
            return err;
    }
    return SVC_OK;
}

/* strings.Join(values, ", "), shortened. */
static void join_values(const pbj_str_t *values, size_t n, char *out, size_t cap)
{
    size_t o = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n && o + 8 < cap; i++) {
        char piece[PBJ__ERR_PIECE];
        pbj__excerpt(values[i].ptr, values[i].len, piece, sizeof(piece));
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i > 0 ? ", " : "", piece);
    }
    if (o >= cap)
        out[cap - 1] = '\0';
}

/* populateFieldValueFromPath after the walk: the leaf field gets values. */
static svc_err_t set_leaf(ProtobufCAllocator *a, ProtobufCMessage *m,
                          const ProtobufCFieldDescriptor *f, const pbj_str_t *values, size_t n,
                          why_t *w)
{
    pbj__value_t v;
    char joined[SVC_ERRBUF_LEN];
    svc_err_t err;

    if (f->label == PROTOBUF_C_LABEL_REPEATED && pbj__is_map(m->descriptor, f))
        return set_map(a, m, f, values, n, w);
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        err = append_values(a, m, f, MODE_QUERY, values, n, w);
        return err == SVC_EINVAL ? wrap_why(w, "parsing list", f->name) : err;
    }
    if (n > 1) {
        join_values(values, n, joined, sizeof(joined));
        return set_why(w, "too many values for field \"%s\": %s", f->name, joined);
    }
    err = value_from_text(a, f, MODE_QUERY, values[0], &v, w);
    if (err == SVC_EINVAL)
        return wrap_why(w, "parsing field", f->name);
    if (err == SVC_OK)
        pbj__set(a, m, f, &v);
    return err;
}

/* ------------------------------------------------------------------------
 * Public entry points
 * ------------------------------------------------------------------------ */

/* "m[k]" names entry k of map m (valuesKeyRegexp `^(.*)\[(.*)\]$`; Go's
 * '.' does not match '\n'). The key moves to the front of the values. */
static bool split_map_key(pbj_str_t key, pbj_str_t *name, pbj_str_t *entry)
{
    const char *lb;

    if (key.len < 2 || key.ptr[key.len - 1] != ']' || memchr(key.ptr, '\n', key.len) != NULL)
        return false;
    for (lb = key.ptr + key.len - 1; lb > key.ptr && lb[-1] != '['; lb--)
        ;
    if (lb == key.ptr)
        return false;
    *name = (pbj_str_t){key.ptr, (size_t)(lb - 1 - key.ptr)};
    *entry = (pbj_str_t){lb, (size_t)(key.ptr + key.len - 1 - lb)};
    return true;
}

static svc_err_t finish(svc_err_t err, const why_t *w, char errbuf[static SVC_ERRBUF_LEN])
{
    if (err == SVC_EINVAL)
        pbj__errf(errbuf, "%s", w->text);
    else if (err == SVC_ENOMEM)
        pbj__errf(errbuf, "out of memory");
    return err;
}

static bool valid_message(const ProtobufCMessage *m)
{
    return m != NULL && m->descriptor != NULL &&
           m->descriptor->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC;
}

/* Applies values to the field key names (after the map-key split). */
static svc_err_t apply_query(ProtobufCAllocator *a, ProtobufCMessage *m, pbj_str_t key,
                             const pbj_str_t *values, size_t n, const char *const *bound,
                             size_t n_bound, why_t *w)
{
    const ProtobufCFieldDescriptor *leaf;
    ProtobufCMessage *leaf_msg;
    path_t p, norm;
    svc_err_t err;

    if (!split_path(key, &p))
        return set_why(w, "field path has more than %u parts", PBJ_MAX_DEPTH);
    normalize(m->descriptor, &p, &norm);
    if (is_bound(&norm, bound, n_bound))
        return SVC_OK;
    err = walk(a, m, &p, &leaf_msg, &leaf, w);
    if (err != SVC_OK || leaf == NULL)
        return err; /* a key that names no field is ignored */
    return set_leaf(a, leaf_msg, leaf, values, n, w);
}

svc_err_t pbj_set_query_param(ProtobufCMessage *msg, ProtobufCAllocator *alloc, pbj_str_t key,
                              const pbj_str_t *values, size_t n_values, const char *const *bound,
                              size_t n_bound, char errbuf[static SVC_ERRBUF_LEN])
{
    pbj_str_t name, entry, *with_key = NULL;
    why_t w = {{0}};
    svc_err_t err;

    if (!valid_message(msg) || values == NULL || n_values == 0 || key.ptr == NULL) {
        pbj__errf(errbuf, "pbj_set_query_param: invalid argument");
        return SVC_EINVAL;
    }
    if (!split_map_key(key, &name, &entry))
        return finish(apply_query(alloc, msg, key, values, n_values, bound, n_bound, &w), &w,
                      errbuf);
    with_key = pbj__alloc(alloc, (n_values + 1) * sizeof(*with_key));
    if (with_key == NULL)
        return finish(SVC_ENOMEM, &w, errbuf);
    with_key[0] = entry;
    memcpy(with_key + 1, values, n_values * sizeof(*values));
    err = apply_query(alloc, msg, name, with_key, n_values + 1, bound, n_bound, &w);
    pbj__free(alloc, with_key);
    return finish(err, &w, errbuf);
}

/* runtime.StringSlice & co.: a repeated path variable is a comma list,
 * replacing whatever the field held. */
static svc_err_t set_top_level(ProtobufCAllocator *a, ProtobufCMessage *m,
                               const ProtobufCFieldDescriptor *f, pbj_str_t value, why_t *w)
{
    pbj__value_t v;
    svc_err_t err;

    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
        err = value_from_text(a, f, MODE_PATH, value, &v, w);
        if (err == SVC_OK)
            pbj__set(a, m, f, &v);
        return err;
    }
    if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        return set_why(w, "unsupported repeated message field");
    for (size_t start = 0, i = 0, cap = 0; i <= value.len; i++) {
        if (i < value.len && value.ptr[i] != ',')
            continue;
        err = value_from_text(a, f, MODE_PATH, (pbj_str_t){value.ptr + start, i - start}, &v, w);
        if (err == SVC_OK)
            err = pbj__append(a, m, f, &cap, &v);
        if (err != SVC_OK)
            return err;
        start = i + 1;
    }
    return SVC_OK;
}

svc_err_t pbj_set_path_param(ProtobufCMessage *msg, ProtobufCAllocator *alloc,
                             const char *field_path, pbj_str_t value,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    const ProtobufCFieldDescriptor *leaf;
    ProtobufCMessage *leaf_msg;
    path_t p;
    why_t w = {{0}};
    svc_err_t err;

    if (!valid_message(msg) || field_path == NULL || (value.ptr == NULL && value.len > 0)) {
        pbj__errf(errbuf, "pbj_set_path_param: invalid argument");
        return SVC_EINVAL;
    }
    if (value.ptr == NULL)
        value.ptr = "";
    if (!split_path((pbj_str_t){field_path, strlen(field_path)}, &p)) {
        pbj__errf(errbuf, "path parameter %s is nested too deeply", field_path);
        return SVC_EINTERNAL;
    }
    err = walk(alloc, msg, &p, &leaf_msg, &leaf, &w);
    if (err == SVC_OK && leaf == NULL) {
        pbj__errf(errbuf, "path parameter %s names no field of %s", field_path,
                  msg->descriptor->name);
        return SVC_EINTERNAL;
    }
    /* Nested variables go through PopulateFieldFromPath (query rules). */
    if (err == SVC_OK)
        err = p.n > 1 ? set_leaf(alloc, leaf_msg, leaf, &value, 1, &w)
                      : set_top_level(alloc, leaf_msg, leaf, value, &w);
    if (err == SVC_EINVAL) {
        char inner[sizeof(w.text)];
        memcpy(inner, w.text, sizeof(inner));
        set_why(&w, "type mismatch, parameter: %s, error: %s", field_path, inner);
    }
    return finish(err, &w, errbuf);
}
