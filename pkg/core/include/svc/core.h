/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc/core.h - what every ShopMicro program shares: error codes, logging,
 * configuration from the environment, and the clock.
 *
 * Nothing here depends on gRPC, libpq or any other transport, so pkg/resilience
 * and the unit tests can use it alone.
 */
#ifndef SVC_CORE_H
#define SVC_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SVC_COUNTOF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------
 * Errors
 *
 * One enum for the whole system. Each code carries the gRPC status it maps
 * to, so there is exactly one table that knows both vocabularies (the gRPC
 * numbers are the stable wire values 0..16 and need no gRPC header).
 * APPEND ONLY: names appear in logs and metrics.
 * ------------------------------------------------------------------------ */
#define SVC_ERR_MAP(XX)                                                                            \
    /* name          grpc  text */                                                                 \
    XX(OK, 0, "ok")                                                                                \
    XX(ECANCELLED, 1, "cancelled")                                                                 \
    XX(EUNKNOWN, 2, "unknown error")                                                               \
    XX(EINVAL, 3, "invalid argument")                                                              \
    XX(ETIMEDOUT, 4, "deadline exceeded")                                                          \
    XX(ENOTFOUND, 5, "not found")                                                                  \
    XX(EEXIST, 6, "already exists")                                                                \
    XX(EPERM, 7, "permission denied")                                                              \
    XX(EEXHAUSTED, 8, "resource exhausted")                                                        \
    XX(EPRECOND, 9, "failed precondition")                                                         \
    XX(EABORTED, 10, "aborted")                                                                    \
    XX(ERANGE, 11, "out of range")                                                                 \
    XX(EUNIMPL, 12, "unimplemented")                                                               \
    XX(EINTERNAL, 13, "internal error")                                                            \
    XX(EUNAVAIL, 14, "unavailable")                                                                \
    XX(EDATALOSS, 15, "data loss")                                                                 \
    XX(EUNAUTH, 16, "unauthenticated")                                                             \
    XX(ENOMEM, 8, "out of memory")

typedef enum {
#define SVC_XX(name, grpc, text) SVC_##name,
    SVC_ERR_MAP(SVC_XX)
#undef SVC_XX
        SVC__ERR_LAST
} svc_err_t;

/* A short lower-case description ("unavailable"). Never NULL. */
const char *svc_strerror(svc_err_t e);
/* The code's name as gRPC spells it ("UNAVAILABLE"). Never NULL. */
const char *svc_err_name(svc_err_t e);
/* The gRPC status code (0..16) for e. */
int svc_err_to_grpc(svc_err_t e);
/* A gRPC status code's name ("NOT_FOUND"); "UNKNOWN" for a code outside 0..16. */
const char *svc_grpc_code_name(int grpc_code);
/* The error for a gRPC status code; unknown codes give SVC_EUNKNOWN. */
svc_err_t svc_err_from_grpc(int grpc_code);

/* Caller-owned detail text travels in a buffer of this size ("errbuf"). */
#define SVC_ERRBUF_LEN 256
/*
 * Every function that explains a failure takes char errbuf[static
 * SVC_ERRBUF_LEN]: never NULL, at least that long, which the compiler checks
 * at each call (-Wnonnull, -Wstringop-overflow). A caller that has no use for
 * the detail passes SVC_ERRBUF_SCRATCH, a buffer that lives until the end of
 * the enclosing block.
 */
#define SVC_ERRBUF_SCRATCH ((char[SVC_ERRBUF_LEN]){""})
/* Formats into errbuf (truncating). */
void svc_errbuf_set(char errbuf[static SVC_ERRBUF_LEN], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------------
 * Memory for results, and text checks every service needs
 * ------------------------------------------------------------------------ */

/* Where a function puts memory it hands back (e.g. a call's arena, so that
 * nothing needs freeing). fn returns NULL when exhausted (-> SVC_ENOMEM). */
typedef struct svc_alloc {
    void *(*fn)(void *ctx, size_t n);
    void *ctx;
} svc_alloc_t;

/* Text into a caller's buffer with snprintf semantics over the whole text:
 * len counts every byte asked for, also past cap, so one pass with cap 0
 * sizes the buffer (the metrics renderers' contract). buf stays
 * NUL-terminated while cap > 0. */
typedef struct svc_text {
    char *buf;
    size_t cap, len;
} svc_text_t;
void svc_text_printf(svc_text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An empty text over buf (cap bytes; NUL-terminated when cap > 0). */
svc_text_t svc_text_on(char *buf, size_t cap);
/* How a renderer ends: *len (may be NULL) the full length; SVC_ERANGE when
 * the text did not fit, else SVC_OK. */
svc_err_t svc_text_end(const svc_text_t *t, size_t *len);

/* The latency histogram buckets every ShopMicro metric uses (Prometheus'
 * defaults plus 1 ms and 2.5 ms), so that one dashboard can put a hop's
 * client, server and database latency on the same axis: upper bounds in ns
 * and as their le="..." labels. */
#define SVC_LATENCY_BUCKETS 13
extern const uint64_t svc_latency_bounds_ns[SVC_LATENCY_BUCKETS];
extern const char *const svc_latency_le[SVC_LATENCY_BUCKETS];
/* The bucket of a duration: 0..SVC_LATENCY_BUCKETS-1, or SVC_LATENCY_BUCKETS
 * for +Inf. */
unsigned svc_latency_bucket(uint64_t ns);

/* Copies s into memory from a; NULL when a is exhausted. */
char *svc_alloc_strdup(const svc_alloc_t *a, const char *s);
/* Characters (code points) of NUL-terminated UTF-8 text; -1 when it is not
 * valid UTF-8. A 200-character Thai name is 600 bytes. */
long svc_utf8_chars(const char *s);
/* True for a canonical UUID, 8-4-4-4-12 hex digits. */
bool svc_is_uuid(const char *s);

/*
 * Idempotency keys, the one rule for every place a key enters (the
 * gateway's Idempotency-Key header, the order service's idempotency-key
 * metadata): 1-255 characters 0x21-0x7E, printable ASCII without spaces, as
 * Stripe's keys and the IETF Idempotency-Key draft. A key is stored and
 * compared byte for byte, so one outside the rule is refused, never cut or
 * ignored: nothing about it is left to a transport's or a database's
 * reading of other bytes. The idempotency_keys table's CHECK (order
 * migration 0004) says the same in SQL.
 */
#define SVC_IDEMPOTENCY_KEY_MIN   1 /* characters (= bytes)      */
#define SVC_IDEMPOTENCY_KEY_MAX   255
#define SVC_IDEMPOTENCY_KEY_FIRST 0x21 /* '!': a space is not part of a key */
#define SVC_IDEMPOTENCY_KEY_LAST  0x7E /* '~'                       */
/* True when s (len bytes; need not be NUL-terminated, may contain NUL) is a
 * key by that rule. */
bool svc_idempotency_key_valid(const char *s, size_t len);
/* The index of the first byte of s (len bytes) outside 0x21-0x7E; len when
 * there is none. Says which byte a refusal is about. */
size_t svc_idempotency_key_bad_byte(const char *s, size_t len);

/* ------------------------------------------------------------------------
 * Clock
 *
 * Monotonic nanoseconds. Everything that measures time or computes a
 * deadline takes an svc_clock_t so that tests can drive time by hand.
 * ------------------------------------------------------------------------ */
typedef struct svc_clock {
    uint64_t (*now_ns)(void *ctx);
    void *ctx;
} svc_clock_t;

/* The process-wide monotonic clock (CLOCK_MONOTONIC). Never NULL. */
const svc_clock_t *svc_clock_monotonic(void);
/* Shorthands for the monotonic clock. */
uint64_t svc_now_ns(void);
uint64_t svc_now_ms(void);
/* Reads c, or the monotonic clock when c is NULL. */
static inline uint64_t svc_clock_now(const svc_clock_t *c)
{
    return c != NULL ? c->now_ns(c->ctx) : svc_now_ns();
}

/* Wall-clock time for timestamps that leave the process (events, logs):
 * "YYYY-MM-DDTHH:MM:SS.mmmZ", UTC, RFC 3339. Never for durations. */
#define SVC_RFC3339_LEN 32
void svc_rfc3339_now(char out[SVC_RFC3339_LEN]);

#define SVC_NS_PER_MS 1000000ull
#define SVC_NS_PER_US 1000ull
/* "No deadline": compare with it rather than testing for zero. */
#define SVC_DEADLINE_NONE UINT64_MAX

/* ------------------------------------------------------------------------
 * Logging
 *
 * One line per event on stderr, key=value:
 *   ts=2026-12-02T14:00:00.123Z level=info mod=catalog req=ab12 msg="..." k=v
 * The level comes from the environment (SVC_LOG_LEVEL or the service's own
 * variable, passed to svc_log_set_level_name). Thread-safe: each line is
 * formatted into a local buffer and written with one write(2).
 * pkg/ libraries do not log detail they can return; they fill an errbuf.
 * ------------------------------------------------------------------------ */
typedef enum { SVC_LOG_DEBUG, SVC_LOG_INFO, SVC_LOG_WARN, SVC_LOG_ERROR } svc_log_level_t;

/* Sets the minimum level from "debug" | "info" | "warn" | "error".
 * Returns false (and changes nothing) for any other name. */
bool svc_log_set_level_name(const char *name);
void svc_log_set_level(svc_log_level_t lvl);
bool svc_log_enabled(svc_log_level_t lvl);

/* The request id of the call this thread is serving ("" when none). The
 * gRPC dispatcher sets it from x-request-id metadata; every line carries it. */
void svc_log_set_request_id(const char *id);
const char *svc_log_request_id(void);

/* Writes one line. fmt forms the msg="..." value; `kv` (may be NULL) is a
 * pre-formatted " k=v k=v" suffix. Use the macros below. */
void svc_log_write(svc_log_level_t lvl, const char *module, const char *kv, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define SVC_LOG(lvl, mod, ...)                                                                     \
    do {                                                                                           \
        if (svc_log_enabled(lvl))                                                                  \
            svc_log_write((lvl), (mod), NULL, __VA_ARGS__);                                        \
    } while (0)
#define svc_log_debug(mod, ...) SVC_LOG(SVC_LOG_DEBUG, mod, __VA_ARGS__)
#define svc_log_info(mod, ...)  SVC_LOG(SVC_LOG_INFO, mod, __VA_ARGS__)
#define svc_log_warn(mod, ...)  SVC_LOG(SVC_LOG_WARN, mod, __VA_ARGS__)
#define svc_log_error(mod, ...) SVC_LOG(SVC_LOG_ERROR, mod, __VA_ARGS__)

/*
 * Repeated lines. In an outage the same failure repeats once per request,
 * and a line per request drowns what changed. A limiter lets the first line
 * of each key through at once and then at most one per window; the line it
 * lets through after a gap carries " repeated=N": how many lines of that key
 * were left out since the previous one written. A key whose lines were left
 * out and that has then gone quiet gets one summary line when the limiter is
 * flushed ("left out N more lines like this one ...", with repeat_key=...),
 * so every count reaches the log. Metrics still count every event.
 *
 * Keys are short strings naming what repeats (a route, status and reason);
 * key and module are copied (up to 95 and 31 bytes). Thread-safe: one mutex per limiter, taken only by lines that
 * would be written (warn and above in practice), never on the success path.
 * The table has room for 64 keys; a key that finds no room is never left out.
 */
#define SVC_LOG_REPEAT_WINDOW_MS 1000

typedef struct svc_log_repeats svc_log_repeats_t;

/* window_ms 0 means SVC_LOG_REPEAT_WINDOW_MS; clock NULL: the monotonic clock.
 * Returns NULL when out of memory. */
svc_log_repeats_t *svc_log_repeats_new(uint32_t window_ms, const svc_clock_t *clock);
/* Flushes what is left out (as svc_log_repeats_flush(r, true)), then frees. NULL is ignored. */
void svc_log_repeats_free(svc_log_repeats_t *r);
/* The process-wide limiter the svc_log_repeat_* helpers use. Never NULL. */
svc_log_repeats_t *svc_log_repeats_default(void);

/* Whether the line of `key` (to be written at lvl by module) is written now.
 * When it is, *left_out (may be NULL) is the count of that key's lines left out
 * since the previous one written, and the caller appends " repeated=N" when
 * it is not 0. Also flushes the keys whose window has ended, at most once per
 * window, so a busy process needs no timer to report its counts. */
bool svc_log_repeats_admit(svc_log_repeats_t *r, svc_log_level_t lvl, const char *module,
                           const char *key, uint64_t *left_out);
/* Writes a summary line for each key with lines left out whose window has
 * ended (every such key when `all`). A process with a periodic tick calls it
 * there, so a quiet key's count is written within about a window. */
void svc_log_repeats_flush(svc_log_repeats_t *r, bool all);

/* svc_log_write through the default limiter: writes the line unless `key`
 * has had one written in the last window; adds " repeated=N" to kv. */
void svc_log_write_repeat(svc_log_level_t lvl, const char *module, const char *key, const char *kv,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* ------------------------------------------------------------------------
 * Configuration
 *
 * Each program describes its settings in one table; one line per setting is
 * enough to parse the environment, validate, print --help and write docs:
 *
 *   static const svc_cfg_entry_t table[] = {
 *     { "CATALOG_LISTEN", SVC_CFG_STR, 0, 0, "127.0.0.1:25051",
 *       SVC_CFG_OFF(cat_config_t, listen), "gRPC listen address host:port" },
 *   };
 * ------------------------------------------------------------------------ */
typedef enum {
    SVC_CFG_STR,       /* char[SVC_CFG_STR_MAX] field; min/max bound the length   */
    SVC_CFG_INT,       /* int64_t field; min/max bound the value                  */
    SVC_CFG_BOOL,      /* bool field: 1/0, true/false, yes/no, on/off             */
    SVC_CFG_LOG_LEVEL, /* char[SVC_CFG_STR_MAX]: debug|info|warn|error       */
} svc_cfg_type_t;

#define SVC_CFG_STR_MAX          512
#define SVC_CFG_OFF(type, field) offsetof(type, field)

typedef struct svc_cfg_entry {
    const char *env; /* environment variable name                       */
    svc_cfg_type_t type;
    int64_t min, max; /* bounds (value for INT, length for STR); 0,0: none */
    const char *def;  /* default as text; NULL: required                 */
    size_t offset;    /* where the parsed value goes in the config struct */
    const char *help; /* one line for --help and docs/operations.md      */
} svc_cfg_entry_t;

/* Fills `out` (a struct whose fields the table describes) from the
 * environment, applying defaults and bounds. Returns SVC_EINVAL naming the
 * first bad variable in errbuf. `getenv_fn` NULL means getenv (tests inject). */
svc_err_t svc_cfg_load(const svc_cfg_entry_t *table, size_t n, void *out,
                       const char *(*getenv_fn)(const char *name),
                       char errbuf[static SVC_ERRBUF_LEN]);
/* Prints the table as an aligned "VARIABLE  default  help" list. */
void svc_cfg_print_help(FILE *f, const svc_cfg_entry_t *table, size_t n);
/* Logs the effective configuration once at start-up. The values of
 * variables whose name ends in _PASSWORD or _SECRET are printed as
 * "(redacted)"; every other string goes through svc_redact_credentials. */
void svc_cfg_log(const char *module, const svc_cfg_entry_t *table, size_t n, const void *cfg);

/*
 * Copies value into out (cap bytes; always NUL-terminated, cut when longer)
 * with each credential replaced by "(redacted)":
 *   - a URL's password: scheme://user:PASSWORD@host/... (postgresql://,
 *     postgres://, https:// alike; the user name is kept);
 *   - a URL query's password, sslpassword, passwd, token, access_token,
 *     secret, api_key, apikey, key, sig and signature values;
 *   - in a libpq key=value string, the value of password= and sslpassword=
 *     (quoted or not, with spaces around '=' or not).
 * Everything else is copied as it is, so a log line still names the host
 * and the database. value NULL is "". Thread-safe; value borrowed.
 */
void svc_redact_credentials(const char *value, char *out, size_t cap);

/* ------------------------------------------------------------------------
 * A program's start: the same command line and the same signals for all
 * ------------------------------------------------------------------------ */

/* Every service takes only --help (or -h), printed by help on stdout, and
 * is otherwise configured by the environment. Returns true when main must
 * return *exit_code at once: 0 after the help, 2 for any other argument
 * (named on stderr under prog). */
bool svc_main_args(int argc, char **argv, const char *prog, void (*help)(FILE *f), int *exit_code);

/* Blocks SIGTERM and SIGINT in the calling thread, ignores SIGPIPE (a peer
 * that went away is an error return, not a death), and returns a signalfd
 * (close-on-exec) that becomes readable when either arrives; -1 with errno
 * on failure. Call it in main before any thread starts: threads inherit the
 * mask, so no thread is interrupted at a random point and the program's own
 * poll sees the stop. */
int svc_stop_fd_new(void);
/* Waits up to timeout_ms (0: just looks) for a stop signal on fd (a
 * svc_stop_fd_new descriptor) and consumes it: true then, after an info
 * line "SIGTERM: stopping" (or SIGINT) under module. */
bool svc_stop_requested(int fd, int timeout_ms, const char *module);

/* ------------------------------------------------------------------------
 * Freed memory: glibc's arenas keep what a burst freed resident; every
 * long-running program gives it back the same way (src/mem.c says why and
 * how; docs/operations.md, "Memory").
 * ------------------------------------------------------------------------ */

/* Its two settings, read with the program's own table: */
typedef struct svc_mem_cfg {
    int64_t arenas; /* M_ARENA_MAX; 0: glibc's default (8 per core) */
    bool trim;      /* the trimmer thread */
} svc_mem_cfg_t;

/* The two lines of a program's svc_cfg table for its svc_mem_cfg_t field,
 * e.g. SVC_MEM_CFG_ENTRIES("CATALOG", cat_config_t, mem): <PREFIX>_MALLOC_ARENAS
 * and <PREFIX>_MALLOC_TRIM. */
#define SVC_MEM_CFG_ENTRIES(prefix, type, field)                                                   \
    {prefix "_MALLOC_ARENAS",                                                                      \
     SVC_CFG_INT,                                                                                  \
     0,                                                                                            \
     64,                                                                                           \
     "1",                                                                                          \
     SVC_CFG_OFF(type, field) + offsetof(svc_mem_cfg_t, arenas),                                   \
     "glibc malloc arenas at most (1: the trim can give back all freed heap; 0 = glibc's "         \
     "default, 8 per core)"},                                                                      \
    {                                                                                              \
        prefix "_MALLOC_TRIM", SVC_CFG_BOOL, 0, 0, "on",                                           \
            SVC_CFG_OFF(type, field) + offsetof(svc_mem_cfg_t, trim),                              \
            "give freed heap back to the kernel (malloc_trim) once 1 MiB more of it is resident, " \
            "at "                                                                                  \
            "most every 10 s"                                                                      \
    }

/* Call in main before any thread exists (glibc reads the arena limit when it
 * makes the second arena): sets the arena limit and a fixed mmap threshold,
 * then, with cfg->trim, starts the trimmer thread (all signals blocked in
 * it) whose lines are logged under module. SVC_ENOMEM when the thread
 * cannot start (the program runs on without it). */
svc_err_t svc_mem_start(const svc_mem_cfg_t *cfg, const char *module);
/* Asks for a trim at the next check (at most one per 10 s still): for a
 * program that knows a lot was just freed in small pieces that may not add
 * up to the 1 MiB rule (the gateway, after many connections closed). */
void svc_mem_trim_soon(void);
/* Stops and joins the trimmer; harmless when it was not started. */
void svc_mem_stop(void);
/* This process's resident bytes (/proc/self/statm), 0 if unknown. */
size_t svc_mem_rss_bytes(void);

#endif /* SVC_CORE_H */
