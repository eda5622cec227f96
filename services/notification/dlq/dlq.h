/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlq.h - notify-dlq, the operator's CLI for the notification service's
 * dead-letter queue B.dead (docs/notifications.md §5): list, show, replay,
 * purge. main.c loads the service's configuration and calls dlq_run; the
 * parsing and printing are pure and unit-tested.
 */
#ifndef NTF_DLQ_H
#define NTF_DLQ_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "mq/mq.h"

#define DLQ_DEFAULT_LIMIT 100                 /* list --limit               */
#define DLQ_MAX_LIMIT     RMQ_BROWSE_MAX_HELD /* also how far show/replay look */

/* Exit codes. */
#define DLQ_EXIT_OK    0 /* done                                             */
#define DLQ_EXIT_FAIL  1 /* not found, broker unreachable, an operation failed */
#define DLQ_EXIT_USAGE 2 /* bad command line or configuration; purge without --yes */

typedef enum { DLQ_HELP, DLQ_LIST, DLQ_SHOW, DLQ_REPLAY, DLQ_PURGE } dlq_verb_t;

typedef struct dlq_args {
    dlq_verb_t verb;
    const char *id; /* show, replay <message-id>: borrowed from argv */
    bool all;       /* replay --all                                  */
    bool yes;       /* purge --yes                                   */
    long limit;     /* list --limit: 1..DLQ_MAX_LIMIT                 */
} dlq_args_t;

/* argv[1..] into a. SVC_EINVAL naming the problem in errbuf. Pure. */
svc_err_t dlq_parse_args(int argc, char **argv, dlq_args_t *a, char errbuf[static SVC_ERRBUF_LEN]);
/* The --help text. */
void dlq_help(FILE *f);

/* Writes body (len bytes) for a person: JSON indented by two spaces per
 * level (strings untouched); anything else as it is, with bytes outside
 * printable ASCII (and not newline or tab) as \xNN. Ends with a newline.
 * Pure. */
void dlq_print_body(FILE *f, const void *body, size_t len, bool json);

/* Runs a (not DLQ_HELP) against the broker and queues of cfg: results on
 * out, errors on err (one line naming the cause). Returns a DLQ_EXIT_*. */
int dlq_run(const dlq_args_t *a, const ntf_config_t *cfg, FILE *out, FILE *err);

#endif
