/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - one key=value line per event on stderr.
 *
 * A line is formatted into a stack buffer and written with a single write(2),
 * so lines from different threads never interleave (POSIX keeps writes of up
 * to PIPE_BUF bytes to a pipe atomic; longer lines are truncated to that).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "svc/core.h"
#include "log.h"

#define LINE_MAX_BYTES 4096

static _Atomic int min_level = SVC_LOG_INFO;
static _Thread_local char request_id[64];

static const char *const level_names[] = {"debug", "info", "warn", "error"};

bool svc_log_set_level_name(const char *name)
{
    for (size_t i = 0; i < SVC_COUNTOF(level_names); i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            svc_log_set_level((svc_log_level_t)i);
            return true;
        }
    }
    return false;
}

void svc_log_set_level(svc_log_level_t lvl)
{
    atomic_store_explicit(&min_level, (int)lvl, memory_order_relaxed);
}

bool svc_log_enabled(svc_log_level_t lvl)
{
    return (int)lvl >= atomic_load_explicit(&min_level, memory_order_relaxed);
}

void svc_log_set_request_id(const char *id)
{
    snprintf(request_id, sizeof request_id, "%s", id != NULL ? id : "");
}

const char *svc_log_request_id(void)
{
    return request_id;
}

/* Appends s to buf as the inside of a double-quoted value: quotes,
 * backslashes and control characters are escaped so a line stays one line. */
static size_t append_quoted(char *buf, size_t len, size_t cap, const char *s)
{
    for (; *s != '\0' && len + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[len++] = '\\';
            buf[len++] = (char)c;
        } else if (c < 0x20) {
            buf[len++] = '\\';
            buf[len++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'x';
        } else {
            buf[len++] = (char)c;
        }
    }
    return len;
}

static size_t append_fmt(char *buf, size_t len, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t append_fmt(char *buf, size_t len, size_t cap, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (len >= cap)
        return len;
    va_start(ap, fmt);
    n = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return len;
    return (size_t)n >= cap - len ? cap - 1 : len + (size_t)n;
}

void svc_log_write(svc_log_level_t lvl, const char *module, const char *kv, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    svc__log_vwrite(lvl, module, kv, fmt, ap);
    va_end(ap);
}

void svc__log_vwrite(svc_log_level_t lvl, const char *module, const char *kv, const char *fmt,
                     va_list ap)
{
    char line[LINE_MAX_BYTES], msg[LINE_MAX_BYTES / 2];
    struct timeval tv;
    struct tm tm;
    size_t len = 0;

    vsnprintf(msg, sizeof msg, fmt, ap);

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    len = append_fmt(line, len, sizeof line,
                     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s mod=%s", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (long)(tv.tv_usec / 1000), level_names[lvl], module);
    if (request_id[0] != '\0')
        len = append_fmt(line, len, sizeof line, " req=%s", request_id);
    len = append_fmt(line, len, sizeof line, " msg=\"");
    len = append_quoted(line, len, sizeof line, msg);
    len = append_fmt(line, len, sizeof line, "\"%s\n", kv != NULL ? kv : "");
    if (len > 0 && line[len - 1] != '\n')
        line[len - 1] = '\n';
    /* Nothing useful can be done when stderr is gone. */
    if (write(STDERR_FILENO, line, len) < 0)
        return;
}
