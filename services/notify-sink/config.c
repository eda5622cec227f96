/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - every setting of the notify-sink, in one table. */
#include "config.h"

#define OFF(f) SVC_CFG_OFF(nsk_config_t, f)

static const svc_cfg_entry_t table[] = {
    {"NOTIFY_SINK_LISTEN", SVC_CFG_STR, 1, 255, "127.0.0.1:8090", OFF(listen),
     "HTTP host:port the sink listens on (port 0: the kernel picks)"},
    {"NOTIFY_WEBHOOK_SECRET", SVC_CFG_STR, 0, 511, "", OFF(secret),
     "Standard Webhooks secrets whsec_<base64> (24..64 bytes), space- or comma-separated: a "
     "delivery signed with any is accepted; this or NOTIFY_WEBHOOK_SECRET_FILE is required"},
    {"NOTIFY_WEBHOOK_SECRET_FILE", SVC_CFG_STR, 0, 511, "", OFF(secret_file),
     "a file (mode 0600) holding NOTIFY_WEBHOOK_SECRET's value, read at start; set one of the two"},
    {"NOTIFY_SINK_TOLERANCE_S", SVC_CFG_INT, 0, 86400, "300", OFF(tolerance_s),
     "how far webhook-timestamp may be from the sink's clock, either way"},
    {"NOTIFY_SINK_MAX_RECORDS", SVC_CFG_INT, 1, 1000000, "10000", OFF(max_records),
     "deliveries kept for GET /received and for dedupe; the oldest is forgotten once its "
     "timestamp + tolerance has passed (a new id is 503 until then)"},
    {"NOTIFY_SINK_MAX_BODY_BYTES", SVC_CFG_INT, 0, 67108864, "1048576", OFF(max_body_bytes),
     "largest request body (413 beyond)"},
    {"NOTIFY_SINK_MAX_CONNS", SVC_CFG_INT, 1, 4096, "256", OFF(max_conns),
     "open connections at once (hung ones included); one more is closed at once"},
    {"NOTIFY_SINK_IDLE_TIMEOUT_MS", SVC_CFG_INT, 100, 3600000, "60000", OFF(idle_timeout_ms),
     "a connection with no traffic this long is closed (a hung request too)"},
    {"NOTIFY_SINK_LOG_LEVEL", SVC_CFG_LOG_LEVEL, 0, 0, "info", OFF(log_level),
     "debug | info | warn | error"},
};

svc_err_t nsk_config_load(nsk_config_t *c, const char *(*getenv_fn)(const char *),
                          char errbuf[static SVC_ERRBUF_LEN])
{
    return svc_cfg_load(table, SVC_COUNTOF(table), c, getenv_fn, errbuf);
}

void nsk_config_help(FILE *f)
{
    fprintf(f, "Usage: notify-sink [--help]\n\n"
               "A webhook receiver for tests and demos (docs/notify-sink.md): verifies each\n"
               "POSTed delivery's Standard Webhooks signature, dedupes by webhook-id,\n"
               "logs one line per delivery and lists them at GET /received; POST /control\n"
               "makes it fail, throttle, hang or go away. Configured only by environment\n"
               "variables. SIGTERM or SIGINT closes every connection and exits 0.\n\n");
    svc_cfg_print_help(f, table, SVC_COUNTOF(table));
}

void nsk_config_log(const nsk_config_t *c)
{
    svc_log_info("notify-sink",
                 "config: listen=%s tolerance_s=%lld max_records=%lld max_body_bytes=%lld "
                 "max_conns=%lld idle_timeout_ms=%lld secret=%s secret_file=%s",
                 c->listen, (long long)c->tolerance_s, (long long)c->max_records,
                 (long long)c->max_body_bytes, (long long)c->max_conns,
                 (long long)c->idle_timeout_ms, c->secret[0] != '\0' ? "(set, not shown)" : "-",
                 c->secret_file[0] != '\0' ? c->secret_file : "-");
}
