/* SPDX-License-Identifier: Apache-2.0 */
/*
 * openapi_schema.c - the JSON Schemas of the OpenAPI document (openapi_gen):
 * protobuf-c message descriptors as pbjson writes (OAS_DIR_OUT) and reads
 * (OAS_DIR_IN, OAS_DIR_QUERY) them, with the bounds of shopmicro/limits.h
 * on what the services accept, and the fixed google.rpc.Status error
 * schemas. The rules (docs/gateway.md, "The OpenAPI document"):
 * lowerCamelCase names, every field present on output, 64-bit integers as
 * strings on output and numbers or strings on input, enums as names
 * (numbers too on input), an input field nullable unless its default is
 * out of its bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openapi_schema.h"
#include "shopmicro/limits.h"

/* Adds v under key, taking the reference; aborts on allocation failure
 * (a build tool: failing loudly is the right answer). */
void oas_set(json_t *obj, const char *key, json_t *v)
{
    if (v == NULL || json_object_set_new(obj, key, v) != 0) {
        fprintf(stderr, "openapi_gen: out of memory\n");
        exit(1);
    }
}

void oas_push(json_t *arr, json_t *v)
{
    if (v == NULL || json_array_append_new(arr, v) != 0) {
        fprintf(stderr, "openapi_gen: out of memory\n");
        exit(1);
    }
}

/* protoc's ToJsonName: "page_size" -> "pageSize" (pbjson's names). */
void oas_json_name(const char *proto, char out[static OAS_MAX_NAME])
{
    size_t n = 0;
    int upper = 0;

    for (const char *p = proto; *p != '\0' && n + 1 < OAS_MAX_NAME; p++) {
        if (*p == '_') {
            upper = 1;
            continue;
        }
        out[n++] = upper && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        upper = 0;
    }
    out[n] = '\0';
}

/* The components key of a message: its full name for what the gateway
 * writes; "-input" (a character no proto name has) for what it reads. */
static void schema_name(const ProtobufCMessageDescriptor *d, oas_dir_t dir,
                        char out[static OAS_MAX_NAME])
{
    snprintf(out, OAS_MAX_NAME, "%s%s", d->name, dir != OAS_DIR_OUT ? "-input" : "");
}

static json_t *ref_to(const char *name)
{
    char ref[OAS_MAX_NAME + 32];

    snprintf(ref, sizeof ref, "#/components/schemas/%s", name);
    return json_pack("{s:s}", "$ref", ref);
}

/* The decimal digits below which every number fits an integer field of
 * this type (int32: 9, as 999999999 < 2^31), so that a pattern of at most
 * that many digits names only numbers the field holds. */
static int safe_digits(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return 18;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 19;
    default:
        return 9;
    }
}

/* A decimal string of at most `digits` digits, no leading zero: a JSON
 * number's integer form, the way protojson reads a quoted integer. */
static json_t *digits_pattern(int digits, bool negative)
{
    char p[64];

    snprintf(p, sizeof p, "^%s(0|[1-9][0-9]{0,%d})$", negative ? "-?" : "", digits - 1);
    return json_string(p);
}

static bool is_unsigned(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_UINT32 || t == PROTOBUF_C_TYPE_FIXED32 ||
           t == PROTOBUF_C_TYPE_UINT64 || t == PROTOBUF_C_TYPE_FIXED64;
}

/* An integer field. pbj_encode writes 64-bit ones as decimal strings and
 * the others as numbers. pbj_decode reads a number or a string holding a
 * JSON number of integral value ("5", "1e2", "1.0") for any of them; the
 * input schema names the plain form, with few enough digits to fit, so
 * that every string it allows is read (a narrower schema than the reader,
 * never a wider one). A query parameter's text is the number itself. */
static json_t *integer_schema(ProtobufCType t, oas_dir_t dir)
{
    bool wide = safe_digits(t) > 9, uns = is_unsigned(t);
    const char *format = wide ? (uns ? "uint64" : "int64") : (uns ? "uint32" : "int32");
    json_t *s;

    if (dir == OAS_DIR_OUT && wide)
        return json_pack("{s:s, s:s, s:s}", "type", "string", "format", format, "pattern",
                         uns ? "^[0-9]+$" : "^-?[0-9]+$");
    if (dir != OAS_DIR_IN)
        s = json_pack("{s:s, s:s}", "type", "integer", "format", format);
    else
        s = json_pack("{s:[s,s], s:s, s:o}", "type", "integer", "string", "format", format,
                      "pattern", digits_pattern(safe_digits(t), !uns));
    if (uns)
        oas_set(s, "minimum", json_integer(0));
    if (uns && !wide)
        oas_set(s, "maximum", json_integer(4294967295LL));
    return s;
}

static json_t *enum_schema(const ProtobufCEnumDescriptor *e, oas_dir_t dir)
{
    json_t *names = json_array(), *s;

    for (unsigned i = 0; i < e->n_values; i++)
        oas_push(names, json_string(e->values[i].name));
    if (dir != OAS_DIR_OUT) /* a defined value's number is accepted too */
        for (unsigned i = 0; i < e->n_values; i++)
            oas_push(names, json_integer(e->values[i].value));
    s = json_pack("{s:o}", "enum", names);
    if (dir == OAS_DIR_OUT)
        oas_set(s, "type", json_string("string"));
    oas_set(s, "title", json_string(e->name));
    return s;
}

/* The schema of one value of field f (its element, for a repeated one). */
static json_t *value_schema(json_t *schemas, const ProtobufCFieldDescriptor *f, oas_dir_t dir)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return integer_schema(f->type, dir);
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
        /* protojson writes the non-finite values as strings */
        return json_pack("{s:[{s:s},{s:s,s:[s,s,s]}]}", "oneOf", "type", "number", "type", "string",
                         "enum", "NaN", "Infinity", "-Infinity");
    case PROTOBUF_C_TYPE_BOOL:
        return json_pack("{s:s}", "type", "boolean");
    case PROTOBUF_C_TYPE_STRING:
        /* protobuf-c keeps strings NUL-terminated: pbj_decode refuses U+0000 */
        if (dir != OAS_DIR_OUT)
            return json_pack("{s:s, s:s}", "type", "string", "pattern", "^[^\\u0000]*$");
        return json_pack("{s:s}", "type", "string");
    case PROTOBUF_C_TYPE_BYTES:
        return json_pack("{s:s, s:s}", "type", "string", "contentEncoding", "base64");
    case PROTOBUF_C_TYPE_ENUM:
        return enum_schema(f->descriptor, dir);
    case PROTOBUF_C_TYPE_MESSAGE:
        return oas_message_ref(schemas, f->descriptor, dir);
    }
    fprintf(stderr, "openapi_gen: field %s has a type this program does not know\n", f->name);
    exit(1);
}

/* A map field's entry message (protoc's "FooEntry" with key = 1, value = 2). */
bool oas_is_map(const ProtobufCFieldDescriptor *f)
{
    const ProtobufCMessageDescriptor *e = f->descriptor;
    size_t n;

    if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_REPEATED ||
        e->n_fields != 2 || strcmp(e->fields[0].name, "key") != 0 ||
        strcmp(e->fields[1].name, "value") != 0)
        return false;
    n = strlen(e->short_name);
    return n > 5 && strcmp(e->short_name + n - 5, "Entry") == 0;
}

static json_t *field_schema(json_t *schemas, const ProtobufCFieldDescriptor *f, oas_dir_t dir)
{
    if (oas_is_map(f)) {
        const ProtobufCMessageDescriptor *entry = f->descriptor;
        return json_pack("{s:s, s:o}", "type", "object", "additionalProperties",
                         value_schema(schemas, &entry->fields[1], dir));
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return json_pack("{s:s, s:o}", "type", "array", "items", value_schema(schemas, f, dir));
    return value_schema(schemas, f, dir);
}

/* The string form of integer schema v under bound l (add_limits). */
static void limit_digits(json_t *v, const shopmicro_limit_t *l, int digits)
{
    int64_t top = 1;

    for (int i = 0; i < digits; i++)
        top *= 10;
    top -= 1; /* the largest number of the pattern */
    if (l->max < top || l->min > -top) {
        if (l->min >= 0 && l->max >= top) {
            oas_set(v, "pattern", digits_pattern(digits, false));
            return;
        }
        oas_set(v, "type", json_string("integer"));
        json_object_del(v, "pattern");
    }
}

#define MAX_LIMITS 128
static bool limit_used[MAX_LIMITS]; /* for oas_limits_all_used */

/* The first row of shopmicro_limits from l on that bounds field f of
 * message d, or the table's end (message NULL). */
static const shopmicro_limit_t *next_limit(const shopmicro_limit_t *l,
                                           const ProtobufCMessageDescriptor *d,
                                           const ProtobufCFieldDescriptor *f)
{
    while (l->message != NULL &&
           (strcmp(l->message, d->name) != 0 || strcmp(l->field, f->name) != 0))
        l++;
    return l;
}

/* The bounds of shopmicro/limits.h on field f of message d, on its schema s
 * (f's own for CHARS and VALUE, the array's for ITEMS; the items' schema
 * for CHARS and VALUE of a repeated field). Request schemas only: they say
 * what the services accept, and what the gateway writes is theirs. */
static void add_limits(json_t *s, const ProtobufCMessageDescriptor *d,
                       const ProtobufCFieldDescriptor *f)
{
    for (const shopmicro_limit_t *l = next_limit(shopmicro_limits, d, f); l->message != NULL;
         l = next_limit(l + 1, d, f)) {
        json_t *v = s;

        if (l - shopmicro_limits < MAX_LIMITS)
            limit_used[l - shopmicro_limits] = true;
        if (l->kind == SHOPMICRO_LIMIT_ITEMS) {
            oas_set(s, "minItems", json_integer(l->min));
            oas_set(s, "maxItems", json_integer(l->max));
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED)
            v = json_object_get(s, "items");
        if (l->kind == SHOPMICRO_LIMIT_CHARS) {
            oas_set(v, "minLength", json_integer(l->min));
            oas_set(v, "maxLength", json_integer(l->max));
            continue;
        }
        /* minimum and maximum bound the number; the string form stays
         * when every string of its pattern is in bounds (a sign-free one
         * when the bounds are >= 0), and is dropped when not */
        oas_set(v, "minimum", json_integer(l->min));
        oas_set(v, "maximum", json_integer(l->max));
        if (json_object_get(v, "pattern") != NULL)
            limit_digits(v, l, safe_digits(f->type));
    }
}

/* The schema of field f of message d in a request (dir OAS_DIR_IN or
 * OAS_DIR_QUERY): field_schema's, with the field's bounds. */
json_t *oas_input_schema(json_t *schemas, const ProtobufCMessageDescriptor *d,
                         const ProtobufCFieldDescriptor *f, oas_dir_t dir)
{
    json_t *s = field_schema(schemas, f, dir);

    add_limits(s, d, f);
    return s;
}

/* Whether a request must have field f of message d: its default is out of
 * one of its bounds (an empty name, no items, a quantity of 0). */
static bool is_needed(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f)
{
    for (const shopmicro_limit_t *l = next_limit(shopmicro_limits, d, f); l->message != NULL;
         l = next_limit(l + 1, d, f))
        if (shopmicro_limit_needs_field(l))
            return true;
    return false;
}

bool oas_has_needed(const ProtobufCMessageDescriptor *d)
{
    for (unsigned i = 0; i < d->n_fields; i++)
        if (is_needed(d, &d->fields[i]))
            return true;
    return false;
}

/* s, or null: protojson reads a null member as the field's default. */
static json_t *or_null(json_t *s)
{
    json_t *type = json_object_get(s, "type"), *e = json_object_get(s, "enum");

    if (json_is_string(type)) {
        oas_set(s, "type", json_pack("[s,s]", json_string_value(type), "null"));
    } else if (json_is_array(type)) {
        oas_push(type, json_string("null"));
    } else if (json_is_array(e)) {
        oas_push(e, json_null());
    } else {
        return json_pack("{s:[o,{s:s}]}", "anyOf", s, "type", "null");
    }
    return s;
}

/* Adds components/schemas[message] (and the messages it holds) once. The
 * fields in declaration order (pbj_encode's order; protobuf-c keeps them by
 * number, but pbjson writes them as declared and these protos declare them
 * in number order). What the gateway writes has every field (protojson
 * with EmitUnpopulated); what it reads may lack any field, or have it null,
 * unless the field's default is out of its bounds (is_needed). */
static void add_message(json_t *schemas, const ProtobufCMessageDescriptor *d, oas_dir_t dir)
{
    char name[OAS_MAX_NAME], jname[OAS_MAX_NAME];
    json_t *s, *props, *required;

    schema_name(d, dir, name);
    if (json_object_get(schemas, name) != NULL)
        return;
    s = json_pack("{s:s, s:s}", "type", "object", "title", d->name);
    oas_set(schemas, name, s); /* before the fields: a message may hold itself */
    props = json_object();
    required = json_array();
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];

        oas_json_name(f->name, jname);
        if (dir == OAS_DIR_OUT) {
            oas_set(props, jname, field_schema(schemas, f, dir));
            oas_push(required, json_string(jname));
        } else if (is_needed(d, f)) {
            oas_set(props, jname, oas_input_schema(schemas, d, f, OAS_DIR_IN));
            oas_push(required, json_string(jname));
        } else {
            oas_set(props, jname, or_null(oas_input_schema(schemas, d, f, OAS_DIR_IN)));
        }
    }
    oas_set(s, "properties", props);
    if (json_array_size(required) > 0)
        oas_set(s, "required", required);
    else
        json_decref(required);
}

json_t *oas_message_ref(json_t *schemas, const ProtobufCMessageDescriptor *d, oas_dir_t dir)
{
    char name[OAS_MAX_NAME];

    add_message(schemas, d, dir);
    schema_name(d, dir, name);
    return ref_to(name);
}

/* The error body and its details (gateway/status.h, docs/gateway.md "Errors"): fixed shapes,
 * written as the JSON Schema they are. */
static const char error_schemas[] =
    "{\"google.rpc.Status\":{\"type\":\"object\",\"title\":\"google.rpc.Status\","
    "\"required\":[\"code\",\"message\",\"details\"],\"properties\":{"
    "\"code\":{\"type\":\"integer\",\"format\":\"int32\"},\"message\":{\"type\":\"string\"},"
    "\"details\":{\"type\":\"array\",\"items\":{\"oneOf\":["
    "{\"$ref\":\"#/components/schemas/google.rpc.ErrorInfo\"},"
    "{\"$ref\":\"#/components/schemas/google.rpc.RetryInfo\"},"
    "{\"$ref\":\"#/components/schemas/google.rpc.BadRequest\"}]}}}},"
    "\"google.rpc.ErrorInfo\":{\"type\":\"object\",\"description\":\"Why: a reason constant "
    "within the domain that decided (every error has exactly one).\","
    "\"required\":[\"@type\",\"reason\",\"domain\",\"metadata\"],\"properties\":{"
    "\"@type\":{\"const\":\"type.googleapis.com/google.rpc.ErrorInfo\"},"
    "\"reason\":{\"type\":\"string\"},\"domain\":{\"type\":\"string\"},"
    "\"metadata\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}}},"
    "\"google.rpc.RetryInfo\":{\"type\":\"object\",\"description\":\"When to try again: "
    "the same wait as Retry-After.\",\"required\":[\"@type\",\"retryDelay\"],\"properties\":{"
    "\"@type\":{\"const\":\"type.googleapis.com/google.rpc.RetryInfo\"},"
    "\"retryDelay\":{\"type\":\"string\",\"pattern\":\"^[0-9]+(\\\\.[0-9]{1,9})?s$\"}}},"
    "\"google.rpc.BadRequest\":{\"type\":\"object\",\"description\":\"Which request fields "
    "were refused (proto field paths), and why.\",\"required\":[\"@type\",\"fieldViolations\"],"
    "\"properties\":{\"@type\":{\"const\":\"type.googleapis.com/google.rpc.BadRequest\"},"
    "\"fieldViolations\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"required\":[\"field\",\"description\"],\"properties\":{"
    "\"field\":{\"type\":\"string\"},\"description\":{\"type\":\"string\"}}}}}}}";

void oas_add_error_schemas(json_t *schemas)
{
    json_error_t jerr;
    json_t *errors = json_loads(error_schemas, 0, &jerr);

    if (errors == NULL) {
        fprintf(stderr, "openapi_gen: error_schemas: %s (column %d)\n", jerr.text, jerr.column);
        exit(1);
    }
    json_object_update(schemas, errors);
    json_decref(errors);
}

bool oas_limits_all_used(void)
{
    for (size_t i = 0; shopmicro_limits[i].message != NULL; i++)
        if (i >= MAX_LIMITS || !limit_used[i]) {
            fprintf(stderr,
                    "openapi_gen: shopmicro_limits: %s.%s is no field of a request of the public "
                    "port\n",
                    shopmicro_limits[i].message, shopmicro_limits[i].field);
            return false;
        }
    return true;
}
