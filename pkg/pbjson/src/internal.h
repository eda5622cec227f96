/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h - what the pbjson source files share: descriptor helpers,
 * memory, UTF-8, base64, number conversions and error text.
 *
 * Names are pbj__ (module-internal). Nothing here is part of the contract in
 * include/pbj/pbjson.h.
 */
#ifndef PBJ_INTERNAL_H
#define PBJ_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "pbj/pbjson.h"

#define PBJ__FMT(a, b) __attribute__((format(printf, a, b)))

/* ------------------------------------------------------------------------
 * Memory (alloc.c)
 * ------------------------------------------------------------------------ */

/* a, or an allocator using malloc/free (the same as protobuf-c's default). */
ProtobufCAllocator *pbj__allocator(ProtobufCAllocator *a);
/* NULL on failure or when n is 0. */
void *pbj__alloc(ProtobufCAllocator *a, size_t n);
void pbj__free(ProtobufCAllocator *a, void *p);
/* *out = a + b, false on overflow. */
bool pbj__add_ok(size_t a, size_t b, size_t *out);

/* Grows the array *arr of n elements of elem_size bytes so that it holds at
 * least n + 1, doubling *cap (0 means *arr has exactly n elements). */
svc_err_t pbj__array_grow(ProtobufCAllocator *a, void **arr, size_t n, size_t *cap,
                          size_t elem_size);

/* A bounded, growable output buffer with a sticky error: once an append
 * fails, later appends are ignored and `err` tells why, so the encoder can
 * emit freely and check once at the end (curl's dynbuf, with its cap). */
typedef struct pbj__buf {
    ProtobufCAllocator *alloc;
    char *data;
    size_t len;
    size_t cap;
    size_t max;
    svc_err_t err;
} pbj__buf_t;

void pbj__buf_init(pbj__buf_t *b, ProtobufCAllocator *a, size_t max);
void pbj__buf_dispose(pbj__buf_t *b);
void pbj__buf_put(pbj__buf_t *b, const char *p, size_t n);
/* Appends n bytes for the caller to fill; NULL once the buffer failed. */
char *pbj__buf_extend(pbj__buf_t *b, size_t n);
void pbj__buf_putc(pbj__buf_t *b, char c);
void pbj__buf_puts(pbj__buf_t *b, const char *s);
/* Appends s as a quoted JSON string, escaped like protojson. Returns false
 * (appending nothing) when s is not valid UTF-8. */
bool pbj__buf_put_json_string(pbj__buf_t *b, const char *s, size_t n);

/* ------------------------------------------------------------------------
 * Descriptors and message memory (field.c)
 * ------------------------------------------------------------------------ */

/* The field's storage inside a message. */
static inline void *pbj__member(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    return (char *)m + f->offset;
}
static inline void *pbj__quantifier(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    return (char *)m + f->quantifier_offset;
}

bool pbj__is_oneof(const ProtobufCFieldDescriptor *f);
/* Size of one element of a repeated field of type t. */
size_t pbj__elem_size(ProtobufCType t);
/* protojson's name for the kind: "int64", "enum", "message", ... */
const char *pbj__kind_name(ProtobufCType t);

/* Writes the JSON name of proto_name into out (NUL-terminated, truncated to
 * cap - 1 bytes); returns the full length. */
size_t pbj__json_name(const char *proto_name, char *out, size_t cap);
/* The field whose JSON name or proto name is exactly s[0..n), or NULL. */
const ProtobufCFieldDescriptor *pbj__field_by_name(const ProtobufCMessageDescriptor *d,
                                                   const char *s, size_t n);

/* The enum value named s[0..n), or NULL. */
const ProtobufCEnumValue *pbj__enum_by_name(const ProtobufCEnumDescriptor *e, const char *s,
                                            size_t n);

/* True when f is a protoc map field: a repeated message whose entry type is
 * parent's nested "<CamelName>Entry" with fields key=1 and value=2. */
bool pbj__is_map(const ProtobufCMessageDescriptor *parent, const ProtobufCFieldDescriptor *f);
static inline const ProtobufCFieldDescriptor *pbj__map_key(const ProtobufCFieldDescriptor *f)
{
    return &((const ProtobufCMessageDescriptor *)f->descriptor)->fields[0];
}
static inline const ProtobufCFieldDescriptor *pbj__map_value(const ProtobufCFieldDescriptor *f)
{
    return &((const ProtobufCMessageDescriptor *)f->descriptor)->fields[1];
}

/* Whether a singular field holds a value (protobuf-c's notion of presence:
 * has_ flags, oneof case, non-NULL/non-default pointers). Fields without
 * presence (proto3 scalars) always return true. */
bool pbj__has(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f);
/* True for a proto2 optional or a message field: unset means JSON null. */
bool pbj__has_presence(const ProtobufCFieldDescriptor *f);

/* d's fields in declaration order (see pbjson.h): *out has d->n_fields
 * entries; it is `small` when n_small suffices, else allocated (pbj__free
 * it when it is not `small`). */
typedef struct pbj__order {
    unsigned offset;
    unsigned index;
} pbj__order_t;
svc_err_t pbj__field_order(ProtobufCAllocator *a, const ProtobufCMessageDescriptor *d,
                           pbj__order_t *small, size_t n_small, pbj__order_t **out);

/* A new default-initialised message. */
svc_err_t pbj__msg_new(ProtobufCAllocator *a, const ProtobufCMessageDescriptor *d,
                       ProtobufCMessage **out);

/* One field value on its way into a message. The owned members (str, bytes,
 * msg) come from the message allocator. */
typedef union pbj__value {
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    double f64;
    protobuf_c_boolean b;
    int e;
    char *str;
    ProtobufCBinaryData bytes;
    ProtobufCMessage *msg;
} pbj__value_t;

/* Frees what v owns for a field of type t. */
void pbj__value_dispose(ProtobufCAllocator *a, ProtobufCType t, pbj__value_t *v);
/* Stores v in the singular field f (freeing the value it replaces, setting
 * has_ or the oneof case). Takes ownership of v's memory. Cannot fail. */
void pbj__set(ProtobufCAllocator *a, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
              pbj__value_t *v);
/* Appends v to the repeated field f; *cap as for pbj__array_grow. Takes
 * ownership of v's memory, even on failure. */
svc_err_t pbj__append(ProtobufCAllocator *a, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                      size_t *cap, pbj__value_t *v);
/* Copies s[0..n) into a new NUL-terminated string. */
char *pbj__strndup(ProtobufCAllocator *a, const char *s, size_t n);

/* ------------------------------------------------------------------------
 * Map keys (map.c): sorting entries for output and finding duplicates on
 * input, both O(n log n) so that a large map cannot make either quadratic.
 * ------------------------------------------------------------------------ */

/* Indexes of the entries of map field f to emit, in Go's key order, with
 * only the last of equal keys kept. *out (n_out entries) is owned by caller
 * (pbj__free). */
svc_err_t pbj__map_order(ProtobufCAllocator *a, const ProtobufCFieldDescriptor *f,
                         ProtobufCMessage *const *entries, size_t n, size_t **out, size_t *n_out);
/* The smallest index j such that entries[j] has the same key as an earlier
 * entry, or n when all keys differ. */
svc_err_t pbj__map_first_duplicate(ProtobufCAllocator *a, const ProtobufCFieldDescriptor *f,
                                   ProtobufCMessage *const *entries, size_t n, size_t *dup);

/* ------------------------------------------------------------------------
 * UTF-8 (utf8.c)
 * ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if s[0..n) does not
 * start with one (Go's rules: no overlongs, surrogates or > U+10FFFF). */
size_t pbj__utf8_seq(const unsigned char *s, size_t n);
bool pbj__utf8_valid(const char *s, size_t n);
/* Encodes a code point (< 0x110000, not a surrogate); returns 1..4. */
size_t pbj__utf8_put(uint32_t cp, char out[4]);
/* Shortens a NUL-terminated string so it does not end inside a UTF-8
 * sequence (after truncation by snprintf). */
void pbj__utf8_trim_tail(char *s);

/* ------------------------------------------------------------------------
 * base64 (base64.c)
 * ------------------------------------------------------------------------ */

size_t pbj__b64_encoded_len(size_t n);
/* Standard alphabet with padding; writes pbj__b64_encoded_len(n) bytes. */
void pbj__b64_encode(const uint8_t *in, size_t n, char *out);
/* Go's encoding/base64 DecodeString (non-strict: CR/LF skipped, unused
 * trailing bits ignored). out needs at least n * 3 / 4 + 3 bytes. */
bool pbj__b64_decode(const char *s, size_t n, bool url, bool padded, uint8_t *out, size_t *out_len);
/* protojson's choice of encoding: URL alphabet if s has '-' or '_',
 * unpadded if the length is not a multiple of 4. */
bool pbj__b64_decode_protojson(const char *s, size_t n, uint8_t *out, size_t *out_len);

/* ------------------------------------------------------------------------
 * Numbers (number.c, strconv.c)
 * ------------------------------------------------------------------------ */

/* Room for any formatted float or double (plus NUL). */
#define PBJ__NUM_MAX 40

/* protojson's text for v (including the quotes around "NaN" & co.). */
size_t pbj__fmt_double(double v, char out[PBJ__NUM_MAX]);
size_t pbj__fmt_float(float v, char out[PBJ__NUM_MAX]);

/* A JSON number (already validated) as a whole number, protojson's rules:
 * fraction and exponent are fine when the value is integral. *neg and *mag
 * give sign and magnitude; false if not integral or beyond 64 bits. */
bool pbj__json_integer(const char *s, size_t n, bool *neg, uint64_t *mag);
/* Length of the JSON number (RFC 8259 grammar) at the start of s[0..n),
 * or 0 if there is none. */
size_t pbj__json_number_len(const char *s, size_t n);
/* strtod (bits 64) or strtof (bits 32) of s[0..n), which the caller has
 * checked against a number grammar. False when the text is not consumed
 * entirely or the value overflows to infinity; *nomem tells an allocation
 * failure apart. */
bool pbj__strtod(ProtobufCAllocator *a, const char *s, size_t n, unsigned bits, double *out,
                 bool *nomem);

typedef enum { PBJ__NUM_OK, PBJ__NUM_SYNTAX, PBJ__NUM_RANGE } pbj__numerr_t;

/* Go's strconv.ParseInt / ParseUint (base 10 or 0) and ParseBool. */
pbj__numerr_t pbj__parse_int(const char *s, size_t n, int base, unsigned bits, int64_t *out);
pbj__numerr_t pbj__parse_uint(const char *s, size_t n, int base, unsigned bits, uint64_t *out);
bool pbj__parse_bool(const char *s, size_t n, bool *out);
/* Go's strconv.ParseFloat: decimal, hex (with a p exponent), inf, nan,
 * underscores between digits. */
pbj__numerr_t pbj__parse_float(ProtobufCAllocator *a, const char *s, size_t n, unsigned bits,
                               double *out, bool *nomem);

/* ------------------------------------------------------------------------
 * Error text (error.c). errbuf content is always valid UTF-8 so that the
 * gateway can put it straight into a JSON error body.
 * ------------------------------------------------------------------------ */

void pbj__errf(char errbuf[static SVC_ERRBUF_LEN], const char *fmt, ...) PBJ__FMT(2, 3);
/* Writes s as Go's %q would (quoted, escaped), truncated to about 64 bytes
 * of input with "..." when longer; out is NUL-terminated. */
void pbj__quote(const char *s, size_t n, char *out, size_t cap);
/* Copies a piece of raw JSON for an error message, truncated like
 * pbj__quote but not quoted or escaped (raw JSON is already printable). */
void pbj__excerpt(const char *s, size_t n, char *out, size_t cap);

/* Size of the buffers used for names and values inside error messages. */
#define PBJ__ERR_PIECE 96

#endif /* PBJ_INTERNAL_H */
