/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport-free parts of the built-in services and the server's
 * metrics: the reflection index over a real descriptor set (the catalog's,
 * as the server embeds it), and the stats page.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grpc/reflection/v1alpha/reflection.pb-c.h"
#include "reflect.h"
#include "shopmicro/descriptors.h"
#include "stats.h"

typedef Grpc__Reflection__V1alpha__ServerReflectionRequest req_t;
typedef Grpc__Reflection__V1alpha__ServerReflectionResponse resp_t;

static const char *const services[] = {"shopmicro.catalog.v1.CatalogService",
                                       "grpc.health.v1.Health"};

static rpc__reflect_t *index_catalog(void)
{
    rpc__reflect_t *r = NULL;
    char errbuf[SVC_ERRBUF_LEN] = "";

    assert_int_equal(rpc__reflect_new(shopmicro_catalog_descriptor_set,
                                      shopmicro_catalog_descriptor_set_len, services, 2, &r,
                                      errbuf),
                     SVC_OK);
    return r;
}

/* Asks one question; the answer is decoded (caller frees). */
static resp_t *ask(const rpc__reflect_t *r, req_t *q)
{
    uint8_t in[512], *out;
    size_t n = grpc__reflection__v1alpha__server_reflection_request__pack(q, in), len = 0;
    resp_t *a;

    out = rpc__reflect_answer(r, in, n, &len);
    assert_non_null(out);
    a = grpc__reflection__v1alpha__server_reflection_response__unpack(NULL, len, out);
    free(out);
    assert_non_null(a);
    return a;
}

static void symbol_lookup(void **state)
{
    static const struct {
        const char *sym;
        size_t files; /* 0: not found */
    } cases[] = {
        {"shopmicro.catalog.v1.CatalogService", 1},
        {"shopmicro.catalog.v1.CatalogService.ListProducts", 1},
        {"shopmicro.catalog.v1.Product", 1},
        {"grpc.health.v1.HealthCheckResponse.ServingStatus", 1}, /* a nested enum */
        {"grpc.reflection.v1alpha.ServerReflection", 1},
        {"shopmicro.catalog.v1.Nope", 0},
        {"shopmicro.catalog.v1", 0}, /* a package is not a symbol */
        {"CatalogService", 0},       /* names are fully qualified */
    };
    rpc__reflect_t *r = index_catalog();

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        req_t q = GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__INIT;
        resp_t *a;

        q.message_request_case =
            GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL;
        q.file_containing_symbol = (char *)cases[i].sym;
        a = ask(r, &q);
        if (cases[i].files == 0) {
            assert_int_equal(
                a->message_response_case,
                GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE);
            assert_int_equal(a->error_response->error_code, 5);
        } else {
            assert_int_equal(
                a->message_response_case,
                GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE);
            assert_int_equal(a->file_descriptor_response->n_file_descriptor_proto, cases[i].files);
        }
        assert_string_equal(a->original_request->file_containing_symbol, cases[i].sym);
        protobuf_c_message_free_unpacked(&a->base, NULL);
    }
    rpc__reflect_free(r);
}

static void list_services_and_bad_requests(void **state)
{
    rpc__reflect_t *r = index_catalog();
    req_t q = GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__INIT;
    const uint8_t garbage[] = {0xff, 0xff, 0xff};
    size_t len = 0;
    resp_t *a;

    (void)state;
    q.message_request_case =
        GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES;
    q.list_services = (char *)"";
    a = ask(r, &q);
    assert_int_equal(a->list_services_response->n_service, 2);
    assert_string_equal(a->list_services_response->service[0]->name, services[0]);
    protobuf_c_message_free_unpacked(&a->base, NULL);

    q.message_request_case =
        GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST__NOT_SET;
    a = ask(r, &q);
    assert_int_equal(a->error_response->error_code, 3); /* INVALID_ARGUMENT */
    protobuf_c_message_free_unpacked(&a->base, NULL);

    assert_null(rpc__reflect_answer(r, garbage, sizeof garbage, &len));
    rpc__reflect_free(r);
}

static void broken_sets_are_refused(void **state)
{
    /* a file importing one the set lacks: field 1 { name "a.proto" dependency "b.proto" } */
    static const unsigned char missing_import[] = {0x0a, 0x12, 0x0a, 0x07, 'a',  '.',  'p',
                                                   'r',  'o',  't',  'o',  0x1a, 0x07, 'b',
                                                   '.',  'p',  'r',  'o',  't',  'o'};
    static const unsigned char not_a_set[] = {0x12, 0x00};
    rpc__reflect_t *r = NULL;
    char errbuf[SVC_ERRBUF_LEN] = "";

    (void)state;
    assert_int_equal(
        rpc__reflect_new(missing_import, sizeof missing_import, services, 2, &r, errbuf),
        SVC_EINVAL);
    assert_null(r);
    assert_non_null(strstr(errbuf, "imports b.proto"));
    assert_int_equal(rpc__reflect_new(not_a_set, sizeof not_a_set, services, 2, &r, errbuf),
                     SVC_EINVAL);
}

static void stats_page(void **state)
{
    static const rpc__stats_method_t methods[] = {{"/pkg.Svc/Get", "unary"},
                                                  {"/pkg.Svc/Watch", "server_stream"}};
    rpc__stats_t *st = rpc__stats_new(methods, 2, 2);
    char buf[16384];
    svc_text_t t = {buf, sizeof buf, 0};

    (void)state;
    rpc__stats_started(st, 0, 0);
    rpc__stats_started(st, 1, 0);
    rpc__stats_handled(st, 0, 0, 0, 3 * SVC_NS_PER_MS);
    rpc__stats_handled(st, 1, 0, 5, 20 * SVC_NS_PER_MS); /* NOT_FOUND, on the other shard */
    rpc__stats_render(st, 7, &t);
    assert_true(t.len < sizeof buf);
    assert_non_null(strstr(buf,
                           "grpc_server_started_total{grpc_type=\"unary\",grpc_service=\"pkg.Svc\","
                           "grpc_method=\"Get\"} 2\n"));
    assert_non_null(strstr(buf, "grpc_method=\"Get\",grpc_code=\"NotFound\"} 1\n"));
    assert_non_null(strstr(buf, "grpc_method=\"Watch\",grpc_code=\"OK\"} 0\n"));
    assert_null(strstr(buf, "grpc_method=\"Watch\",grpc_code=\"NotFound\""));
    /* cumulative buckets: 3 ms is in le=0.005, 20 ms only from le=0.025 */
    assert_non_null(strstr(buf, "grpc_method=\"Get\",le=\"0.005\"} 1\n"));
    assert_non_null(strstr(buf, "grpc_method=\"Get\",le=\"0.025\"} 2\n"));
    assert_non_null(strstr(buf, "grpc_method=\"Get\",le=\"+Inf\"} 2\n"));
    assert_null(strstr(buf, "grpc_service=\"unknown\"")); /* shown once something arrives */
    rpc__stats_started(st, 0, rpc__stats_unknown(st));
    t.len = 0;
    rpc__stats_render(st, 7, &t);
    assert_non_null(strstr(buf, "grpc_service=\"unknown\",grpc_method=\"unknown\"} 1\n"));
    assert_non_null(strstr(buf, "shopmicro_rpc_server_in_flight 7\n"));
    rpc__stats_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(symbol_lookup),
        cmocka_unit_test(list_services_and_bad_requests),
        cmocka_unit_test(broken_sets_are_refused),
        cmocka_unit_test(stats_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
