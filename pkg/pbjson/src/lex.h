/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lex.h - the JSON reader under decode.c: tokens, object and array
 * iteration with the depth limit, skipping, and positioned error messages.
 *
 * It validates strictly (RFC 8259 plus Go's UTF-8 rules) because the Go
 * gateway validates the whole body with encoding/json before protojson
 * sees it, unknown fields included.
 */
#ifndef PBJ_LEX_H
#define PBJ_LEX_H

#include "internal.h"

typedef struct pbj__dec {
    const char *in;
    size_t len;
    size_t pos;     /* next byte to read */
    unsigned depth; /* open objects and arrays */
    ProtobufCAllocator *alloc;
    char *errbuf;
    char *scratch; /* decoded text of the last string looked at */
    size_t scratch_cap;
} pbj__dec_t;

typedef enum {
    PBJ__T_EOF, /* only in a token whose read failed */
    PBJ__T_OBJ, /* '{' (consumed) */
    PBJ__T_ARR, /* '[' (consumed) */
    PBJ__T_STR,
    PBJ__T_NUM,
    PBJ__T_TRUE,
    PBJ__T_FALSE,
    PBJ__T_NULL,
} pbj__tkind_t;

typedef struct pbj__tok {
    pbj__tkind_t kind;
    size_t start, end; /* raw text in the input; a string includes its quotes */
} pbj__tok_t;

/* Skips whitespace and reads the next token. A string or number is
 * validated and consumed whole; for '{' and '[' only that byte is. The end
 * of the input is an error ("unexpected EOF"). */
svc_err_t pbj__next(pbj__dec_t *d, pbj__tok_t *t);

/* For each member of the object whose '{' was just read, calls fn with the
 * key token once the ':' is consumed; fn must read the value. */
typedef svc_err_t (*pbj__member_fn)(pbj__dec_t *d, const pbj__tok_t *key, void *ctx);
svc_err_t pbj__read_object(pbj__dec_t *d, pbj__member_fn fn, void *ctx);

/* For each element of the array whose '[' was just read, calls fn, which
 * must read the element. */
typedef svc_err_t (*pbj__elem_fn)(pbj__dec_t *d, void *ctx);
svc_err_t pbj__read_array(pbj__dec_t *d, pbj__elem_fn fn, void *ctx);

/* Reads and discards one value whose first token is t (validating it). */
svc_err_t pbj__skip(pbj__dec_t *d, const pbj__tok_t *t);

/* The decoded content of string token t, NUL-terminated, in d->scratch
 * (valid until the next call). */
svc_err_t pbj__str_text(pbj__dec_t *d, const pbj__tok_t *t, const char **s, size_t *n);
/* Decodes the content of string token t into out, which has room for the
 * raw length; returns the decoded length. */
size_t pbj__unescape(const pbj__dec_t *d, const pbj__tok_t *t, char *out);

/* Errors. Each returns the code it stores (SVC_EINVAL or SVC_ENOMEM).
 *   pbj__fail_at:   "(line L:C): <msg>"               (protojson newError)
 *   pbj__syntax_at: "syntax error (line L:C): <msg>"  (protojson syntaxError) */
svc_err_t pbj__fail_at(pbj__dec_t *d, size_t pos, const char *fmt, ...) PBJ__FMT(3, 4);
svc_err_t pbj__syntax_at(pbj__dec_t *d, size_t pos, const char *fmt, ...) PBJ__FMT(3, 4);
svc_err_t pbj__unexpected(pbj__dec_t *d, const pbj__tok_t *t);
svc_err_t pbj__nomem(pbj__dec_t *d);
/* The raw text of t for a message, shortened (see pbj__excerpt). */
const char *pbj__raw(const pbj__dec_t *d, const pbj__tok_t *t, char buf[PBJ__ERR_PIECE]);

#endif /* PBJ_LEX_H */
