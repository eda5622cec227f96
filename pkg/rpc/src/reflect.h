/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reflect.h - grpc.reflection.v1alpha answers from a FileDescriptorSet: the
 * transport-free half of the reflection service (builtin.c streams it).
 *
 * Built once at server creation, read-only afterwards, so any thread may ask.
 */
#ifndef RPC_REFLECT_H
#define RPC_REFLECT_H

#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

typedef struct rpc__reflect rpc__reflect_t;

/* Indexes set (borrowed: it must outlive the index) and copies the n
 * service names list_services answers. SVC_EINVAL when set does not decode
 * or a file imports one that is not in it (protoc-c --include_imports). */
svc_err_t rpc__reflect_new(const unsigned char *set, size_t len, const char *const *services,
                           size_t n_services, rpc__reflect_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);
void rpc__reflect_free(rpc__reflect_t *r);

/* Answers one serialized ServerReflectionRequest with a serialized
 * ServerReflectionResponse in malloc'd memory (*out_len bytes; the caller
 * frees). A question it cannot answer (unknown file or symbol, extensions)
 * is an error_response inside the reply, as the protocol wants. NULL when
 * the request does not decode or memory runs out. */
uint8_t *rpc__reflect_answer(const rpc__reflect_t *r, const uint8_t *in, size_t in_len,
                             size_t *out_len);

#endif
