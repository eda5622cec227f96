/* SPDX-License-Identifier: Apache-2.0 */
/* absl_quiet.h - abseil's mutex deadlock detection off (absl_quiet.cc). */
#ifndef RPC_ABSL_QUIET_H
#define RPC_ABSL_QUIET_H

#ifdef __cplusplus
extern "C" {
#endif

/* Process-wide and idempotent; call before gRPC starts its threads. */
void rpc__absl_deadlock_detection_off(void);

#ifdef __cplusplus
}
#endif

#endif
