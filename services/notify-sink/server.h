/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.h - a whole notify-sink from its configuration: the sink (sink.h)
 * behind its HTTP server (http.h). main.c runs one; the HTTP binding's unit
 * tests run one in a thread of their own.
 */
#ifndef NSK_SERVER_H
#define NSK_SERVER_H

#include "config.h"

typedef struct nsk_server nsk_server_t;

/* Parses the secret, builds the sink, binds the port. SVC_EINVAL /
 * SVC_EUNAVAIL / SVC_ENOMEM with errbuf. *out owned by caller. */
svc_err_t nsk_server_new(const nsk_config_t *c, nsk_server_t **out,
                         char errbuf[static SVC_ERRBUF_LEN]);
/* The bound port. */
int nsk_server_port(const nsk_server_t *s);
/* Serves on the calling thread until stop_fd is readable: 0, or 1 on a
 * fatal error. */
int nsk_server_run(nsk_server_t *s, int stop_fd);
/* NULL-safe; not while nsk_server_run() runs. */
void nsk_server_free(nsk_server_t *s);

#endif
