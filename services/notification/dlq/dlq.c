/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlq.c - notify-dlq's verbs on B.dead, through pkg/mq's queue operations.
 *
 * Why a browse (basic.get, manual ack, all held, one nack at the end) for
 * list and show, rather than a consumer with prefetch that nacks at the
 * end: a get answers get-empty when the queue has nothing more ready, so
 * "the whole queue" is known exactly instead of guessed from a quiet
 * interval, and it takes one message per call, so --limit holds exactly
 * that many. Both need every message held until the end: a message
 * requeued at once goes back to the head and the next get returns it again.
 * B.dead is a classic queue, and a classic queue puts a requeued message
 * back in its original position, so a list leaves the queue as it found it,
 * order included (the messages are only marked redelivered). While a list
 * runs, the jobs it holds are invisible to others (nobody else consumes
 * B.dead); if notify-dlq dies, its connection drops and the broker requeues
 * them the same way. A quorum queue would requeue to the back; the topology
 * is classic (docs/notifications.md §2).
 *
 * Replay publishes a copy to the work exchange with a confirm and acks the
 * dead one only after it: a crash between the two leaves the job in both
 * queues (receivers dedupe by Idempotency-Key = message-id), never in
 * neither.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlq.h"

#define CONN_NAME "notify-dlq"

static const char *verb_name(dlq_verb_t v)
{
    switch (v) {
    case DLQ_HELP:
        return "help";
    case DLQ_LIST:
        return "list";
    case DLQ_SHOW:
        return "show";
    case DLQ_REPLAY:
        return "replay";
    case DLQ_PURGE:
        return "purge";
    }
    return "?";
}

static bool parse_limit(const char *s, long *out)
{
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return false;
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < 1 || v > DLQ_MAX_LIMIT)
        return false;
    *out = v;
    return true;
}

svc_err_t dlq_parse_args(int argc, char **argv, dlq_args_t *a, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *verb = argc > 1 ? argv[1] : NULL;

    memset(a, 0, sizeof *a);
    a->limit = DLQ_DEFAULT_LIMIT;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            a->verb = DLQ_HELP;
            return SVC_OK;
        }
    }
    if (verb == NULL) {
        svc_errbuf_set(errbuf, "a verb is required: list, show, replay or purge");
        return SVC_EINVAL;
    }
    if (strcmp(verb, "list") == 0)
        a->verb = DLQ_LIST;
    else if (strcmp(verb, "show") == 0)
        a->verb = DLQ_SHOW;
    else if (strcmp(verb, "replay") == 0)
        a->verb = DLQ_REPLAY;
    else if (strcmp(verb, "purge") == 0)
        a->verb = DLQ_PURGE;
    else if (strcmp(verb, "help") == 0) {
        a->verb = DLQ_HELP;
        return SVC_OK;
    } else {
        svc_errbuf_set(errbuf, "unknown verb '%.64s' (list, show, replay, purge)", verb);
        return SVC_EINVAL;
    }
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];

        if (a->verb == DLQ_LIST && strcmp(s, "--limit") == 0 && i + 1 < argc) {
            if (!parse_limit(argv[++i], &a->limit))
                goto bad_limit;
        } else if (a->verb == DLQ_LIST && strncmp(s, "--limit=", 8) == 0) {
            if (!parse_limit(s + 8, &a->limit))
                goto bad_limit;
        } else if (a->verb == DLQ_REPLAY && strcmp(s, "--all") == 0) {
            a->all = true;
        } else if (a->verb == DLQ_PURGE && strcmp(s, "--yes") == 0) {
            a->yes = true;
        } else if ((a->verb == DLQ_SHOW || a->verb == DLQ_REPLAY) && s[0] != '-' && a->id == NULL) {
            a->id = s;
        } else {
            svc_errbuf_set(errbuf, "%s: unexpected argument '%.64s'", verb_name(a->verb), s);
            return SVC_EINVAL;
        }
    }
    if (a->verb == DLQ_SHOW && a->id == NULL) {
        svc_errbuf_set(errbuf, "show: a message-id is required");
        return SVC_EINVAL;
    }
    if (a->verb == DLQ_REPLAY && (a->id == NULL) == !a->all) {
        svc_errbuf_set(errbuf, "replay: give one message-id or --all");
        return SVC_EINVAL;
    }
    if (a->id != NULL && strlen(a->id) > 255) {
        svc_errbuf_set(errbuf, "%s: a message-id is at most 255 bytes", verb_name(a->verb));
        return SVC_EINVAL;
    }
    return SVC_OK;
bad_limit:
    svc_errbuf_set(errbuf, "list: --limit takes a number of 1..%d", DLQ_MAX_LIMIT);
    return SVC_EINVAL;
}

void dlq_help(FILE *f)
{
    fprintf(
        f,
        "Usage: notify-dlq list [--limit N]     one line per dead job, then the total (N:\n"
        "                                       1..%d, default %d); removes or reorders nothing\n"
        "       notify-dlq show <message-id>    one dead job: its headers and body\n"
        "       notify-dlq replay <message-id>  back to the work queue with its retry count\n"
        "       notify-dlq replay --all         reset; the dead copy is acked after the confirm\n"
        "       notify-dlq purge --yes          remove every dead job for good (without --yes:\n"
        "                                       say how many would go)\n"
        "       notify-dlq --help\n\n"
        "The operator's CLI for the dead-letter queue <NOTIFY_QUEUE_BASE>.dead of the\n"
        "notification service (docs/notifications.md §5). It reads the service's own\n"
        "settings from the environment; the ones it uses are NOTIFY_RABBITMQ_HOST,\n"
        "NOTIFY_RABBITMQ_PORT, NOTIFY_RABBITMQ_USER, NOTIFY_RABBITMQ_PASSWORD,\n"
        "NOTIFY_RABBITMQ_VHOST and NOTIFY_QUEUE_BASE (defaults: notification --help,\n"
        "docs/operations.md); NOTIFY_LOG_LEVEL when set. A job is replayed to exchange\n"
        "<NOTIFY_QUEUE_BASE> with routing key 'work'.\n\n"
        "Exit status: 0 done; 1 not found, broker unreachable, queue missing or an\n"
        "operation failed; 2 bad usage or configuration, and purge without --yes.\n",
        DLQ_MAX_LIMIT, DLQ_DEFAULT_LIMIT);
}

/* ------------------------------------------------------------------------
 * Printing a body
 * ------------------------------------------------------------------------ */

static void indent(FILE *f, int depth)
{
    fputc('\n', f);
    for (int i = 0; i < depth && i < 64; i++)
        fputs("  ", f);
}

/* The next byte that is not JSON whitespace, or '\0' at the end. */
static char peek(const char *s, size_t len, size_t i)
{
    while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
        i++;
    return i < len ? s[i] : '\0';
}

static void print_raw(FILE *f, const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if ((s[i] >= 0x20 && s[i] < 0x7f) || s[i] == '\n' || s[i] == '\t')
            fputc(s[i], f);
        else
            fprintf(f, "\\x%02x", s[i]);
    }
}

void dlq_print_body(FILE *f, const void *body, size_t len, bool json)
{
    const char *s = body;
    bool in_str = false, esc = false;
    int depth = 0;
    char first = len > 0 ? peek(s, len, 0) : '\0';

    if (!json || (first != '{' && first != '[')) {
        print_raw(f, body, len);
        if (len == 0 || s[len - 1] != '\n')
            fputc('\n', f);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];

        if (in_str) {
            print_raw(f, (const unsigned char *)&s[i], 1);
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
            continue;
        }
        switch (ch) {
        case ' ':
        case '\n':
        case '\r':
        case '\t':
            break;
        case '"':
            in_str = true;
            fputc(ch, f);
            break;
        case '{':
        case '[':
            fputc(ch, f);
            /* An empty object or array stays on its line. */
            if (peek(s, len, i + 1) == (ch == '{' ? '}' : ']')) {
                fputc(ch == '{' ? '}' : ']', f);
                while (s[++i] != (ch == '{' ? '}' : ']'))
                    ;
            } else {
                indent(f, ++depth);
            }
            break;
        case '}':
        case ']':
            indent(f, depth > 0 ? --depth : 0);
            fputc(ch, f);
            break;
        case ',':
            fputc(ch, f);
            indent(f, depth);
            break;
        case ':':
            fputs(": ", f);
            break;
        default:
            print_raw(f, (const unsigned char *)&s[i], 1);
        }
    }
    fputc('\n', f);
}

/* ------------------------------------------------------------------------
 * The verbs
 * ------------------------------------------------------------------------ */

typedef struct run {
    const ntf_config_t *cfg;
    FILE *out, *err;
    rmq_topology_t t;
    char dead[RMQ_NAME_MAX], exchange[RMQ_NAME_MAX], work[RMQ_NAME_MAX];
} run_t;

/* One line on stderr naming the cause, and what to do where there is
 * something to do. Returns the exit code. */
static int fail(const run_t *r, svc_err_t e, const char *errbuf, const char *doing)
{
    const ntf_config_t *c = r->cfg;

    switch (e) {
    case SVC_EUNAVAIL:
    case SVC_ETIMEDOUT:
        fprintf(r->err, "notify-dlq: %s: RabbitMQ at %s:%lld unreachable or gone (%s): %s\n", doing,
                c->rabbitmq_host, (long long)c->rabbitmq_port, svc_err_name(e), errbuf);
        break;
    case SVC_EUNAUTH:
        fprintf(r->err, "notify-dlq: %s: login refused (NOTIFY_RABBITMQ_USER/PASSWORD): %s\n",
                doing, errbuf);
        break;
    case SVC_EPERM:
        fprintf(r->err, "notify-dlq: %s: vhost %s not allowed (NOTIFY_RABBITMQ_VHOST): %s\n", doing,
                c->rabbitmq_vhost, errbuf);
        break;
    default:
        fprintf(r->err, "notify-dlq: %s: %s: %s\n", doing, svc_err_name(e), errbuf);
    }
    return DLQ_EXIT_FAIL;
}

static int no_queue(const run_t *r, const char *errbuf)
{
    fprintf(r->err,
            "notify-dlq: queue %s is not declared (%s): start the notification service first "
            "(it declares the topology), or check NOTIFY_QUEUE_BASE and NOTIFY_RABBITMQ_VHOST\n",
            r->dead, errbuf);
    return DLQ_EXIT_FAIL;
}

static int browse_open(const run_t *r, rmq_browse_t **b, uint32_t *ready)
{
    rmq_conn_opts_t o;
    char errbuf[SVC_ERRBUF_LEN] = "";
    svc_err_t e;

    ntf_config_conn_opts(r->cfg, CONN_NAME, &o);
    e = rmq_browse_new(&o, r->dead, b, ready, errbuf);
    if (e == SVC_ENOTFOUND)
        return no_queue(r, errbuf);
    if (e != SVC_OK)
        return fail(r, e, errbuf, "connect");
    return DLQ_EXIT_OK;
}

/* Ends a browse: puts back what it holds. An error here loses nothing
 * (closing the connection requeues them too) but is reported. */
static int browse_close(const run_t *r, rmq_browse_t *b, int code)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    svc_err_t e = rmq_browse_release(b, errbuf);

    rmq_browse_free(b);
    if (e != SVC_OK && code == DLQ_EXIT_OK)
        return fail(r, e, errbuf, "putting the jobs back (the broker requeues them itself)");
    return code;
}

static const char *or_dash(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : "-";
}

static int do_list(const run_t *r, long limit)
{
    rmq_browse_t *b = NULL;
    uint32_t ready = 0;
    long n = 0;
    char errbuf[SVC_ERRBUF_LEN] = "";
    int code = browse_open(r, &b, &ready);

    if (code != DLQ_EXIT_OK)
        return code;
    fprintf(r->out, "%-36s  %-20s  %4s  %8s  %8s  %s\n", "MESSAGE-ID", "REASON", "HTTP", "ATTEMPTS",
            "BYTES", "DIED");
    while (n < limit) {
        rmq_fetched_t *f = NULL;
        size_t len = 0;
        svc_err_t e = rmq_browse_next(b, &f, errbuf);

        if (e != SVC_OK) {
            code = fail(r, e, errbuf, "reading the queue");
            break;
        }
        if (f == NULL)
            break;
        (void)rmq_fetched_body(f, &len);
        fprintf(r->out, "%-36s  %-20s  %4s  %8s  %8zu  %s\n", or_dash(rmq_fetched_message_id(f)),
                or_dash(rmq_fetched_header(f, RMQ_HDR_FINAL_REASON)),
                or_dash(rmq_fetched_header(f, RMQ_HDR_HTTP_STATUS)),
                or_dash(rmq_fetched_header(f, RMQ_HDR_ATTEMPTS)), len,
                or_dash(rmq_fetched_dead_at(f)));
        rmq_fetched_free(f);
        n++;
    }
    if (code == DLQ_EXIT_OK) {
        if ((uint32_t)n < ready)
            fprintf(r->out, "%lu dead jobs in %s; the first %ld listed (--limit)\n",
                    (unsigned long)ready, r->dead, n);
        else
            fprintf(r->out, "%ld dead jobs in %s\n", n, r->dead);
    }
    return browse_close(r, b, code);
}

/* Takes messages until one has message-id id; the ones before stay held.
 * *found NULL: not there (code DLQ_EXIT_FAIL after a message, or another
 * error's code). */
static int find(const run_t *r, rmq_browse_t *b, const char *id, rmq_fetched_t **found)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    long seen = 0;

    *found = NULL;
    for (;;) {
        rmq_fetched_t *f = NULL;
        svc_err_t e = rmq_browse_next(b, &f, errbuf);

        if (e == SVC_EEXHAUSTED) {
            fprintf(r->err, "notify-dlq: no job with message-id %s among the first %ld in %s\n", id,
                    seen, r->dead);
            return DLQ_EXIT_FAIL;
        }
        if (e != SVC_OK)
            return fail(r, e, errbuf, "reading the queue");
        if (f == NULL) {
            fprintf(r->err, "notify-dlq: no job with message-id %s in %s (%ld jobs there)\n", id,
                    r->dead, seen);
            return DLQ_EXIT_FAIL;
        }
        if (strcmp(rmq_fetched_message_id(f), id) == 0) {
            *found = f;
            return DLQ_EXIT_OK;
        }
        rmq_fetched_free(f);
        seen++;
    }
}

static int do_show(const run_t *r, const char *id)
{
    rmq_browse_t *b = NULL;
    rmq_fetched_t *f = NULL;
    const void *body;
    size_t len = 0;
    const char *ct;
    int code = browse_open(r, &b, NULL);

    if (code != DLQ_EXIT_OK)
        return code;
    code = find(r, b, id, &f);
    if (f != NULL) {
        body = rmq_fetched_body(f, &len);
        ct = rmq_fetched_content_type(f);
        fprintf(r->out,
                "message-id:   %s\ncontent-type: %s\nqueue:        %s\ndied:         %s\n"
                "headers:\n",
                rmq_fetched_message_id(f), or_dash(ct), r->dead, or_dash(rmq_fetched_dead_at(f)));
        for (size_t i = 0; i < rmq_fetched_header_count(f); i++) {
            const char *name, *value = rmq_fetched_header_at(f, i, &name);
            fprintf(r->out, "  %s: %s\n", name, value);
        }
        fprintf(r->out, "body (%zu bytes):\n", len);
        dlq_print_body(r->out, body, len, strstr(ct, "json") != NULL);
        rmq_fetched_free(f);
    }
    return browse_close(r, b, code);
}

/* The one replay step: a copy to the work exchange, confirmed, then the
 * dead one acked (rmq_browse_move). */
static svc_err_t replay_one(const run_t *r, rmq_browse_t *b, rmq_fetched_t *f,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t e =
        rmq_browse_move(b, f, r->exchange, RMQ_WORK_KEY, rmq_header_edit_replay(), errbuf);

    if (e == SVC_OK)
        fprintf(r->out, "replayed %s -> exchange %s, key %s (%s)\n", rmq_fetched_message_id(f),
                r->exchange, RMQ_WORK_KEY, r->work);
    return e;
}

static int do_replay_id(const run_t *r, const char *id)
{
    rmq_browse_t *b = NULL;
    rmq_fetched_t *f = NULL;
    char errbuf[SVC_ERRBUF_LEN] = "";
    int code = browse_open(r, &b, NULL);

    if (code != DLQ_EXIT_OK)
        return code;
    code = find(r, b, id, &f);
    if (f != NULL) {
        svc_err_t e = replay_one(r, b, f, errbuf);
        if (e == SVC_OK)
            fprintf(r->out, "1 job replayed\n");
        else
            code = fail(r, e, errbuf, "replay (the job stays in the dead-letter queue)");
        rmq_fetched_free(f);
    }
    return browse_close(r, b, code);
}

/* At most as many as were there at the start: a replayed job that fails
 * fast enough to be dead again before the loop ends is not replayed twice
 * (nor forever). */
static int do_replay_all(const run_t *r)
{
    rmq_browse_t *b = NULL;
    uint32_t ready = 0, done = 0;
    char errbuf[SVC_ERRBUF_LEN] = "";
    int code = browse_open(r, &b, &ready);

    while (code == DLQ_EXIT_OK && done < ready) {
        rmq_fetched_t *f = NULL;
        svc_err_t e = rmq_browse_next(b, &f, errbuf);

        if (e == SVC_OK && f == NULL)
            break;
        if (e == SVC_OK)
            e = replay_one(r, b, f, errbuf);
        if (e != SVC_OK)
            code = fail(r, e, errbuf, "replay (that job and the rest stay dead)");
        else
            done++;
        rmq_fetched_free(f);
    }
    if (b == NULL)
        return code;
    fprintf(r->out, "%lu jobs replayed\n", (unsigned long)done);
    return browse_close(r, b, code);
}

static int do_purge(const run_t *r, bool yes)
{
    rmq_conn_opts_t o;
    rmq_conn_t *c = NULL;
    uint32_t n = 0;
    char errbuf[SVC_ERRBUF_LEN] = "";
    int code = DLQ_EXIT_OK;
    svc_err_t e;

    ntf_config_conn_opts(r->cfg, CONN_NAME, &o);
    e = rmq_conn_new(&o, &c, errbuf);
    if (e != SVC_OK)
        return fail(r, e, errbuf, "connect");
    e = yes ? rmq_queue_purge(c, r->dead, &n, errbuf)
            : rmq_queue_depth(c, r->dead, &n, NULL, errbuf);
    if (e == SVC_ENOTFOUND)
        code = no_queue(r, errbuf);
    else if (e != SVC_OK)
        code = fail(r, e, errbuf, yes ? "purge" : "reading the queue");
    else if (yes)
        fprintf(r->out, "purged %lu jobs from %s\n", (unsigned long)n, r->dead);
    else {
        fprintf(r->err,
                "notify-dlq: purge removes the %lu jobs of %s for good; "
                "run 'notify-dlq purge --yes' to do it\n",
                (unsigned long)n, r->dead);
        code = DLQ_EXIT_USAGE;
    }
    rmq_conn_free(c);
    return code;
}

int dlq_run(const dlq_args_t *a, const ntf_config_t *cfg, FILE *out, FILE *err)
{
    run_t r = {.cfg = cfg, .out = out, .err = err};
    char errbuf[SVC_ERRBUF_LEN] = "";
    int code;

    ntf_config_topology(cfg, &r.t);
    if (rmq_topology_validate(&r.t, errbuf) != SVC_OK) {
        fprintf(err, "notify-dlq: NOTIFY_QUEUE_BASE: %s\n", errbuf);
        return DLQ_EXIT_USAGE;
    }
    rmq_topology_name(&r.t, RMQ_NAME_DEAD, 0, r.dead);
    rmq_topology_name(&r.t, RMQ_NAME_EXCHANGE, 0, r.exchange);
    rmq_topology_name(&r.t, RMQ_NAME_WORK, 0, r.work);
    switch (a->verb) {
    case DLQ_LIST:
        code = do_list(&r, a->limit);
        break;
    case DLQ_SHOW:
        code = do_show(&r, a->id);
        break;
    case DLQ_REPLAY:
        code = a->all ? do_replay_all(&r) : do_replay_id(&r, a->id);
        break;
    case DLQ_PURGE:
        code = do_purge(&r, a->yes);
        break;
    default:
        dlq_help(out);
        code = DLQ_EXIT_OK;
    }
    fflush(out);
    return code;
}
