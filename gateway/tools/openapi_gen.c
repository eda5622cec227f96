/* SPDX-License-Identifier: Apache-2.0 */
/*
 * openapi_gen.c - writes the OpenAPI 3.1 document of the public port from
 * the route table (gw_routes) and the protobuf-c descriptors its rows name.
 * Run at build time (gateway/CMakeLists.txt); its output is embedded in the
 * gateway and served at GET /openapi.json, so the document cannot say
 * something the table does not.
 *
 *   openapi_gen OUT.json
 *
 * What each row gives (docs/gateway.md, "The OpenAPI document"):
 *   path template  -> the OpenAPI path ("{id=*}" -> "{id}") and its path
 *                     parameters, typed like the request's fields;
 *   GET, no body   -> the request's other scalar fields as query parameters
 *                     under their JSON names (pbj_set_query_param takes
 *                     both names; nested singular messages as "a.b");
 *   body "*"       -> the request message as the JSON body;
 *   response       -> the 200 body, with the protojson rules of pkg/pbjson:
 *                     lowerCamelCase names, every field present, 64-bit
 *                     integers as strings, enums as names;
 *   scopes         -> the operation's bearer-token security requirement;
 *   rate class     -> the RateLimit-Policy / RateLimit headers and 429;
 *   the statuses the gateway itself gives on that kind of row, each with the
 *   google.rpc.Status body, and "default" for any other code an upstream
 *   may map to (the gRPC -> HTTP table).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ops.h"
#include "routes.h"
#include "shopmicro/limits.h"

/* The route table links the /openapi.json route, which serves the embedded
 * document this program makes; the program itself serves nothing, so it
 * carries an empty one instead of the one it is about to write. */
const unsigned char gw_openapi_json[] = "";
const size_t gw_openapi_json_len = 0;

#define BEARER      "bearerAuth"
#define STATUS_REF  "#/components/schemas/google.rpc.Status"
#define MAX_NAME    256
#define MAX_NESTING 8

typedef enum direction {
    DIR_OUT,   /* what pbj_encode writes: every field, int64 as a string */
    DIR_IN,    /* what pbj_decode accepts: any field may be missing, int64 as a number too */
    DIR_QUERY, /* a query parameter: as DIR_IN, but an integer is its text, never a JSON string */
} direction_t;

/* Adds v under key, taking the reference; aborts on allocation failure
 * (a build tool: failing loudly is the right answer). */
static void set(json_t *obj, const char *key, json_t *v)
{
    if (v == NULL || json_object_set_new(obj, key, v) != 0) {
        fprintf(stderr, "openapi_gen: out of memory\n");
        exit(1);
    }
}

static void push(json_t *arr, json_t *v)
{
    if (v == NULL || json_array_append_new(arr, v) != 0) {
        fprintf(stderr, "openapi_gen: out of memory\n");
        exit(1);
    }
}

/* protoc's ToJsonName: "page_size" -> "pageSize" (pbjson's names). */
static void json_name(const char *proto, char out[static MAX_NAME])
{
    size_t n = 0;
    int upper = 0;

    for (const char *p = proto; *p != '\0' && n + 1 < MAX_NAME; p++) {
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
static void schema_name(const ProtobufCMessageDescriptor *d, direction_t dir,
                        char out[static MAX_NAME])
{
    snprintf(out, MAX_NAME, "%s%s", d->name, dir != DIR_OUT ? "-input" : "");
}

static json_t *ref_to(const char *name)
{
    char ref[MAX_NAME + 32];

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
static json_t *integer_schema(ProtobufCType t, direction_t dir)
{
    bool wide = safe_digits(t) > 9, uns = is_unsigned(t);
    const char *format = wide ? (uns ? "uint64" : "int64") : (uns ? "uint32" : "int32");
    json_t *s;

    if (dir == DIR_OUT && wide)
        return json_pack("{s:s, s:s, s:s}", "type", "string", "format", format, "pattern",
                         uns ? "^[0-9]+$" : "^-?[0-9]+$");
    if (dir != DIR_IN)
        s = json_pack("{s:s, s:s}", "type", "integer", "format", format);
    else
        s = json_pack("{s:[s,s], s:s, s:o}", "type", "integer", "string", "format", format,
                      "pattern", digits_pattern(safe_digits(t), !uns));
    if (uns)
        set(s, "minimum", json_integer(0));
    if (uns && !wide)
        set(s, "maximum", json_integer(4294967295LL));
    return s;
}

static json_t *enum_schema(const ProtobufCEnumDescriptor *e, direction_t dir)
{
    json_t *names = json_array(), *s;

    for (unsigned i = 0; i < e->n_values; i++)
        push(names, json_string(e->values[i].name));
    if (dir != DIR_OUT) /* a defined value's number is accepted too */
        for (unsigned i = 0; i < e->n_values; i++)
            push(names, json_integer(e->values[i].value));
    s = json_pack("{s:o}", "enum", names);
    if (dir == DIR_OUT)
        set(s, "type", json_string("string"));
    set(s, "title", json_string(e->name));
    return s;
}

static void add_message(json_t *schemas, const ProtobufCMessageDescriptor *d, direction_t dir);

/* The schema of one value of field f (its element, for a repeated one). */
static json_t *value_schema(json_t *schemas, const ProtobufCFieldDescriptor *f, direction_t dir)
{
    char name[MAX_NAME];

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
        if (dir != DIR_OUT)
            return json_pack("{s:s, s:s}", "type", "string", "pattern", "^[^\\u0000]*$");
        return json_pack("{s:s}", "type", "string");
    case PROTOBUF_C_TYPE_BYTES:
        return json_pack("{s:s, s:s}", "type", "string", "contentEncoding", "base64");
    case PROTOBUF_C_TYPE_ENUM:
        return enum_schema(f->descriptor, dir);
    case PROTOBUF_C_TYPE_MESSAGE:
        add_message(schemas, f->descriptor, dir);
        schema_name(f->descriptor, dir, name);
        return ref_to(name);
    }
    fprintf(stderr, "openapi_gen: field %s has a type this program does not know\n", f->name);
    exit(1);
}

/* A map field's entry message (protoc's "FooEntry" with key = 1, value = 2). */
static bool is_map(const ProtobufCFieldDescriptor *f)
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

static json_t *field_schema(json_t *schemas, const ProtobufCFieldDescriptor *f, direction_t dir)
{
    if (is_map(f)) {
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
            set(v, "pattern", digits_pattern(digits, false));
            return;
        }
        set(v, "type", json_string("integer"));
        json_object_del(v, "pattern");
    }
}

#define MAX_LIMITS 128
static bool limit_used[MAX_LIMITS]; /* main fails on a row that named no field it met */

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
            set(s, "minItems", json_integer(l->min));
            set(s, "maxItems", json_integer(l->max));
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED)
            v = json_object_get(s, "items");
        if (l->kind == SHOPMICRO_LIMIT_CHARS) {
            set(v, "minLength", json_integer(l->min));
            set(v, "maxLength", json_integer(l->max));
            continue;
        }
        /* minimum and maximum bound the number; the string form stays
         * when every string of its pattern is in bounds (a sign-free one
         * when the bounds are >= 0), and is dropped when not */
        set(v, "minimum", json_integer(l->min));
        set(v, "maximum", json_integer(l->max));
        if (json_object_get(v, "pattern") != NULL)
            limit_digits(v, l, safe_digits(f->type));
    }
}

/* The schema of field f of message d in a request (dir DIR_IN or
 * DIR_QUERY): field_schema's, with the field's bounds. */
static json_t *input_schema(json_t *schemas, const ProtobufCMessageDescriptor *d,
                            const ProtobufCFieldDescriptor *f, direction_t dir)
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

static bool has_needed(const ProtobufCMessageDescriptor *d)
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
        set(s, "type", json_pack("[s,s]", json_string_value(type), "null"));
    } else if (json_is_array(type)) {
        push(type, json_string("null"));
    } else if (json_is_array(e)) {
        push(e, json_null());
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
static void add_message(json_t *schemas, const ProtobufCMessageDescriptor *d, direction_t dir)
{
    char name[MAX_NAME], jname[MAX_NAME];
    json_t *s, *props, *required;

    schema_name(d, dir, name);
    if (json_object_get(schemas, name) != NULL)
        return;
    s = json_pack("{s:s, s:s}", "type", "object", "title", d->name);
    set(schemas, name, s); /* before the fields: a message may hold itself */
    props = json_object();
    required = json_array();
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];

        json_name(f->name, jname);
        if (dir == DIR_OUT) {
            set(props, jname, field_schema(schemas, f, dir));
            push(required, json_string(jname));
        } else if (is_needed(d, f)) {
            set(props, jname, input_schema(schemas, d, f, DIR_IN));
            push(required, json_string(jname));
        } else {
            set(props, jname, or_null(input_schema(schemas, d, f, DIR_IN)));
        }
    }
    set(s, "properties", props);
    if (json_array_size(required) > 0)
        set(s, "required", required);
    else
        json_decref(required);
}

/* "/v1/products/{id=*}" -> "/v1/products/{id}"; the variables' fields into
 * vars (proto names, dotted). */
static size_t openapi_path(const char *pattern, char *out, size_t cap,
                           char vars[GW_MAX_PATH_VARS][GW_MAX_FIELD_PATH + 1])
{
    size_t n = 0, n_vars = 0;

    for (const char *p = pattern; *p != '\0' && n + 1 < cap; p++) {
        if (*p == '{') {
            const char *end = strchr(p, '}'), *eq = strchr(p, '=');
            size_t len = (size_t)((eq != NULL && eq < end ? eq : end) - p - 1);

            snprintf(vars[n_vars++], GW_MAX_FIELD_PATH + 1, "%.*s", (int)len, p + 1);
            n += (size_t)snprintf(out + n, cap - n, "{%.*s}", (int)len, p + 1);
            p = end;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return n_vars;
}

/* The field a dotted proto-name path names (gw_routes_validate checked it),
 * and the message that holds it in *owner. */
static const ProtobufCFieldDescriptor *field_at(const ProtobufCMessageDescriptor *d,
                                                const char *path,
                                                const ProtobufCMessageDescriptor **owner)
{
    char part[GW_MAX_FIELD_PATH + 1];
    const ProtobufCFieldDescriptor *f = NULL;

    while (d != NULL) {
        size_t len = strcspn(path, ".");
        snprintf(part, sizeof part, "%.*s", (int)len, path);
        *owner = d;
        f = protobuf_c_message_descriptor_get_field_by_name(d, part);
        if (f == NULL || path[len] == '\0')
            return f;
        d = f->descriptor;
        path += len + 1;
    }
    return f;
}

static bool is_bound(const char *path, char vars[GW_MAX_PATH_VARS][GW_MAX_FIELD_PATH + 1],
                     size_t n_vars)
{
    for (size_t i = 0; i < n_vars; i++) {
        size_t len = strlen(vars[i]);
        if (strncmp(path, vars[i], len) == 0 && (path[len] == '\0' || path[len] == '.'))
            return true;
    }
    return false;
}

/* The query parameters of a GET row: every scalar (or repeated scalar)
 * field not bound by the path, nested singular messages as "a.b" (JSON
 * names per part), as grpc-gateway's query parser reads them. */
static void add_query_params(json_t *params, json_t *schemas, const ProtobufCMessageDescriptor *d,
                             const char *proto_prefix, const char *json_prefix, int depth,
                             char vars[GW_MAX_PATH_VARS][GW_MAX_FIELD_PATH + 1], size_t n_vars)
{
    char ppath[GW_MAX_FIELD_PATH + 1], jpath[MAX_NAME], jname[MAX_NAME];

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];

        snprintf(ppath, sizeof ppath, "%s%s", proto_prefix, f->name);
        json_name(f->name, jname);
        snprintf(jpath, sizeof jpath, "%s%s", json_prefix, jname);
        if (is_bound(ppath, vars, n_vars) || is_map(f))
            continue;
        if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            if (f->label != PROTOBUF_C_LABEL_REPEATED && depth < MAX_NESTING) {
                char pp[sizeof ppath + 1], jp[sizeof jpath + 1];
                snprintf(pp, sizeof pp, "%s.", ppath);
                snprintf(jp, sizeof jp, "%s.", jpath);
                add_query_params(params, schemas, f->descriptor, pp, jp, depth + 1, vars, n_vars);
            }
            continue;
        }
        push(params, json_pack("{s:s, s:s, s:b, s:o}", "name", jpath, "in", "query", "required", 0,
                               "schema", input_schema(schemas, d, f, DIR_QUERY)));
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            json_t *p = json_array_get(params, json_array_size(params) - 1);
            set(p, "style", json_string("form"));
            set(p, "explode", json_true());
        }
    }
}

static json_t *header_ref(const char *name)
{
    char ref[MAX_NAME];

    snprintf(ref, sizeof ref, "#/components/headers/%s", name);
    return json_pack("{s:s}", "$ref", ref);
}

/* One response: the description, the JSON body and the headers that
 * status carries on this row. */
static json_t *response(const gw_route_t *r, int status, const char *description, json_t *schema)
{
    json_t *resp = json_pack("{s:s, s:{s:{s:o}}}", "description", description, "content",
                             "application/json", "schema", schema);
    json_t *headers = json_object();

    if (r->rate_class != NULL) {
        set(headers, "RateLimit-Policy", header_ref("RateLimit-Policy"));
        set(headers, "RateLimit", header_ref("RateLimit"));
    }
    if (status == 429 || status == 503)
        set(headers, "Retry-After", header_ref("Retry-After"));
    if (status == 401 || status == 403)
        set(headers, "WWW-Authenticate", header_ref("WWW-Authenticate"));
    if (r->rpc != NULL)
        set(headers, "X-Request-Id", header_ref("X-Request-Id"));
    if (json_object_size(headers) > 0)
        set(resp, "headers", headers);
    else
        json_decref(headers);
    return resp;
}

static void error(json_t *responses, const gw_route_t *r, int status, const char *description)
{
    char key[8];

    snprintf(key, sizeof key, "%d", status);
    set(responses, key, response(r, status, description, json_pack("{s:s}", "$ref", STATUS_REF)));
}

/* The statuses a row can answer, from what the row says (docs/gateway.md,
 * "Errors and statuses", "Security"); any other is "default". */
static json_t *responses(json_t *schemas, const gw_route_t *r, size_t n_vars)
{
    json_t *out = json_object();
    char name[MAX_NAME];

    if (r->rpc == NULL) {
        json_error_t jerr;
        json_t *body =
            r->local_schema != NULL ? json_loads(r->local_schema, 0, &jerr) : json_object();
        if (body == NULL) {
            fprintf(stderr, "openapi_gen: %s: local_schema: %s\n", r->pattern, jerr.text);
            exit(1);
        }
        set(out, "200", response(r, 200, "The answer.", json_incref(body)));
        error(out, r, 400, "The request is not well formed (its framing or its target).");
        error(out, r, 401, "The request carries a bearer token that does not verify.");
        set(out, "default",
            response(r, 0,
                     "Another status: the same body with another status word (readyz: 503 "
                     "while not ready), or a google.rpc.Status.",
                     json_pack("{s:[o,{s:s}]}", "anyOf", body, "$ref", STATUS_REF)));
        return out;
    }
    add_message(schemas, r->response, DIR_OUT);
    schema_name(r->response, DIR_OUT, name);
    set(out, "200", response(r, 200, "OK: the response message as protojson.", ref_to(name)));
    error(out, r, 400,
          r->body == GW_BODY_ALL
              ? "The body, a header or the request is invalid (gRPC INVALID_ARGUMENT, "
                "FAILED_PRECONDITION, OUT_OF_RANGE; a JSON the message cannot take)."
              : "A path or query value, a header or the request is invalid (gRPC "
                "INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE).");
    error(out, r, 401,
          r->scopes != 0 ? "No bearer token, or one that does not verify (UNAUTHENTICATED)."
                         : "A bearer token that does not verify, or none where "
                           "GATEWAY_PUBLIC_READS=off (UNAUTHENTICATED).");
    if (r->scopes != 0)
        error(out, r, 403, "The token has none of the route's scopes (PERMISSION_DENIED).");
    if (n_vars > 0)
        error(out, r, 404, "No such resource (NOT_FOUND).");
    if (r->idempotency == RS_NOT_IDEMPOTENT && gw_upstream_keeps_keys(r->upstream))
        error(out, r, 409,
              "The Idempotency-Key was used before with another request (ALREADY_EXISTS).");
    if (r->body == GW_BODY_ALL)
        error(out, r, 413, "The body is larger than GATEWAY_MAX_BODY_BYTES (64 KiB by default).");
    if (r->rate_class != NULL)
        error(out, r, 429,
              "Over the client's rate limit, or the upstream sheds load (RESOURCE_EXHAUSTED); "
              "retry after Retry-After.");
    error(out, r, 431,
          "The headers forwarded upstream are larger than GATEWAY_MAX_METADATA_BYTES.");
    error(out, r, 500, "The upstream failed (UNKNOWN, INTERNAL, DATA_LOSS).");
    error(out, r, 503,
          "The upstream is unavailable (UNAVAILABLE: its breaker is open, the bulkhead is "
          "full, the gateway is draining); Retry-After when the wait is known.");
    error(out, r, 504, "The deadline (Grpc-Timeout or the default) ran out (DEADLINE_EXCEEDED).");
    set(out, "default",
        response(r, 0, "Any other gRPC status, mapped as docs/gateway.md says (e.g. 501).",
                 json_pack("{s:s}", "$ref", STATUS_REF)));
    return out;
}

/* Who may call: a public row takes a token or none; a scoped row needs a
 * token with any one of its scopes. OpenAPI 3.1 lets a non-OAuth scheme's
 * requirement list role names: each scope is one alternative. */
static json_t *security(const gw_route_t *r)
{
    json_t *alts = json_array();

    if (r->scopes == 0) {
        push(alts, json_object());
        if (r->rpc != NULL)
            push(alts, json_pack("{s:[]}", BEARER));
        return alts;
    }
    for (unsigned bit = 0; bit < 32; bit++) {
        const char *name = pr_scope_name(r->scopes & (1u << bit));
        if ((r->scopes & (1u << bit)) != 0 && name[0] != '\0')
            push(alts, json_pack("{s:[s]}", BEARER, name));
    }
    return alts;
}

static json_t *operation(json_t *schemas, const gw_route_t *r)
{
    char vars[GW_MAX_PATH_VARS][GW_MAX_FIELD_PATH + 1], path[512], id[MAX_NAME], scopes[256];
    size_t n_vars = openapi_path(r->pattern, path, sizeof path, vars);
    json_t *op = json_object(), *params = json_array();
    const char *method_name;

    if (r->rpc != NULL) {
        /* "/shopmicro.catalog.v1.CatalogService/GetProduct" -> "CatalogService_GetProduct",
         * the operationId protoc-gen-openapiv2 gives */
        const char *slash = strrchr(r->rpc, '/'), *dot = slash;
        while (dot > r->rpc && dot[-1] != '.')
            dot--;
        method_name = slash + 1;
        snprintf(id, sizeof id, "%.*s_%s", (int)(slash - dot), dot, method_name);
        set(op, "tags", json_pack("[s]", gw_upstream_name(r->upstream)));
        set(op, "summary", json_string(method_name));
    } else {
        snprintf(id, sizeof id, "ops%s", r->pattern);
        for (char *p = id; *p != '\0'; p++)
            if (*p == '/' || *p == '.')
                *p = '_';
        set(op, "tags", json_pack("[s]", "operations"));
    }
    set(op, "operationId", json_string(id));
    {
        size_t n = 0;
        scopes[0] = '\0';
        for (unsigned bit = 0; bit < 32; bit++)
            if ((r->scopes & (1u << bit)) != 0)
                n += (size_t)snprintf(scopes + n, sizeof scopes - n, "%s`%s`", n > 0 ? ", " : "",
                                      pr_scope_name(1u << bit));
        char desc[1024];
        snprintf(desc, sizeof desc, "%s%s%s%s%s%s%s", r->rpc != NULL ? "gRPC `" : "Local route",
                 r->rpc != NULL ? r->rpc : "", r->rpc != NULL ? "`" : "",
                 r->scopes != 0 ? ". Needs a bearer token with any of: " : ". Public", scopes,
                 r->rate_class != NULL ? ". Rate class: " : ". Not rate limited",
                 r->rate_class != NULL ? r->rate_class : "");
        set(op, "description", json_string(desc));
    }
    for (size_t i = 0; i < n_vars; i++) {
        const ProtobufCMessageDescriptor *owner = r->request;
        const ProtobufCFieldDescriptor *f = field_at(r->request, vars[i], &owner);
        push(params, json_pack("{s:s, s:s, s:b, s:o}", "name", vars[i], "in", "path", "required", 1,
                               "schema", input_schema(schemas, owner, f, DIR_IN)));
    }
    if (r->rpc != NULL && r->body == GW_BODY_NONE)
        add_query_params(params, schemas, r->request, "", "", 0, vars, n_vars);
    if (r->rpc != NULL && r->idempotency == RS_NOT_IDEMPOTENT &&
        gw_upstream_keeps_keys(r->upstream))
        push(params, json_pack("{s:s, s:s, s:b, s:s, s:{s:s, s:s}}", "name", "Idempotency-Key",
                               "in", "header", "required", 0, "description",
                               "A replay with the same key and request returns the first "
                               "answer; with another request it is 409.",
                               "schema", "type", "string", "pattern", "^[!-~]{1,255}$"));
    if (json_array_size(params) > 0)
        set(op, "parameters", params);
    else
        json_decref(params);
    if (r->rpc != NULL && r->body == GW_BODY_ALL) {
        char name[MAX_NAME];
        add_message(schemas, r->request, DIR_IN);
        schema_name(r->request, DIR_IN, name);
        /* an empty body is the default request (PBJ_DECODE_ALLOW_EMPTY),
         * which will do unless a field must be given */
        set(op, "requestBody",
            json_pack("{s:b, s:{s:{s:o}}}", "required", has_needed(r->request), "content",
                      "application/json", "schema", ref_to(name)));
    }
    set(op, "responses", responses(schemas, r, n_vars));
    set(op, "security", security(r));
    return op;
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

static json_t *components(json_t *schemas)
{
    json_error_t jerr;
    json_t *errors = json_loads(error_schemas, 0, &jerr);

    if (errors == NULL) {
        fprintf(stderr, "openapi_gen: error_schemas: %s (column %d)\n", jerr.text, jerr.column);
        exit(1);
    }
    json_object_update(schemas, errors);
    json_decref(errors);
    return json_pack(
        "{s:o, s:{s:{s:s, s:s, s:s, s:s}}, s:{s:{s:s, s:{s:s}}, s:{s:s, s:{s:s}}, "
        "s:{s:s, s:{s:s, s:i}}, s:{s:s, s:{s:s}}, s:{s:s, s:{s:s}}}}",
        "schemas", schemas, "securitySchemes", BEARER, "type", "http", "scheme", "bearer",
        "bearerFormat", "JWT", "description",
        "An ES256 or RS256 JWT of the configured issuer and audience; its `scope` (or `scp`) "
        "claim gives the scopes each operation's security requirement names "
        "(docs/gateway.md, \"Who may call\").",
        "headers", "RateLimit-Policy", "description",
        "The route's rate class: q the burst, w the seconds to refill "
        "(draft-ietf-httpapi-ratelimit-headers-10).",
        "schema", "type", "string", "RateLimit", "description",
        "The client's bucket: r requests left now, t seconds until full.", "schema", "type",
        "string", "Retry-After", "description", "Seconds to wait before retrying.", "schema",
        "type", "integer", "minimum", 1, "WWW-Authenticate", "description",
        "The bearer challenge (RFC 6750).", "schema", "type", "string", "X-Request-Id",
        "description", "The request id, also in every log line of the request.", "schema", "type",
        "string");
}

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN];
    json_t *doc, *paths = json_object(), *schemas = json_object();

    if (argc != 2) {
        fprintf(stderr, "usage: openapi_gen OUT.json\n");
        return 2;
    }
    if (gw_routes_validate(gw_routes, gw_n_routes, errbuf) != SVC_OK) {
        fprintf(stderr, "openapi_gen: %s\n", errbuf);
        return 1;
    }
    for (size_t i = 0; i < gw_n_routes; i++) {
        const gw_route_t *r = &gw_routes[i];
        char vars[GW_MAX_PATH_VARS][GW_MAX_FIELD_PATH + 1], path[512], method[16];
        json_t *item;

        openapi_path(r->pattern, path, sizeof path, vars);
        item = json_object_get(paths, path);
        if (item == NULL) {
            item = json_object();
            set(paths, path, item);
        }
        snprintf(method, sizeof method, "%s", r->method);
        for (char *p = method; *p != '\0'; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        set(item, method, operation(schemas, r));
    }
    for (size_t i = 0; shopmicro_limits[i].message != NULL; i++)
        if (i >= MAX_LIMITS || !limit_used[i]) {
            fprintf(stderr,
                    "openapi_gen: shopmicro_limits: %s.%s is no field of a request of the public "
                    "port\n",
                    shopmicro_limits[i].message, shopmicro_limits[i].field);
            return 1;
        }
    doc = json_pack("{s:s, s:{s:s, s:s, s:s}, s:o, s:o}", "openapi", "3.1.0", "info", "title",
                    "ShopMicro API", "version", "v1", "description",
                    "The REST gateway's public port, generated from its route table and the "
                    "proto descriptors (gateway/tools/openapi_gen.c). JSON follows grpc-gateway "
                    "v2's protojson rules; every error body is a google.rpc.Status.",
                    "paths", paths, "components", components(schemas));
    if (doc == NULL || json_dump_file(doc, argv[1], JSON_INDENT(2) | JSON_ENSURE_ASCII) != 0) {
        fprintf(stderr, "openapi_gen: cannot write %s\n", argv[1]);
        return 1;
    }
    json_decref(doc);
    return 0;
}
