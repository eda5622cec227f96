/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status.h - the gateway's error body: google.rpc.Status in protojson, the
 * way grpc-gateway renders it, with the details a client can act on
 * (docs/gateway.md, "Errors"):
 *
 *   {"code":14,"message":"...","details":[
 *     {"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"BREAKER_OPEN",
 *      "domain":"gateway.shopmicro","metadata":{"upstream":"catalog"}},
 *     {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}
 *
 * Every error has exactly one ErrorInfo: the upstream's when it sent one
 * and the gateway did not decide the answer itself, else the gateway's.
 * It has a RetryInfo exactly when it has a Retry-After, with the same
 * wait. An upstream's BadRequest is kept; other upstream details are
 * dropped (the gateway cannot render a type it does not know, and
 * protojson would refuse to).
 */
#ifndef GW_STATUS_H
#define GW_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "rpc/rpc.h"

/* ErrorInfo.domain of the answers the gateway decides. */
#define GW_ERROR_DOMAIN "gateway.shopmicro"

typedef struct gw_error {
    int status;          /* HTTP status; 0: gw_http_status_from_grpc(code) */
    int code;            /* gRPC status code 0..16 */
    const char *message; /* the client's text; NUL-terminated, borrowed */
    /* ErrorInfo.reason when the gateway decided the answer (UPPER_SNAKE,
     * static); NULL: the upstream's ErrorInfo, or the code's name. */
    const char *reason;
    const char *upstream;   /* ErrorInfo.metadata "upstream" of the gateway's; NULL: none */
    uint32_t retry_after_s; /* Retry-After and RetryInfo; 0: neither */
    const rpc_status_details_t *details; /* the upstream's google.rpc.Status; NULL: none */
} gw_error_t;

/*
 * Writes the body of e into buf, like snprintf: at most cap bytes including
 * a NUL, and returns the length the whole body needs. Strings are
 * JSON-escaped as protojson does; bytes that are not valid UTF-8 become
 * U+FFFD, so the body is always valid JSON. Pure; thread-safe.
 */
size_t gw_error_body(char *buf, size_t cap, const gw_error_t *e);

/*
 * Appends s (len bytes) JSON-escaped, without quotes, at buf + pos, like
 * gw_error_body: writes what fits below cap - 1, keeps buf NUL-terminated
 * when cap > 0, and returns pos + the escaped length.
 */
size_t gw_json_escape(char *buf, size_t cap, size_t pos, const char *s, size_t len);

#endif
