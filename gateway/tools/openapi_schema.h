/* SPDX-License-Identifier: Apache-2.0 */
/*
 * openapi_schema.h - the JSON Schemas of the OpenAPI document (openapi_gen):
 * protobuf-c messages as pbjson writes and reads them, the bounds of
 * shopmicro/limits.h on the request fields, and the google.rpc.Status error
 * schemas. Part of the openapi_gen build tool only; everything that is not
 * a schema (paths, operations, responses, security) is openapi_gen.c's.
 */
#ifndef GW_OPENAPI_SCHEMA_H
#define GW_OPENAPI_SCHEMA_H

#include <stdbool.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#define OAS_MAX_NAME   256
#define OAS_STATUS_REF "#/components/schemas/google.rpc.Status"

/* Which side of the gateway a schema describes: protojson is asymmetric
 * (pbj_encode writes less variety than pbj_decode reads), so a message has
 * one schema per side. */
typedef enum oas_dir {
    OAS_DIR_OUT,   /* what pbj_encode writes: every field, int64 as a string */
    OAS_DIR_IN,    /* what pbj_decode accepts: any field may be missing, int64 a number too */
    OAS_DIR_QUERY, /* a query parameter: as IN, but an integer is its text, never a JSON string */
} oas_dir_t;

/* Adds v under key / appends v, taking the reference; abort on allocation
 * failure (a build tool: failing loudly is the right answer). */
void oas_set(json_t *obj, const char *key, json_t *v);
void oas_push(json_t *arr, json_t *v);

/* protoc's ToJsonName: "page_size" -> "pageSize" (pbjson's names). */
void oas_json_name(const char *proto, char out[static OAS_MAX_NAME]);

/* Adds components/schemas entries for message d (and the messages it
 * holds) on side dir once, and answers a $ref to it. */
json_t *oas_message_ref(json_t *schemas, const ProtobufCMessageDescriptor *d, oas_dir_t dir);

/* The schema of field f of message d in a request (dir OAS_DIR_IN or
 * OAS_DIR_QUERY), with the field's bounds. */
json_t *oas_input_schema(json_t *schemas, const ProtobufCMessageDescriptor *d,
                         const ProtobufCFieldDescriptor *f, oas_dir_t dir);

/* Whether f is a map field (its values are an object, not a query
 * parameter). */
bool oas_is_map(const ProtobufCFieldDescriptor *f);

/* Whether a request of message d must have a field (its default is out of
 * its bounds), so that an empty body will not do. */
bool oas_has_needed(const ProtobufCMessageDescriptor *d);

/* Adds the google.rpc.Status schema and those of its details to schemas. */
void oas_add_error_schemas(json_t *schemas);

/* Whether every row of shopmicro_limits bounded a field some schema met;
 * names the first that did not on stderr. Call after every schema is made:
 * a row naming no public request field would be a bound nobody declares. */
bool oas_limits_all_used(void);

#endif
