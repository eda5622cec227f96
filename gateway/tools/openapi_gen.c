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
 *
 * This file is the document: paths, operations, parameters, responses,
 * security, components. The JSON Schemas of the messages, their bounds and
 * the error bodies are openapi_schema.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "openapi_schema.h"
#include "ops.h"
#include "routes.h"

/* The route table links the /openapi.json route, which serves the embedded
 * document this program makes; the program itself serves nothing, so it
 * carries an empty one instead of the one it is about to write. */
const unsigned char gw_openapi_json[] = "";
const size_t gw_openapi_json_len = 0;

#define BEARER      "bearerAuth"
#define MAX_NESTING 8 /* how deep add_query_params follows nested messages */

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
    char ppath[GW_MAX_FIELD_PATH + 1], jpath[OAS_MAX_NAME], jname[OAS_MAX_NAME];

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];

        snprintf(ppath, sizeof ppath, "%s%s", proto_prefix, f->name);
        oas_json_name(f->name, jname);
        snprintf(jpath, sizeof jpath, "%s%s", json_prefix, jname);
        if (is_bound(ppath, vars, n_vars) || oas_is_map(f))
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
        oas_push(params, json_pack("{s:s, s:s, s:b, s:o}", "name", jpath, "in", "query", "required",
                                   0, "schema", oas_input_schema(schemas, d, f, OAS_DIR_QUERY)));
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            json_t *p = json_array_get(params, json_array_size(params) - 1);
            oas_set(p, "style", json_string("form"));
            oas_set(p, "explode", json_true());
        }
    }
}

static json_t *header_ref(const char *name)
{
    char ref[OAS_MAX_NAME];

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
        oas_set(headers, "RateLimit-Policy", header_ref("RateLimit-Policy"));
        oas_set(headers, "RateLimit", header_ref("RateLimit"));
    }
    if (status == 429 || status == 503)
        oas_set(headers, "Retry-After", header_ref("Retry-After"));
    if (status == 401 || status == 403)
        oas_set(headers, "WWW-Authenticate", header_ref("WWW-Authenticate"));
    if (r->rpc != NULL)
        oas_set(headers, "X-Request-Id", header_ref("X-Request-Id"));
    if (json_object_size(headers) > 0)
        oas_set(resp, "headers", headers);
    else
        json_decref(headers);
    return resp;
}

static void error(json_t *responses, const gw_route_t *r, int status, const char *description)
{
    char key[8];

    snprintf(key, sizeof key, "%d", status);
    oas_set(responses, key,
            response(r, status, description, json_pack("{s:s}", "$ref", OAS_STATUS_REF)));
}

/* The statuses a row can answer, from what the row says (docs/gateway.md,
 * "Errors and statuses", "Security"); any other is "default". */
static json_t *responses(json_t *schemas, const gw_route_t *r, size_t n_vars)
{
    json_t *out = json_object();

    if (r->rpc == NULL) {
        json_error_t jerr;
        json_t *body =
            r->local_schema != NULL ? json_loads(r->local_schema, 0, &jerr) : json_object();
        if (body == NULL) {
            fprintf(stderr, "openapi_gen: %s: local_schema: %s\n", r->pattern, jerr.text);
            exit(1);
        }
        oas_set(out, "200", response(r, 200, "The answer.", json_incref(body)));
        error(out, r, 400, "The request is not well formed (its framing or its target).");
        error(out, r, 401, "The request carries a bearer token that does not verify.");
        oas_set(out, "default",
                response(r, 0,
                         "Another status: the same body with another status word (readyz: 503 "
                         "while not ready), or a google.rpc.Status.",
                         json_pack("{s:[o,{s:s}]}", "anyOf", body, "$ref", OAS_STATUS_REF)));
        return out;
    }
    oas_set(out, "200",
            response(r, 200, "OK: the response message as protojson.",
                     oas_message_ref(schemas, r->response, OAS_DIR_OUT)));
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
    oas_set(out, "default",
            response(r, 0, "Any other gRPC status, mapped as docs/gateway.md says (e.g. 501).",
                     json_pack("{s:s}", "$ref", OAS_STATUS_REF)));
    return out;
}

/* Who may call: a public row takes a token or none; a scoped row needs a
 * token with any one of its scopes. OpenAPI 3.1 lets a non-OAuth scheme's
 * requirement list role names: each scope is one alternative. */
static json_t *security(const gw_route_t *r)
{
    json_t *alts = json_array();

    if (r->scopes == 0) {
        oas_push(alts, json_object());
        if (r->rpc != NULL)
            oas_push(alts, json_pack("{s:[]}", BEARER));
        return alts;
    }
    for (unsigned bit = 0; bit < 32; bit++) {
        const char *name = pr_scope_name(r->scopes & (1u << bit));
        if ((r->scopes & (1u << bit)) != 0 && name[0] != '\0')
            oas_push(alts, json_pack("{s:[s]}", BEARER, name));
    }
    return alts;
}

static json_t *operation(json_t *schemas, const gw_route_t *r)
{
    char vars[GW_MAX_PATH_VARS][GW_MAX_FIELD_PATH + 1], path[512], id[OAS_MAX_NAME], scopes[256];
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
        oas_set(op, "tags", json_pack("[s]", gw_upstream_name(r->upstream)));
        oas_set(op, "summary", json_string(method_name));
    } else {
        snprintf(id, sizeof id, "ops%s", r->pattern);
        for (char *p = id; *p != '\0'; p++)
            if (*p == '/' || *p == '.')
                *p = '_';
        oas_set(op, "tags", json_pack("[s]", "operations"));
    }
    oas_set(op, "operationId", json_string(id));
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
        oas_set(op, "description", json_string(desc));
    }
    for (size_t i = 0; i < n_vars; i++) {
        const ProtobufCMessageDescriptor *owner = r->request;
        const ProtobufCFieldDescriptor *f = field_at(r->request, vars[i], &owner);
        oas_push(params,
                 json_pack("{s:s, s:s, s:b, s:o}", "name", vars[i], "in", "path", "required", 1,
                           "schema", oas_input_schema(schemas, owner, f, OAS_DIR_IN)));
    }
    if (r->rpc != NULL && r->body == GW_BODY_NONE)
        add_query_params(params, schemas, r->request, "", "", 0, vars, n_vars);
    if (r->rpc != NULL && r->idempotency == RS_NOT_IDEMPOTENT &&
        gw_upstream_keeps_keys(r->upstream))
        oas_push(params, json_pack("{s:s, s:s, s:b, s:s, s:{s:s, s:s}}", "name", "Idempotency-Key",
                                   "in", "header", "required", 0, "description",
                                   "A replay with the same key and request returns the first "
                                   "answer; with another request it is 409.",
                                   "schema", "type", "string", "pattern", "^[!-~]{1,255}$"));
    if (json_array_size(params) > 0)
        oas_set(op, "parameters", params);
    else
        json_decref(params);
    if (r->rpc != NULL && r->body == GW_BODY_ALL) {
        /* an empty body is the default request (PBJ_DECODE_ALLOW_EMPTY),
         * which will do unless a field must be given */
        oas_set(op, "requestBody",
                json_pack("{s:b, s:{s:{s:o}}}", "required", oas_has_needed(r->request), "content",
                          "application/json", "schema",
                          oas_message_ref(schemas, r->request, OAS_DIR_IN)));
    }
    oas_set(op, "responses", responses(schemas, r, n_vars));
    oas_set(op, "security", security(r));
    return op;
}

static json_t *components(json_t *schemas)
{
    oas_add_error_schemas(schemas);
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
            oas_set(paths, path, item);
        }
        snprintf(method, sizeof method, "%s", r->method);
        for (char *p = method; *p != '\0'; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        oas_set(item, method, operation(schemas, r));
    }
    /* after every operation: only then has each request schema been made */
    if (!oas_limits_all_used())
        return 1;
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
