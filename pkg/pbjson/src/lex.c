/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lex.c - the JSON reader: a bounded, single-pass tokenizer over the caller's
 * buffer (no copy of the input, no NUL terminator needed), object and array
 * iteration with the PBJ_MAX_DEPTH limit, and error messages with protojson's
 * "(line L:C)" positions (1-based, columns counted in characters).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lex.h"

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

static void line_col(const pbj__dec_t *d, size_t pos, unsigned *line, unsigned *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < pos && i < d->len; i++) {
        unsigned char c = (unsigned char)d->in[i];
        if (c == '\n') {
            (*line)++;
            *col = 1;
        } else if ((c & 0xC0) != 0x80) { /* count characters, not bytes */
            (*col)++;
        }
    }
}

static svc_err_t vfail(pbj__dec_t *d, size_t pos, const char *head, const char *fmt, va_list ap)
    PBJ__FMT(4, 0);
static svc_err_t vfail(pbj__dec_t *d, size_t pos, const char *head, const char *fmt, va_list ap)
{
    char msg[SVC_ERRBUF_LEN];
    unsigned line, col;

    if (d->errbuf == NULL)
        return SVC_EINVAL;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    line_col(d, pos, &line, &col);
    pbj__errf(d->errbuf, "%s(line %u:%u): %s", head, line, col, msg);
    return SVC_EINVAL;
}

svc_err_t pbj__fail_at(pbj__dec_t *d, size_t pos, const char *fmt, ...)
{
    va_list ap;
    svc_err_t err;

    va_start(ap, fmt);
    err = vfail(d, pos, "", fmt, ap);
    va_end(ap);
    return err;
}

svc_err_t pbj__syntax_at(pbj__dec_t *d, size_t pos, const char *fmt, ...)
{
    va_list ap;
    svc_err_t err;

    va_start(ap, fmt);
    err = vfail(d, pos, "syntax error ", fmt, ap);
    va_end(ap);
    return err;
}

static svc_err_t unexpected_eof(pbj__dec_t *d)
{
    /* Go's io.ErrUnexpectedEOF, which is what the Go gateway reports. */
    pbj__errf(d->errbuf, "unexpected EOF");
    return SVC_EINVAL;
}

svc_err_t pbj__nomem(pbj__dec_t *d)
{
    pbj__errf(d->errbuf, "out of memory");
    return SVC_ENOMEM;
}

const char *pbj__raw(const pbj__dec_t *d, const pbj__tok_t *t, char buf[PBJ__ERR_PIECE])
{
    pbj__excerpt(d->in + t->start, t->end - t->start, buf, PBJ__ERR_PIECE);
    return buf;
}

svc_err_t pbj__unexpected(pbj__dec_t *d, const pbj__tok_t *t)
{
    char raw[PBJ__ERR_PIECE];

    if (t->kind == PBJ__T_EOF)
        return unexpected_eof(d);
    return pbj__syntax_at(d, t->start, "unexpected token %s", pbj__raw(d, t, raw));
}

/* ------------------------------------------------------------------------
 * Tokens
 * ------------------------------------------------------------------------ */

static void skip_ws(pbj__dec_t *d)
{
    while (d->pos < d->len) {
        char c = d->in[d->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        d->pos++;
    }
}

/* protobuf-go's isNotDelim: a literal or number must not run into these. */
static bool is_word_char(char c)
{
    return c == '-' || c == '+' || c == '.' || c == '_' || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* What follows `pos` for an "invalid value X" message: a run of word
 * characters (at most 32, as protobuf-go's errRegexp) or one character. */
static svc_err_t bad_token(pbj__dec_t *d, const char *what)
{
    char buf[PBJ__ERR_PIECE];
    size_t n = 0, k;

    while (n < 32 && d->pos + n < d->len && is_word_char(d->in[d->pos + n]))
        n++;
    if (n == 0) {
        k = pbj__utf8_seq((const unsigned char *)d->in + d->pos, d->len - d->pos);
        n = k > 0 ? k : 1;
    }
    pbj__excerpt(d->in + d->pos, n, buf, sizeof(buf));
    /* Control bytes and invalid UTF-8 are shown as \xNN. */
    if (buf[0] == '\0' || (unsigned char)d->in[d->pos] < 0x20 || d->in[d->pos] == 0x7f)
        snprintf(buf, sizeof(buf), "\\x%02x", (unsigned char)d->in[d->pos]);
    return pbj__syntax_at(d, d->pos, "invalid %s %s", what, buf);
}

/* "unexpected character X <where>", X shown as itself when printable. */
static svc_err_t unexpected_char(pbj__dec_t *d, const char *where)
{
    unsigned char c = (unsigned char)d->in[d->pos];
    char shown[PBJ__ERR_PIECE];

    if (c >= 0x20 && c < 0x7f)
        snprintf(shown, sizeof(shown), "%c", c);
    else if (c < 0x80 || pbj__utf8_seq((const unsigned char *)d->in + d->pos, d->len - d->pos) == 0)
        snprintf(shown, sizeof(shown), "\\x%02x", c);
    else
        pbj__excerpt(d->in + d->pos,
                     pbj__utf8_seq((const unsigned char *)d->in + d->pos, d->len - d->pos), shown,
                     sizeof(shown));
    return pbj__syntax_at(d, d->pos, "unexpected character %s%s%s", shown, *where ? " " : "",
                          where);
}

static bool ends_word(const pbj__dec_t *d, size_t end)
{
    return end >= d->len || !is_word_char(d->in[end]);
}

static svc_err_t lex_literal(pbj__dec_t *d, pbj__tok_t *t, const char *word, pbj__tkind_t kind)
{
    size_t n = strlen(word);

    if (d->len - d->pos < n || memcmp(d->in + d->pos, word, n) != 0 || !ends_word(d, d->pos + n))
        return bad_token(d, "value");
    t->kind = kind;
    t->end = d->pos += n;
    return SVC_OK;
}

static svc_err_t lex_number(pbj__dec_t *d, pbj__tok_t *t)
{
    size_t n = pbj__json_number_len(d->in + d->pos, d->len - d->pos);

    if (n == 0 || !ends_word(d, d->pos + n))
        return bad_token(d, "number");
    t->kind = PBJ__T_NUM;
    t->end = d->pos += n;
    return SVC_OK;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The code unit of the \uXXXX at p (which has 6 bytes), or -1. */
static long hex4(const char *p)
{
    long v = 0;

    if (p[0] != '\\' || p[1] != 'u')
        return -1;
    for (int i = 2; i < 6; i++) {
        int h = hex_value(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Validates the escape at i (d->in[i] == '\\'); returns its length, 0 after
 * storing an error. A surrogate must come as a high + low pair. */
static size_t lex_escape(pbj__dec_t *d, size_t i, svc_err_t *err)
{
    const char *p = d->in + i;
    size_t left = d->len - i;
    long hi, lo;

    if (left < 2) {
        *err = unexpected_eof(d);
        return 0;
    }
    if (memchr("\"\\/bfnrt", p[1], 8) != NULL)
        return 2;
    if (p[1] != 'u') {
        bool printable = (unsigned char)p[1] >= 0x20 && (unsigned char)p[1] < 0x7f;
        *err =
            pbj__syntax_at(d, i, "invalid escape code \"\\%c\" in string", printable ? p[1] : '?');
        return 0;
    }
    if (left < 6) {
        *err = unexpected_eof(d);
        return 0;
    }
    hi = hex4(p);
    if (hi >= 0 && (hi < 0xD800 || hi > 0xDFFF))
        return 6;
    /* A high surrogate needs a second \uXXXX; running out of input while
     * it may still come is EOF, anything else is a bad escape. */
    if (hi >= 0xD800 && hi <= 0xDBFF && left < 12 &&
        memcmp(p + 6, "\\u", left - 6 < 2 ? left - 6 : 2) == 0 &&
        memchr(p + 6, '"', left - 6) == NULL) {
        *err = unexpected_eof(d);
        return 0;
    }
    lo = hi >= 0xD800 && hi <= 0xDBFF && left >= 12 ? hex4(p + 6) : -1;
    if (lo >= 0xDC00 && lo <= 0xDFFF)
        return 12;
    *err = pbj__syntax_at(d, i, "invalid escape code in string");
    return 0;
}

static svc_err_t lex_string(pbj__dec_t *d, pbj__tok_t *t)
{
    size_t i = d->pos + 1;
    svc_err_t err = SVC_OK;

    while (i < d->len) {
        unsigned char c = (unsigned char)d->in[i];
        size_t k = 1;
        if (c == '"') {
            t->kind = PBJ__T_STR;
            t->end = d->pos = i + 1;
            return SVC_OK;
        }
        if (c == '\\')
            k = lex_escape(d, i, &err);
        else if (c < 0x20)
            return pbj__syntax_at(d, i, "invalid character U+%04X in string", c);
        else if (c >= 0x80 &&
                 (k = pbj__utf8_seq((const unsigned char *)d->in + i, d->len - i)) == 0)
            return pbj__syntax_at(d, i, "invalid UTF-8 in string");
        if (k == 0)
            return err;
        i += k;
    }
    return unexpected_eof(d);
}

svc_err_t pbj__next(pbj__dec_t *d, pbj__tok_t *t)
{
    char c;

    skip_ws(d);
    t->start = t->end = d->pos;
    t->kind = PBJ__T_EOF;
    if (d->pos == d->len)
        return unexpected_eof(d); /* callers always want a value */
    c = d->in[d->pos];
    switch (c) {
    case '{':
    case '[':
        t->kind = c == '{' ? PBJ__T_OBJ : PBJ__T_ARR;
        t->end = ++d->pos;
        return SVC_OK;
    case '"':
        return lex_string(d, t);
    case 't':
        return lex_literal(d, t, "true", PBJ__T_TRUE);
    case 'f':
        return lex_literal(d, t, "false", PBJ__T_FALSE);
    case 'n':
        return lex_literal(d, t, "null", PBJ__T_NULL);
    case '}':
    case ']':
    case ',':
    case ':':
        return unexpected_char(d, "");
    default:
        break;
    }
    if (c == '-' || (c >= '0' && c <= '9'))
        return lex_number(d, t);
    return bad_token(d, "value");
}

/* ------------------------------------------------------------------------
 * Containers
 * ------------------------------------------------------------------------ */

static svc_err_t enter(pbj__dec_t *d)
{
    if (++d->depth > PBJ_MAX_DEPTH)
        return pbj__syntax_at(d, d->pos - 1, "exceeded max nesting depth %u", PBJ_MAX_DEPTH);
    return SVC_OK;
}

/* After a member or element: ',' (more follow) or the closing byte. */
static svc_err_t after_item(pbj__dec_t *d, char close, bool *more)
{
    skip_ws(d);
    if (d->pos == d->len)
        return unexpected_eof(d);
    if (d->in[d->pos] == ',' || d->in[d->pos] == close) {
        *more = d->in[d->pos++] == ',';
        return SVC_OK;
    }
    return unexpected_char(d, close == '}' ? "after object member" : "after array element");
}

/* True (and consumes it) if the container closes right away. */
static bool closes_empty(pbj__dec_t *d, char close)
{
    skip_ws(d);
    if (d->pos < d->len && d->in[d->pos] == close) {
        d->pos++;
        return true;
    }
    return false;
}

static svc_err_t read_key(pbj__dec_t *d, pbj__tok_t *key)
{
    svc_err_t err = pbj__next(d, key);

    if (err != SVC_OK)
        return err;
    if (key->kind != PBJ__T_STR)
        return pbj__unexpected(d, key);
    skip_ws(d);
    if (d->pos == d->len)
        return unexpected_eof(d);
    if (d->in[d->pos] != ':')
        return pbj__syntax_at(d, d->pos, "missing \":\" after object name");
    d->pos++;
    return SVC_OK;
}

svc_err_t pbj__read_object(pbj__dec_t *d, pbj__member_fn fn, void *ctx)
{
    bool more = true;
    svc_err_t err = enter(d);

    if (err != SVC_OK || closes_empty(d, '}'))
        goto out;
    while (more) {
        pbj__tok_t key;
        err = read_key(d, &key);
        if (err == SVC_OK)
            err = fn(d, &key, ctx);
        if (err == SVC_OK)
            err = after_item(d, '}', &more);
        if (err != SVC_OK)
            goto out;
    }
out:
    d->depth--;
    return err;
}

svc_err_t pbj__read_array(pbj__dec_t *d, pbj__elem_fn fn, void *ctx)
{
    bool more = true;
    svc_err_t err = enter(d);

    if (err != SVC_OK || closes_empty(d, ']'))
        goto out;
    while (more) {
        err = fn(d, ctx);
        if (err == SVC_OK)
            err = after_item(d, ']', &more);
        if (err != SVC_OK)
            goto out;
    }
out:
    d->depth--;
    return err;
}

static svc_err_t skip_member(pbj__dec_t *d, const pbj__tok_t *key, void *ctx)
{
    pbj__tok_t t;
    svc_err_t err = pbj__next(d, &t);

    (void)key;
    (void)ctx;
    return err != SVC_OK ? err : pbj__skip(d, &t);
}

static svc_err_t skip_elem(pbj__dec_t *d, void *ctx)
{
    return skip_member(d, NULL, ctx);
}

svc_err_t pbj__skip(pbj__dec_t *d, const pbj__tok_t *t)
{
    switch (t->kind) {
    case PBJ__T_EOF:
        return unexpected_eof(d);
    case PBJ__T_OBJ:
        return pbj__read_object(d, skip_member, NULL);
    case PBJ__T_ARR:
        return pbj__read_array(d, skip_elem, NULL);
    default:
        return SVC_OK; /* scalars were validated and consumed by pbj__next */
    }
}

/* ------------------------------------------------------------------------
 * String content
 * ------------------------------------------------------------------------ */

size_t pbj__unescape(const pbj__dec_t *d, const pbj__tok_t *t, char *out)
{
    const char *p = d->in + t->start + 1, *end = d->in + t->end - 1;
    size_t o = 0;

    /* The token was validated by lex_string, so every escape is complete. */
    while (p < end) {
        long cp;
        if (*p != '\\') {
            out[o++] = *p++;
            continue;
        }
        switch (p[1]) {
        case 'b':
            out[o++] = '\b';
            break;
        case 'f':
            out[o++] = '\f';
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 't':
            out[o++] = '\t';
            break;
        case 'u':
            break;
        default:
            out[o++] = p[1];
            break; /* " \ / */
        }
        if (p[1] != 'u') {
            p += 2;
            continue;
        }
        cp = hex4(p);
        p += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4(p) - 0xDC00);
            p += 6;
        }
        o += pbj__utf8_put((uint32_t)cp, out + o);
    }
    return o;
}

svc_err_t pbj__str_text(pbj__dec_t *d, const pbj__tok_t *t, const char **s, size_t *n)
{
    size_t raw = t->end - t->start; /* >= the decoded length + 1 for the NUL */

    if (raw > d->scratch_cap) {
        char *grown = pbj__alloc(d->alloc, raw);
        if (grown == NULL)
            return pbj__nomem(d);
        pbj__free(d->alloc, d->scratch);
        d->scratch = grown;
        d->scratch_cap = raw;
    }
    *n = pbj__unescape(d, t, d->scratch);
    d->scratch[*n] = '\0';
    *s = d->scratch;
    return SVC_OK;
}
