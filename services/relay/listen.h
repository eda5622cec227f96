/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.h - the relay's wake-up call: a connection of its own that LISTENs
 * on channel "outbox" (the writer's transaction does pg_notify('outbox', '')),
 * so a committed event is claimed within milliseconds, not on the next poll.
 *
 * pkg/db's connections run prepared statements against deadlines; waiting
 * for notifications needs the socket itself, hence this small separate
 * libpq connection. It heals like pkg/db's: lost, it is re-made on the next
 * wait, and meanwhile the wait is a plain timeout (the slow poll).
 */
#ifndef RLY_LISTEN_H
#define RLY_LISTEN_H

#include "svc/core.h"

typedef struct rly_listener rly_listener_t;

typedef enum {
    RLY_WAKE_NOTIFY,  /* a NOTIFY arrived, or the connection was (re)made:
                         rows may be waiting                                */
    RLY_WAKE_TIMEOUT, /* timeout_ms passed without either                   */
    RLY_WAKE_FD,      /* extra_fd became readable (the stop signal)         */
} rly_wake_t;

/* Does not connect: the first wait does. *out owned by caller. */
svc_err_t rly_listener_new(const char *dsn, const char *name, rly_listener_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);
void rly_listener_free(rly_listener_t *l);

/* Waits up to timeout_ms for a notification on "outbox" or for extra_fd
 * (-1: none). Every notification already received is consumed. Logs one
 * line when the connection is lost and one when it is back. */
rly_wake_t rly_listener_wait(rly_listener_t *l, int extra_fd, int timeout_ms);

#endif
