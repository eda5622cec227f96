/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bind.h - builds a route's gRPC request message from the HTTP request, the
 * way grpc-gateway's generated handlers do:
 *
 *   body "*"  pbj_decode(body) (an empty body is the default message), then
 *             the path variables; the query string is ignored.
 *   no body   a default message, the path variables, then every query
 *             parameter (url.ParseQuery rules: '&' separates, '+' is a
 *             space, %XX escapes; a ';' in a key is an error; fields bound
 *             by the path are not overwritten by the query).
 *
 * Every rejection is SVC_EINVAL with a grpc-gateway style message in errbuf
 * (HTTP 400, code 3). Pure: no h2o, no network; thread-safe.
 */
#ifndef GW_BIND_H
#define GW_BIND_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "routes.h"

/*
 * m      a GW_MATCH_OK match of a gRPC route; borrowed.
 * query  the text after '?' (query_len bytes, may be NULL), borrowed.
 * body   the request body (body_len bytes, may be NULL), borrowed.
 * out    on SVC_OK a new message owned by caller: pbj_message_free(*out, NULL).
 * Returns SVC_OK, SVC_EINVAL (client error), SVC_EINTERNAL (the table names
 * a field the message lacks) or SVC_ENOMEM; errbuf (SVC_ERRBUF_LEN) says why.
 */
svc_err_t gw_bind_request(const gw_match_t *m, const char *query, size_t query_len,
                          const char *body, size_t body_len, ProtobufCMessage **out,
                          char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Percent-decodes src (len bytes) into dst (at least len + 1 bytes; the
 * result is NUL-terminated and never longer than src). plus_is_space: the
 * query-string rule. Returns false on a malformed escape (dst then holds
 * the offending "%.." triple, NUL-terminated, for the message).
 */
bool gw_percent_decode(const char *src, size_t len, bool plus_is_space, char *dst, size_t *dst_len);

#endif
