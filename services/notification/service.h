/* SPDX-License-Identifier: Apache-2.0 */
/*
 * service.h - the notification service put together: the webhook client
 * (pkg/resilience's HTTP binding), the publisher behind the Kafka consumer
 * (publish.h), the delivery pool (deliver.h) and the admin port. main.c
 * only loads the configuration and waits for SIGTERM.
 */
#ifndef NTF_SERVICE_H
#define NTF_SERVICE_H

#include "config.h"

typedef struct ntf_service ntf_service_t; /* opaque */

/* Starts everything in dependency order (a broker that is down is not an
 * error: the parts reconnect, and /readyz says what is missing). cfg is
 * borrowed and must outlive the service. SVC_EINVAL (a bad secret, bad
 * options) or SVC_EUNAVAIL (the admin port) with errbuf saying why. */
svc_err_t ntf_service_start(const ntf_config_t *cfg, ntf_service_t **out,
                            char errbuf[static SVC_ERRBUF_LEN]);
/* The admin port actually bound (NOTIFY_ADMIN_LISTEN with port 0); -1 with
 * no admin port. */
int ntf_service_admin_port(const ntf_service_t *s);
/* Stops in reverse order: no new job from Kafka, deliveries in flight
 * finish and are settled, then the rest. NULL-safe. */
void ntf_service_stop(ntf_service_t *s);

#endif
