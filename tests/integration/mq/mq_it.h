/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mq_it.h - what pkg/mq's integration tests share: a private RabbitMQ node
 * of the test's own, started by deploy/local/rabbitmq.sh in a run folder of
 * the build tree on three free ports (as the relay tests get their Kafka
 * broker), and direct looks at a queue (its depth, one message by
 * basic.get) that do not go through the module under test.
 *
 * Environment (set by tests/integration/mq/CMakeLists.txt):
 *   MQ_IT_RABBITMQ_SH   deploy/local/rabbitmq.sh
 *   MQ_IT_STACK_DIR     deploy/local (stack.sh's free_ports picks the ports)
 *   MQ_IT_RUN_DIR       the node's run folder (emptied first)
 *   SVC_TEST_TIMEOUT_MULTIPLIER  scales every wait (4 in sanitizer builds)
 */
#ifndef MQ_IT_H
#define MQ_IT_H

#include "mq/mq.h"

typedef struct mq_it_node {
    int port, dist_port, epmd_port; /* 0 until the first start */
} mq_it_node_t;

/* ms scaled by SVC_TEST_TIMEOUT_MULTIPLIER. */
int mq_it_ms(int ms);

/* rabbitmq.sh VERB (start, stop, kill) with this node's ports and run
 * folder; fresh ports and an emptied run folder at the first start. SVC_OK
 * when it exited 0 (its output is printed otherwise). *secs (optional) gets
 * the wall time the verb took. */
svc_err_t mq_it_node(mq_it_node_t *n, const char *verb, double *secs);
/* Stops the node (if it was started) and removes the run folder. */
void mq_it_node_cleanup(mq_it_node_t *n);

/* Connection options for this node (short timeouts for tests). */
void mq_it_conn_opts(const mq_it_node_t *n, rmq_conn_opts_t *o);

/* Messages ready in queue (passive declare on a connection of its own);
 * -1 when it cannot be read (printed). */
long mq_it_depth(const mq_it_node_t *n, const char *queue);

/* One message taken (and acked) from queue by basic.get: its message-id
 * and the text of the named header (hdr_value "" when absent). 0, or -1
 * when the queue is empty or it failed (printed). */
int mq_it_get(const mq_it_node_t *n, const char *queue, char *msg_id, size_t id_cap,
              const char *const *hdr_names, char (*hdr_values)[RMQ_HEADER_VALUE_MAX],
              size_t n_hdrs);

#endif
