/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - bench_overload: one run of the overload experiment (overload.h),
 * its CSV, and a summary line per phase. bench/run_overload.sh runs it.
 *
 *   bench_overload --target H:P --admin H:P --mode naive|guarded --csv FILE
 *                  [--phase NAME:SECONDS:LATENCY_MS ...] [--rate N] [--deadline-ms N]
 *                  [--slots N] [--queue N] [--pushback-ms N] [--bulkhead N]
 *                  [--naive-attempts N] [--naive-backoff-ms N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "overload.h"
#include "rpc/rpc.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"

static long num(const char *s, const char *what, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*end != '\0' || end == s || v < lo || v > hi) {
        fprintf(stderr, "bench_overload: %s must be %ld..%ld, not '%s'\n", what, lo, hi, s);
        exit(2);
    }
    return v;
}

static void add_phase(ov_opts_t *o, const char *spec)
{
    char name[16], sec[16], lat[16];

    if (o->n_phases == OV_MAX_PHASES || sscanf(spec, "%15[^:]:%15[^:]:%15s", name, sec, lat) != 3) {
        fprintf(stderr, "bench_overload: --phase NAME:SECONDS:LATENCY_MS (at most %d)\n",
                OV_MAX_PHASES);
        exit(2);
    }
    snprintf(o->phases[o->n_phases].name, sizeof o->phases[0].name, "%s", name);
    o->phases[o->n_phases].seconds = (int)num(sec, "phase seconds", 1, 3600);
    o->phases[o->n_phases++].latency_ms = (uint32_t)num(lat, "phase latency", 0, 60000);
}

static const char *parse(int argc, char **argv, ov_opts_t *o)
{
    const char *csv = NULL;

    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--target") == 0)
            o->target = v;
        else if (strcmp(k, "--admin") == 0)
            o->admin = v;
        else if (strcmp(k, "--csv") == 0)
            csv = v;
        else if (strcmp(k, "--mode") == 0)
            o->mode = strcmp(v, "naive") == 0 ? OV_NAIVE : OV_GUARDED;
        else if (strcmp(k, "--phase") == 0)
            add_phase(o, v);
        else if (strcmp(k, "--rate") == 0)
            o->rate = (int)num(v, "--rate", 1, 10000);
        else if (strcmp(k, "--deadline-ms") == 0)
            o->deadline_ms = (int)num(v, k, 1, 60000);
        else if (strcmp(k, "--slots") == 0)
            o->slots = (uint32_t)num(v, k, 0, 4096);
        else if (strcmp(k, "--queue") == 0)
            o->queue = (uint32_t)num(v, k, 0, 4096);
        else if (strcmp(k, "--pushback-ms") == 0)
            o->pushback_ms = (uint32_t)num(v, k, 0, 60000);
        else if (strcmp(k, "--bulkhead") == 0)
            o->bulkhead = (uint32_t)num(v, k, 0, 100000);
        else if (strcmp(k, "--naive-attempts") == 0)
            o->naive_attempts = (int)num(v, k, 1, 10);
        else if (strcmp(k, "--naive-backoff-ms") == 0)
            o->naive_backoff_ms = (int)num(v, k, 0, 10000);
        else {
            fprintf(stderr, "bench_overload: unknown argument %s (see the head of main.c)\n", k);
            exit(2);
        }
    }
    if (o->target == NULL || o->admin == NULL || csv == NULL) {
        fprintf(stderr, "bench_overload: --target, --admin and --csv are required\n");
        exit(2);
    }
    if (o->n_phases == 0) {
        add_phase(o, "normal:30:20");
        add_phase(o, "slow:60:120");
        add_phase(o, "normal:60:20");
    }
    return csv;
}

/* An id to ask for: the first product, or a new one in an empty catalog. */
static int product_id(const char *target, char *out, size_t cap)
{
    Shopmicro__Catalog__V1__ListProductsRequest lr =
        SHOPMICRO__CATALOG__V1__LIST_PRODUCTS_REQUEST__INIT;
    Shopmicro__Catalog__V1__CreateProductRequest cr =
        SHOPMICRO__CATALOG__V1__CREATE_PRODUCT_REQUEST__INIT;
    grpc_channel *ch = rpc_channel_new(target, NULL);
    rpc_call_opts_t co = {svc_now_ns() + 5000 * SVC_NS_PER_MS, NULL, NULL, 0, true};
    ProtobufCMessage *m = NULL;
    rpc_result_t res;
    int rc = -1;

    lr.page_size = 1;
    if (rpc_call_unary(ch, "/shopmicro.catalog.v1.CatalogService/ListProducts", &lr.base,
                       &shopmicro__catalog__v1__list_products_response__descriptor, &m, &co,
                       &res) == SVC_OK) {
        Shopmicro__Catalog__V1__ListProductsResponse *l = (void *)m;
        if (l->n_products > 0)
            rc = snprintf(out, cap, "%s", l->products[0]->id) > 0 ? 0 : -1;
        protobuf_c_message_free_unpacked(m, NULL);
        m = NULL;
    }
    cr.name = (char *)"overload probe";
    cr.price_cents = 100;
    cr.stock = 1;
    if (rc != 0 &&
        rpc_call_unary(ch, "/shopmicro.catalog.v1.CatalogService/CreateProduct", &cr.base,
                       &shopmicro__catalog__v1__product__descriptor, &m, &co, &res) == SVC_OK) {
        rc = snprintf(out, cap, "%s", ((Shopmicro__Catalog__V1__Product *)m)->id) > 0 ? 0 : -1;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    if (rc != 0)
        fprintf(stderr, "bench_overload: no product at %s: %s\n", target, res.message);
    grpc_channel_destroy(ch);
    return rc;
}

static void summary(const ov_opts_t *o, const ov_row_t *rows)
{
    for (int p = 0, from = 0; p < o->n_phases; from += o->phases[p++].seconds) {
        int to = from + o->phases[p].seconds;
        unsigned long long orig = 0, ok = 0;
        for (int s = from; s < to; s++) {
            orig += rows[s].originals;
            ok += rows[s].ok;
        }
        printf("RESULT mode=%s phase=%d:%s seconds=%d..%d amplification=%.3f goodput_pct=%.1f "
               "ok_per_s=%.1f\n",
               o->mode == OV_NAIVE ? "naive" : "guarded", p, o->phases[p].name, from, to,
               ov_amplification(rows, from, to), orig ? 100.0 * (double)ok / (double)orig : 0,
               (double)ok / (to - from));
    }
}

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN] = "", id[64];
    ov_opts_t o;
    ov_row_t *rows = NULL;
    int n = 0;
    const char *csv;
    FILE *f;

    ov_opts_init(&o);
    csv = parse(argc, argv, &o);
    svc_log_set_level_name("error"); /* a line per retry would flood the run */
    rpc_init();
    if (product_id(o.target, id, sizeof id) != 0)
        return 1;
    o.product_id = id;
    fprintf(stderr, "bench_overload: started\n");
    if (ov_run(&o, &rows, &n, errbuf) != SVC_OK) {
        fprintf(stderr, "bench_overload: %s\n", errbuf);
        return 1;
    }
    if ((f = fopen(csv, "w")) == NULL) {
        perror(csv);
        return 1;
    }
    ov_write_csv(f, &o, rows, n);
    fclose(f);
    summary(&o, rows);
    free(rows);
    rpc_shutdown();
    return 0;
}
