/* SPDX-License-Identifier: Apache-2.0 */
/* message.c - client messages of failed upstream calls (see message.h). */
#include <string.h>

#include "http.h"
#include "message.h"
#include "rs/resilience.h"
#include "svc/core.h"

/* The project's texts a client of these codes needs, each written where
 * its comment says. Looked for as they are; never copied from the input. */
static const char *const phrases[] = {
    "the gateway is shutting down",           /* dispatch.c: the drain cancelled the call */
    "catalog unavailable",                    /* services/order/pricing.c */
    "catalog overloaded",                     /* services/catalog/fault.c, shedding */
    "the database did not confirm the order", /* services/order/rpc.c, outcome unknown */
    /* services/order/store.h ORD_UNKNOWN_NOTE, upstream.c's note for order */
    "the order may have been placed: retry with the same Idempotency-Key",
    "the request may have been carried out", /* upstream.c's note for catalog */
};

bool gw_message_is_scrubbed(int code)
{
    return code != 0 && gw_http_status_from_grpc(code) >= 500;
}

static const char *sentence(int code)
{
    switch (code) {
    case 4:
        return "did not answer in time";
    case 14:
        return "is unavailable";
    default:
        return "failed";
    }
}

static bool found(const char *phrase, const char *const *texts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (texts[i] != NULL && strstr(texts[i], phrase) != NULL)
            return true;
    return false;
}

static void add_phrase(svc_text_t *t, const char *phrase, const char *const *texts, size_t n)
{
    if (found(phrase, texts, n))
        svc_text_printf(t, ": %s", phrase);
}

size_t gw_client_message(int code, const char *dependency, const char *request_id,
                         const char *const *texts, size_t n, char *buf, size_t cap)
{
    svc_text_t t = {buf, cap, 0};

    if (cap > 0)
        buf[0] = '\0';
    svc_text_printf(&t, "%s %s", dependency, sentence(code));
    if (request_id != NULL && request_id[0] != '\0')
        svc_text_printf(&t, " (request %s)", request_id);
    for (size_t i = 0; i < SVC_COUNTOF(phrases); i++)
        add_phrase(&t, phrases[i], texts, n);
    /* pkg/resilience's reasons of a failure ("circuit open", "bulkhead
     * full", ...); the two of a success would match any "ok" in a word. */
    for (int r = RS_REASON_RETRIED + 1; r < RS__REASON_COUNT; r++)
        add_phrase(&t, rs_reason_text((rs_reason_t)r), texts, n);
    return t.len;
}

void gw_log_text(const char *s, char *out, size_t cap)
{
    size_t n = 0;

    if (cap == 0)
        return;
    for (; *s != '\0' && n + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        out[n++] = c == '"' || c == '\\' ? '\'' : c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[n] = '\0';
}
