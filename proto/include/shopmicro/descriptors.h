/* SPDX-License-Identifier: Apache-2.0 */
/*
 * descriptors.h - the serialized FileDescriptorSet of each gRPC service
 * (proto/CMakeLists.txt: its .proto with imports, plus grpc.health.v1 and
 * grpc.reflection.v1alpha), for rpc_server_opts_t.descriptor_set. Static data.
 */
#ifndef SHOPMICRO_DESCRIPTORS_H
#define SHOPMICRO_DESCRIPTORS_H

#include <stddef.h>

extern const unsigned char shopmicro_catalog_descriptor_set[];
extern const size_t shopmicro_catalog_descriptor_set_len;
extern const unsigned char shopmicro_order_descriptor_set[];
extern const size_t shopmicro_order_descriptor_set_len;

#endif
