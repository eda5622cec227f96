/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.h - a listening socket on 127.0.0.1, on a port the kernel picks,
 * for the fake peers that unit tests run in their own process (a fake
 * Postgres, a fake HTTP/2 server).
 */
#ifndef SUPPORT_LISTEN_H
#define SUPPORT_LISTEN_H

/* A listening TCP socket on 127.0.0.1 (backlog 16); *port gets its port.
 * -1 on failure (errno set). The caller closes it. */
int svc_test_listen_loopback(int *port);

#endif
