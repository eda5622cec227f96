/* SPDX-License-Identifier: Apache-2.0 */
/* server.c - the sink and its HTTP server, wired from the configuration. */
#include <stdlib.h>

#include "server.h"
#include "sink.h"

struct nsk_server {
    nsk_sink_t *sink;
    nsk_http_t *http;
};

svc_err_t nsk_server_new(const nsk_config_t *c, nsk_server_t **out,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    nsk_sink_opts_t so = {.tolerance_s = c->tolerance_s, .max_records = (size_t)c->max_records};
    nsk_http_opts_t ho = {.listen = c->listen,
                          .max_conns = (unsigned)c->max_conns,
                          .max_body = (size_t)c->max_body_bytes,
                          .idle_timeout_ms = (int)c->idle_timeout_ms,
                          .handler = nsk_sink_handle};
    nsk_server_t *s = calloc(1, sizeof *s);
    svc_err_t err;

    if (s == NULL)
        return SVC_ENOMEM;
    err = whk_keyset_load("NOTIFY_WEBHOOK_SECRET", c->secret, c->secret_file, &so.keys, errbuf);
    if (err == SVC_OK)
        err = nsk_sink_new(&so, &s->sink);
    if (err == SVC_OK) {
        ho.ctx = s->sink;
        err = nsk_http_new(&ho, &s->http, errbuf);
    }
    if (err != SVC_OK) {
        nsk_server_free(s);
        return err;
    }
    nsk_sink_attach(s->sink, s->http);
    *out = s;
    return SVC_OK;
}

int nsk_server_port(const nsk_server_t *s)
{
    return nsk_http_port(s->http);
}

int nsk_server_run(nsk_server_t *s, int stop_fd)
{
    return nsk_http_run(s->http, stop_fd);
}

void nsk_server_free(nsk_server_t *s)
{
    if (s == NULL)
        return;
    nsk_http_free(s->http);
    nsk_sink_free(s->sink);
    free(s);
}
