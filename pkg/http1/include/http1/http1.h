/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http1.h - parses the head of an HTTP/1.x request (RFC 9112): the request
 * line and the header fields, nothing else.
 *
 * The project's small blocking listeners (pkg/admin's port, the
 * notify-sink) read outside input with it, so there is one parser to get
 * right and to fuzz (tests/fuzz/fuzz_http1.c) rather than one per listener.
 * The gateway does not use it: h2o parses its requests.
 *
 * It is strict where leniency has been an attack (request smuggling): a
 * NUL or a bare LF anywhere in the head, a field name with a space before
 * its colon, a malformed or repeated-and-different Content-Length, and an
 * obs-fold continuation line are all 400. Transfer-Encoding is reported,
 * not decoded: the callers take no chunked bodies and say so with their
 * own status.
 *
 * Pure and thread-safe; the results point into the caller's buffer.
 *
 * Fuzzed by tests/fuzz/fuzz_http1.c: ctest runs it as fuzz_http1_bounded
 * (200,000 deterministic inputs); a libFuzzer run is built and started as
 * docs/pbjson.md shows for fuzz_pbjson (ninja -C build-fuzz fuzz_http1).
 */
#ifndef HTTP1_HTTP1_H
#define HTTP1_HTTP1_H

#include <stdbool.h>
#include <stddef.h>

#define H1_MAX_HEADERS 48

/* A slice of the caller's buffer, not NUL-terminated. */
typedef struct h1_str {
    const char *p;
    size_t len;
} h1_str_t;

typedef struct h1_header {
    h1_str_t name;  /* as sent; compare case-insensitively (h1_header_find) */
    h1_str_t value; /* without the surrounding spaces and tabs */
} h1_header_t;

typedef struct h1_request {
    h1_str_t method;
    h1_str_t path;     /* the target up to '?' (starts with '/') */
    h1_str_t query;    /* after '?'; p NULL when the target has none */
    int minor_version; /* HTTP/1.0 -> 0, HTTP/1.1 -> 1 */
    size_t head_len;   /* bytes of the head, its blank line included */
    bool has_content_length;
    unsigned long long content_length; /* 0 without the field */
    bool transfer_encoding;            /* a Transfer-Encoding field is present */
    bool keep_alive;                   /* what the version and Connection field ask for */
    size_t n_headers;
    h1_header_t headers[H1_MAX_HEADERS];
} h1_request_t;

typedef enum h1_result {
    H1_INCOMPLETE = 0,  /* no blank line yet, and fewer than max_head bytes: read more */
    H1_OK = 1,          /* *req is filled */
    H1_BAD = 400,       /* malformed */
    H1_TOO_LARGE = 431, /* the head is longer than max_head, or has too many fields */
} h1_result_t;

/*
 * Parses the head at the start of buf[0..len) (a body may follow it; its
 * bytes are not looked at). max_head bounds the head, blank line included.
 * On H1_OK every slice of *req points into buf; on anything else *req is
 * unspecified.
 */
h1_result_t h1_parse_request(const char *buf, size_t len, size_t max_head, h1_request_t *req);

/* The first field called name (ASCII case-insensitive), or NULL. */
const h1_header_t *h1_header_find(const h1_request_t *req, const char *name);

/* Whether s equals the NUL-terminated lit exactly (case-sensitive). */
bool h1_str_is(h1_str_t s, const char *lit);

#endif
