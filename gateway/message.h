/* SPDX-License-Identifier: Apache-2.0 */
/*
 * message.h - what a client is told when an upstream call failed with a
 * server-side status (docs/gateway.md, "Security", "Error messages").
 *
 * A failed call's message may come from anywhere below the gateway: a
 * service's handler, libpq through it ("connection to server at ... port
 * ... failed"), gRPC core ("failed to connect to all addresses; last error:
 * ... ipv4:10.0.0.7:25051 ..."). For a status the gateway answers with a 5xx
 * (UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE,
 * DATA_LOSS) none of that text reaches the client. The gateway writes the
 * message itself from the dependency's name and the request id:
 *
 *   "order is unavailable (request 3f2a...)"
 *   "catalog did not answer in time (request 3f2a...)"
 *   "order failed (request 3f2a...)"
 *
 * followed by the project's own phrases that the failure's texts contain,
 * from a fixed table (the order service's "catalog unavailable" and its
 * unknown-outcome note, pkg/resilience's reason texts such as "circuit
 * open", "the gateway is shutting down"), each once, in the table's order,
 * after ": ". Nothing of the texts themselves is copied, so no address, host
 * name or library text can come through; the full text goes to the access
 * log line under the same request id. Other codes (NOT_FOUND,
 * INVALID_ARGUMENT, ALREADY_EXISTS, ...) are the upstream's verdict on the
 * request, written for its client, and pass through. Pure; thread-safe.
 */
#ifndef GW_MESSAGE_H
#define GW_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>

/* True for the codes whose messages gw_client_message writes. */
bool gw_message_is_scrubbed(int code);

/*
 * The client's message for a call to `dependency` that failed with code
 * (gw_message_is_scrubbed), for request id (NULL or "": no id), into buf
 * like snprintf (cap bytes, NUL-terminated when cap > 0); returns the length
 * it needs. texts: n texts (a NULL entry is skipped) in which the project's
 * phrases are looked for.
 */
size_t gw_client_message(int code, const char *dependency, const char *request_id,
                         const char *const *texts, size_t n, char *buf, size_t cap);

/* A text for a log line's key="value": printable ASCII, '"' and '\\' as
 * '\'', control bytes and non-ASCII as '?'; into out (cap bytes,
 * NUL-terminated, cut to fit). */
void gw_log_text(const char *s, char *out, size_t cap);

#endif
