/* SPDX-License-Identifier: Apache-2.0 */
/*
 * headers.h - what the gateway reads from a request's head before it
 * routes, decodes or calls anything (dispatch.h says in which order):
 *
 *   - whether its framing is unambiguous (RFC 9112 §5, §6.3): the check
 *     itself is gw_http1_framing_check (http.h, pure); this finds the head
 *     as received, which h2o does not keep in req->headers;
 *   - the gRPC metadata its headers become (grpc-gateway's
 *     runtime/context.go annotateContext): Idempotency-Key validated,
 *     Grpc-Metadata-* forwarded, the total bounded as gRPC counts it;
 *
 * and, the other way, the response headers an upstream's reply metadata
 * becomes (runtime/handler.go handleForwardResponseServerMetadata).
 *
 * Loop thread only: everything here reads the request and allocates from
 * its pool.
 */
#ifndef GW_HEADERS_H
#define GW_HEADERS_H

#include <stddef.h>

#include <h2o.h>

#include "config.h"
#include "jwt.h"
#include "rpc/rpc.h"
#include "rs/grpc.h"

/* The most metadata entries rs_grpc takes per call: size the array given
 * to gw_build_metadata with it. */
#define GW_MAX_MD RS_GRPC_MAX_MD

/* The connection's socket; NULL when the connection has none to give. */
h2o_socket_t *gw_req_socket(h2o_req_t *req);

/* The request header `name` (lower case, len bytes), first of its kind;
 * NULL when absent. */
const h2o_header_t *gw_find_header(h2o_req_t *req, const char *name, size_t len);

/*
 * Checks the request's framing as it arrived. Returns 0 when it is
 * unambiguous; otherwise the gRPC code of the refusal with the reason in
 * errbuf: 3 (INVALID_ARGUMENT) for a head a proxy could read differently,
 * 13 (INTERNAL) when the head is not where this h2o version keeps it, so
 * it cannot be checked (refused rather than let through unchecked). The
 * caller closes the connection either way: what follows on it may be a
 * smuggled request.
 */
int gw_framing_verdict(h2o_req_t *req, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Request id (id), the principal (who: the verified token's subject and
 * scopes as principal.h's entries; NULL: anonymous), Idempotency-Key, Grpc-Metadata-* (but x-shopmicro-*), then the
 * forwarding headers and the permanent headers as md (at most GW_MAX_MD
 * entries, allocated from the request's pool) and cfg->max_metadata_bytes.
 * Returns 0 with *n set, or the HTTP status of the refusal (400: bad or
 * repeated Idempotency-Key, 431: too large), errbuf naming the header.
 */
int gw_build_metadata(h2o_req_t *req, const gw_config_t *cfg, const char *id,
                      const gw_principal_t *who, rpc_md_t *md, size_t *n,
                      char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Adds Grpc-Metadata-<Key> for each entry of the upstream reply's header
 * metadata h, to a success and to an error alike (grpc-gateway's default
 * outgoing header matcher; Key canonicalised as Go's net/http writes it:
 * "idempotent-replayed" becomes "Grpc-Metadata-Idempotent-Replayed"). gRPC's
 * own entries are not in h (rpc.h). Copies into the request's pool.
 */
void gw_add_response_metadata(h2o_req_t *req, const rpc_header_md_t *h);

#endif
