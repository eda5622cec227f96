/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h - the HTTP side of the gateway's vocabulary: the one table from
 * gRPC status codes to HTTP statuses (grpc-gateway's HTTPStatusFromCode),
 * the Grpc-Timeout parser, request ids, and the two
 * functions every response goes through.
 *
 * Every response gets a Content-Length. Without one h2o 2.2.5 answers
 * errors with "Connection: close" and successes chunked; with one, an error
 * never costs the client its keep-alive connection.
 */
#ifndef GW_HTTP_H
#define GW_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "svc/core.h"

/* HTTP status for a gRPC code 0..16 (runtime/errors.go); 500 for any other. */
int gw_http_status_from_grpc(int code);
/* Reason phrase for the statuses the gateway sends ("Not Found"); "Unknown"
 * for others. Never NULL. */
const char *gw_http_reason(int status);

/*
 * Parses a Grpc-Timeout value "<int><unit>", unit one of H M S m u n, the
 * integer as Go's strconv.ParseInt(s, 10, 64) reads it (an optional sign,
 * decimal digits, no spaces). Sets *out_ns (saturated to INT64_MIN..MAX;
 * zero or negative means "already expired") and returns true; false for a
 * malformed value (400 "invalid grpc-timeout: <value>").
 */
bool gw_grpc_timeout_parse(const char *s, size_t len, int64_t *out_ns);

/* What a request's Grpc-Timeout makes of its call; each value is the gRPC
 * code of the gateway's answer (0: the call goes on). */
typedef enum gw_timeout_verdict {
    GW_TIMEOUT_OK = 0,      /* *deadline_ns is the call's deadline (SVC_DEADLINE_NONE: none) */
    GW_TIMEOUT_INVALID = 3, /* INVALID_ARGUMENT, 400 "invalid grpc-timeout: <value>" */
    GW_TIMEOUT_EXPIRED = 4, /* DEADLINE_EXCEEDED, 504 at once: nothing is sent upstream */
} gw_timeout_verdict_t;

/*
 * The overall deadline (monotonic ns) of a call whose request arrived at
 * start_ns and is forwarded at now_ns, from its Grpc-Timeout value s (len
 * bytes), as grpc-gateway v2's annotateContext makes its context:
 *   s NULL (no header) or empty: default_ms after start_ns (0: none);
 *   zero in any unit: no deadline at all (not the default);
 *   negative, or start_ns + value <= now_ns ("1n"): GW_TIMEOUT_EXPIRED;
 *   otherwise start_ns + value, saturated (grpc-gateway's product wraps);
 *   malformed (gw_grpc_timeout_parse): GW_TIMEOUT_INVALID.
 * On a verdict other than OK, errbuf (SVC_ERRBUF_LEN) gets the answer's
 * message and *deadline_ns is left alone.
 */
gw_timeout_verdict_t gw_grpc_timeout_deadline(const char *s, size_t len, int64_t default_ms,
                                              uint64_t start_ns, uint64_t now_ns,
                                              uint64_t *deadline_ns,
                                              char errbuf[static SVC_ERRBUF_LEN]);

/* Request ids: at most this many characters of [A-Za-z0-9-_.:/+=@]. */
#define GW_REQUEST_ID_MAX 63
/* Copies the allowed characters of in (len bytes) into out (at most
 * GW_REQUEST_ID_MAX of them, NUL-terminated) and returns how many; 0 means
 * "generate one". */
size_t gw_request_id_sanitize(const char *in, size_t len, char out[GW_REQUEST_ID_MAX + 1]);

/*
 * Checks the framing of an HTTP/1.x request head as received (request line,
 * header lines, the empty line; head may go on with the body, which is not
 * read). Refused, by RFC 9112 §5 and §6, with the reason in errbuf:
 *   - a header line that starts with whitespace (obsolete line folding);
 *   - a header name that is empty or not a token (whitespace in it, or
 *     before the colon);
 *   - a Content-Length that is not one decimal number ("3, 46", "+3");
 *   - two Content-Length headers with different values (identical repeats
 *     are one value, as in Go's net/http);
 *   - more than one Transfer-Encoding header;
 *   - Transfer-Encoding with Content-Length, or in an HTTP/1.0 request;
 *   - no empty line within len bytes.
 * Each is a message whose length a proxy and this gateway could read
 * differently (request smuggling). Pure; thread-safe.
 */
bool gw_http1_framing_check(const char *head, size_t len, bool http10,
                            char errbuf[static SVC_ERRBUF_LEN]);

/* True when v (len bytes) is an idempotency key by svc_idempotency_key_valid
 * (svc/core.h: 1-255 characters 0x21-0x7E); otherwise the reason, starting
 * with name (the header, e.g. "Idempotency-Key"), is in errbuf. */
bool gw_idempotency_key_check(const char *name, const char *v, size_t len,
                              char errbuf[static SVC_ERRBUF_LEN]);

/* What one metadata entry costs against gRPC's metadata size limit: name,
 * value and 32 bytes (the HPACK entry size, RFC 7541 §4.1). */
#define GW_MD_ENTRY_OVERHEAD 32

/* Retry-After seconds for a wait of ms: rounded up, at least 1. */
uint32_t gw_retry_after_seconds(uint32_t ms);

struct st_h2o_req_t;

/* Sends a complete response: status, Content-Type, Content-Length, body
 * (copied). Loop thread only. */
void gw_http_send(struct st_h2o_req_t *req, int status, const char *content_type, const char *body,
                  size_t len);

/* Adds the response header name (lower: its lower-case form) with value's
 * len bytes, copied into the request's pool, since h2o keeps pointers to
 * both until the response is sent. Loop thread only. */
void gw_http_add_header(struct st_h2o_req_t *req, const char *lower, const char *name,
                        const char *value, size_t len);

/*
 * Sends the error body of e (status.h) with its HTTP status. Adds
 * WWW-Authenticate: <message> for UNAUTHENTICATED when the response has no
 * WWW-Authenticate yet, and, when e->retry_after_s > 0, Retry-After. Loop
 * thread only.
 */
void gw_http_send_error(struct st_h2o_req_t *req, const gw_error_t *e);

#endif
