/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbj/pbjson.h - JSON <-> protobuf-c for any message, the way grpc-gateway v2
 * does it by default.
 *
 * grpc-gateway v2 marshals with protojson and these options (and no others):
 *   MarshalOptions{EmitUnpopulated: true}, UnmarshalOptions{DiscardUnknown: true}
 * This module reproduces that behaviour for every protobuf-c message, driven
 * only by its ProtobufCMessageDescriptor: there is no per-message code.
 *
 * OUTPUT (pbj_encode)
 *   - Compact: no whitespace, no trailing newline.
 *   - Keys are the lowerCamelCase JSON names that protoc computes (drop each
 *     '_' and upper-case the ASCII letter after it: price_cents -> priceCents).
 *     protobuf-c does not keep a custom [json_name = "..."] option, so such an
 *     option is not honoured.
 *   - Fields come in .proto declaration order. protobuf-c sorts its field
 *     table by number, but protoc-c lays the C struct out in declaration
 *     order, so the codec orders fields by struct offset. The one place this
 *     differs from protojson: protoc-c puts oneof members after all other
 *     fields, so a oneof declared mid-message is emitted last.
 *   - Every field is emitted (EmitUnpopulated): "" / 0 / false for proto3
 *     scalars, "0" for 64-bit integers, the enum's zero name, [] for repeated,
 *     {} for maps, null for an unset message field and for an unset proto2
 *     optional scalar. Unset oneof members are omitted.
 *   - int64, uint64, sint64, fixed64, sfixed64: decimal JSON strings ("2598").
 *     32-bit integers: JSON numbers.
 *   - float, double: the shortest text that reads back to the same value, in
 *     Go's format (1e+21, 1e-7, 0.000001, -0); NaN and infinities as the
 *     strings "NaN", "Infinity", "-Infinity".
 *   - bytes: standard base64 with padding.
 *   - enums: the value's name; a number with no name is written as a number.
 *   - maps (protobuf-c represents map<K,V> as repeated KEntry messages; the
 *     codec recognises them by protoc's entry naming) are JSON objects with
 *     keys sorted like Go sorts them (false<true, numeric order for integers,
 *     byte order for strings). If an entry key appears twice, the last wins.
 *   - Strings are escaped as protojson does: \" \\ \b \f \n \r \t, other
 *     control characters as \u00XX; no HTML escaping; non-ASCII UTF-8 is
 *     copied. A string that is not valid UTF-8 is an error (as in protojson).
 *   - Well-known types (Timestamp, Duration, wrappers, Struct, Any) are not
 *     special-cased: ShopMicro's protos use RFC 3339 strings instead, and
 *     protoc-c cannot compile the well-known types' JSON mapping anyway.
 *
 * INPUT (pbj_decode)
 *   - The top level must be a JSON object; only the first JSON value is read
 *     and anything after it is ignored (grpc-gateway decodes one value from
 *     the body and drains the rest).
 *   - Keys may be the JSON name or the proto name (priceCents, price_cents).
 *     Unknown keys are skipped (their values must still be valid JSON).
 *   - The same field twice, under either name, is an error ("duplicate
 *     field"), as are two members of one oneof and a repeated map key.
 *   - null leaves a field unset. Inside a repeated field or as a map value,
 *     null is an error.
 *   - Integers: a JSON number or a string holding exactly one JSON number
 *     ("2598"; " 2598" is rejected), whose value must be whole (1e2, 1.0 are
 *     fine, 1.5 is not) and fit the field's type.
 *   - float/double: a number, a numeric string, or "NaN", "Infinity",
 *     "-Infinity"; values beyond the type's range are rejected.
 *   - bool: true or false only. string: a JSON string only.
 *   - bytes: base64, standard or URL alphabet, padded or not (protojson's
 *     rules; CR and LF are ignored).
 *   - enums: a value name or an integer. An unknown name is ignored (the
 *     field keeps its zero value; in a repeated field the element, and in a
 *     map the entry, is dropped).
 *   - Strings must be valid UTF-8 (escapes included: lone surrogates are
 *     rejected). Because protobuf-c strings are NUL-terminated, a string
 *     containing U+0000 is rejected too (protojson would accept it).
 *   - proto2 required fields must be present.
 *   - Empty or all-whitespace input is an error unless PBJ_DECODE_ALLOW_EMPTY
 *     is passed, in which case it decodes to the default message (what
 *     grpc-gateway does with an empty request body).
 *   Every rejected input gives SVC_EINVAL with a protojson-style message,
 *   e.g. `(line 1:16): invalid value for int64 field priceCents: "abc"`.
 *   Go prefixes these with "proto: "; the text is informative only.
 *
 * LIMITS
 *   - JSON nesting (objects and arrays together) is limited to PBJ_MAX_DEPTH
 *     levels on input, and message nesting to PBJ_MAX_DEPTH on output (which
 *     also stops a message graph with a cycle). protojson allows 10000; no
 *     ShopMicro message comes close to 64.
 *   - Encoded output is limited to PBJ_MAX_OUTPUT bytes (SVC_EEXHAUSTED).
 *   - Input size is the caller's business (the gateway caps bodies at
 *     1 MiB); the decoder is linear in the input, allocates at most a small
 *     multiple of it, and never recurses without the depth check.
 *
 * MEMORY
 *   Every function takes a ProtobufCAllocator; NULL means malloc/free, which
 *   is also protobuf-c's default, so a message decoded with NULL can be
 *   released with protobuf_c_message_free_unpacked(msg, NULL). Messages must
 *   be released with the allocator that built them. On any error, nothing
 *   is left allocated.
 *
 * LOCALE
 *   Floating-point text is read with strtod and written with snprintf, so the
 *   process must keep the "C" LC_NUMERIC locale (the default unless a program
 *   calls setlocale; ShopMicro programs never do).
 *
 * THREAD-SAFETY
 *   No global state. Any number of threads may encode the same message at
 *   once; a message being decoded or modified belongs to one thread.
 */
#ifndef PBJ_PBJSON_H
#define PBJ_PBJSON_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "svc/core.h"

/* Maximum JSON nesting on input and message nesting on output. */
#define PBJ_MAX_DEPTH 64u
/* Maximum size of one encoded message (64 MiB: 16x gRPC's 4 MiB message
 * limit, which covers base64 and \u00XX escaping of the largest message). */
#define PBJ_MAX_OUTPUT ((size_t)64 * 1024 * 1024)

/* pbj_decode flag: empty or all-whitespace input decodes to the default
 * message instead of failing. */
#define PBJ_DECODE_ALLOW_EMPTY 0x1u

/* A borrowed byte string that need not be NUL-terminated. */
typedef struct pbj_str {
    const char *ptr;
    size_t len;
} pbj_str_t;

/*
 * Encodes msg as JSON (rules above).
 *
 * msg      borrowed; any protobuf-c message.
 * alloc    for the output and scratch memory; NULL: malloc/free.
 * out      on SVC_OK, a buffer of *out_len bytes plus a terminating NUL (not
 *          counted), owned by caller: release with pbj_free(alloc, *out).
 *          Untouched on failure.
 * errbuf   optional, SVC_ERRBUF_LEN bytes, filled on failure.
 *
 * Returns SVC_OK; SVC_EINVAL for a message protojson refuses too (a string
 * that is not UTF-8, a missing proto2 required message or string), for a
 * malformed one (a NULL repeated element or map entry, bytes with a length
 * but no data, no descriptor), or for nesting deeper than PBJ_MAX_DEPTH;
 * SVC_EEXHAUSTED past PBJ_MAX_OUTPUT; SVC_ENOMEM.
 */
svc_err_t pbj_encode(const ProtobufCMessage *msg, ProtobufCAllocator *alloc, char **out,
                     size_t *out_len, char errbuf[static SVC_ERRBUF_LEN])
    __attribute__((warn_unused_result));

/*
 * Decodes JSON into a new message of type desc (rules above).
 *
 * json     borrowed; len bytes, need not be NUL-terminated.
 * flags    0 or PBJ_DECODE_ALLOW_EMPTY.
 * alloc    for every allocation in the message; NULL: malloc/free.
 * out      on SVC_OK, a new message owned by caller: release with
 *          pbj_message_free(*out, alloc). Untouched on failure.
 * errbuf   optional, SVC_ERRBUF_LEN bytes, filled on failure.
 *
 * Returns SVC_OK; SVC_EINVAL for any input protojson rejects (and for a
 * string holding U+0000, and for nesting deeper than PBJ_MAX_DEPTH);
 * SVC_ENOMEM.
 */
svc_err_t pbj_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                     unsigned flags, ProtobufCAllocator *alloc, ProtobufCMessage **out,
                     char errbuf[static SVC_ERRBUF_LEN]) __attribute__((warn_unused_result));

/*
 * Creates a default-initialised message of type desc (for GET routes, whose
 * request is built from the path and the query string only).
 * out: on SVC_OK, owned by caller (pbj_message_free). Returns SVC_ENOMEM or
 * SVC_EINVAL (desc is not a message descriptor).
 */
svc_err_t pbj_message_new(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                          ProtobufCMessage **out) __attribute__((warn_unused_result));

/* Frees a message built with alloc (protobuf_c_message_free_unpacked).
 * NULL-safe. */
void pbj_message_free(ProtobufCMessage *msg, ProtobufCAllocator *alloc);

/* Frees a buffer returned by pbj_encode with the same allocator. NULL-safe. */
void pbj_free(ProtobufCAllocator *alloc, void *p);

/*
 * Applies one query-string parameter to msg, as grpc-gateway's default query
 * parser does (runtime/query.go). Call it once per distinct key, with every
 * value the key has, in order (the caller splits and percent-decodes the
 * query string).
 *
 * key      "page_size", "pageSize", a dotted path "a.b_c" (each part a proto
 *          or JSON name; intermediate parts must be singular message fields,
 *          created as needed; at most PBJ_MAX_DEPTH parts), or "m[k]" for the
 *          map entry k of map m.
 * values   n_values >= 1 values. A singular field takes exactly one (more:
 *          `too many values for field "page_size": 10, 20`); a repeated field
 *          appends each.
 * bound    optional list of n_bound dotted proto-name paths that the route
 *          binds from the URL path: a key that names one of them or a field
 *          inside one is ignored, as grpc-gateway filters it.
 * Values are parsed like Go's strconv: integers in base 10 with an optional
 * sign (ParseInt/ParseUint), bools as 1/t/T/TRUE/true/True or their false
 * forms, floats as ParseFloat, enums by name or by the number of a defined
 * value, bytes as padded standard or URL base64, strings as given (but they
 * must be valid UTF-8 without U+0000, which grpc-go would refuse to send).
 * A key naming no field is ignored (SVC_OK), as in grpc-gateway.
 *
 * msg must have been built with alloc: a value it replaces is freed.
 * On failure msg stays valid (it may hold some of the values).
 * Returns SVC_OK, SVC_EINVAL with e.g.
 *   `parsing field "page_size": strconv.ParseInt: parsing "abc": invalid syntax`,
 * or SVC_ENOMEM.
 */
svc_err_t pbj_set_query_param(ProtobufCMessage *msg, ProtobufCAllocator *alloc, pbj_str_t key,
                              const pbj_str_t *values, size_t n_values, const char *const *bound,
                              size_t n_bound, char errbuf[static SVC_ERRBUF_LEN])
    __attribute__((warn_unused_result));

/*
 * Sets the field a path template variable binds ({id}, {product.id}) from its
 * percent-decoded segment, as grpc-gateway's generated handlers do.
 *
 * field_path  proto names, dotted for nested fields, as in the template.
 * A top-level field is converted like runtime.Int64 & co.: integers with
 * strconv.ParseInt(v, 0, bits), so 0x1f, 0o17, 0b101 and 1_000 are accepted;
 * a repeated field takes a comma-separated list. A nested field is set like
 * a query parameter (base 10). Errors read
 *   `type mismatch, parameter: id, error: strconv.ParseInt: parsing "abc": invalid syntax`.
 *
 * Returns SVC_OK; SVC_EINVAL for a bad value; SVC_EINTERNAL when field_path
 * names no field of msg (a route table bug, not the client's fault);
 * SVC_ENOMEM. msg must have been built with alloc.
 */
svc_err_t pbj_set_path_param(ProtobufCMessage *msg, ProtobufCAllocator *alloc,
                             const char *field_path, pbj_str_t value,
                             char errbuf[static SVC_ERRBUF_LEN])
    __attribute__((warn_unused_result));

#endif /* PBJ_PBJSON_H */
