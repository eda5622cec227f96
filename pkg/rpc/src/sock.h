/* SPDX-License-Identifier: Apache-2.0 */
/* sock.h - small process-level helpers of pkg/rpc (util.c). */
#ifndef RPC_SOCK_H
#define RPC_SOCK_H

/* Tries to bind host:port the way gRPC will, without SO_REUSEPORT, so that
 * "address in use" is reported with the real errno text. Returns 0 when the
 * address is free (or cannot be probed: gRPC then has the last word). */
int rpc__probe_listen(const char *listen, char errbuf[static SVC_ERRBUF_LEN]);
/* Sends gRPC's own log output (gpr_log) through svc_log as mod=grpc. */
void rpc__route_grpc_logs(void);

#endif
