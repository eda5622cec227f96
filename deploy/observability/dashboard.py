#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes deploy/observability/grafana/shopmicro.json, the Grafana dashboard of ShopMicro.

The first row is the alerts of alerts.yml (a Grafana "alertlist" panel, ALERTS_PANEL below); the
other panels are the table ROWS below: a title, a unit and one or more PromQL queries with their
legends. Everything else (ids, grid positions, the datasource input that Grafana asks for on
import) is derived, so the JSON is never edited by hand:

    deploy/observability/dashboard.py            # rewrite the JSON
    deploy/observability/dashboard.py --check    # exit 1 if the JSON is not what this writes

tests/deploy/check_observability.py runs --check and also checks every metric name in these
queries against what the real services export on /metrics.
"""

import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grafana", "shopmicro.json")
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
RATE = "[1m]"

# The alert list: Grafana reads the rules and their state from Prometheus's rules API (alerts.yml,
# loaded by prometheus.yml), for a Prometheus data source with "Manage alerts via Alerting UI" on
# (Grafana's default). Firing and pending instances, most important first; no data-source filter
# (the option takes a data source's name, which the import does not fill in).
ALERTS_ROW = "Alerts (deploy/observability/alerts.yml)"
ALERTS_PANEL = {
    "type": "alertlist", "title": "Firing and pending alerts",
    "options": {
        "viewMode": "list", "groupMode": "default", "groupBy": [], "maxItems": 50,
        "sortOrder": 3, "dashboardAlerts": False, "alertName": "", "alertInstanceLabelFilter": "",
        "datasource": None, "folder": None, "showInactiveAlerts": False,
        "stateFilter": {"firing": True, "pending": True, "recovering": True, "noData": False,
                        "normal": False, "error": True},
    },
}
ALERTS_HEIGHT = 8

# (row title, [(panel title, unit, [(expr, legend), ...]), ...])
ROWS = [
    ("Gateway (REST)", [
        ("Requests by route and status", "reqps", [
            ("sum by (route, code) (rate(gateway_http_requests_total" + RATE + "))",
             "{{route}} {{code}}")]),
        ("p99 latency by route", "s", [
            ("histogram_quantile(0.99, sum by (le, route) "
             "(rate(gateway_http_request_duration_seconds_bucket" + RATE + ")))", "{{route}}")]),
        ("In flight", "short", [("gateway_http_in_flight", "in flight")]),
        ("Stale answers (catalog down, reads from the cache)", "reqps", [
            ("sum by (route) (rate(gateway_stale_answers_total" + RATE + "))", "{{route}}")]),
    ]),
    ("Resilience: every upstream of every service", [
        ("Breaker state (1 = the state it is in)", "short", [
            ("max by (job, upstream, state) (shopmicro_resilience_breaker_state) == 1",
             "{{job}} -> {{upstream}}: {{state}}")]),
        ("Attempts per original call (retry amplification)", "short", [
            ("sum by (job, upstream) (rate(shopmicro_resilience_attempts_total" + RATE + ")) / "
             "sum by (job, upstream) (rate(shopmicro_resilience_calls_total" + RATE + "))",
             "{{job}} -> {{upstream}}")]),
        ("Rejections at admission by reason", "reqps", [
            ("sum by (job, upstream, reason) "
             "(rate(shopmicro_resilience_rejections_total" + RATE + "))",
             "{{job}} -> {{upstream}}: {{reason}}")]),
        ("Retries by cause, and retries denied", "reqps", [
            ("sum by (job, upstream, cause) (rate(shopmicro_resilience_retries_total" + RATE + "))",
             "{{job}} -> {{upstream}} retry: {{cause}}"),
            ("sum by (job, upstream, reason) "
             "(rate(shopmicro_resilience_retries_denied_total" + RATE + "))",
             "{{job}} -> {{upstream}} denied: {{reason}}")]),
        ("Retry budget remaining", "short", [
            ("shopmicro_resilience_retry_budget_remaining", "{{job}} -> {{upstream}}")]),
        ("Bulkhead: in flight and limit", "short", [
            ("shopmicro_resilience_in_flight", "{{job}} -> {{upstream}} in flight"),
            ("shopmicro_resilience_bulkhead_limit", "{{job}} -> {{upstream}} limit")]),
        ("p99 call duration (attempts and backoff)", "s", [
            ("histogram_quantile(0.99, sum by (le, job, upstream) "
             "(rate(shopmicro_resilience_call_duration_seconds_bucket" + RATE + ")))",
             "{{job}} -> {{upstream}}")]),
    ]),
    ("gRPC servers (catalog, order)", [
        ("Calls by method and code", "reqps", [
            ("sum by (job, grpc_method, grpc_code) (rate(grpc_server_handled_total" + RATE + "))",
             "{{job}} {{grpc_method}} {{grpc_code}}")]),
        ("p99 handling time by method", "s", [
            ("histogram_quantile(0.99, sum by (le, job, grpc_method) "
             "(rate(grpc_server_handling_seconds_bucket{grpc_type=\"unary\"}" + RATE + ")))",
             "{{job}} {{grpc_method}}")]),
        ("Calls on the workers", "short", [
            ("shopmicro_rpc_server_in_flight", "{{job}}")]),
    ]),
    ("PostgreSQL as the services see it", [
        ("Statements by outcome", "ops", [
            ("sum by (job, outcome) (rate(shopmicro_db_queries_total" + RATE + "))",
             "{{job}} {{outcome}}")]),
        ("p99 statement time", "s", [
            ("histogram_quantile(0.99, sum by (le, job, statement) "
             "(rate(shopmicro_db_query_seconds_bucket" + RATE + ")))", "{{job}} {{statement}}")]),
        ("Database reachable, connections open", "short", [
            ("shopmicro_db_up", "{{job}} up"),
            ("shopmicro_db_connections_open", "{{job}} connections")]),
    ]),
    ("Events: outbox relay, stock saga, notifications", [
        ("Relay: published and backlog", "short", [
            ("sum by (job) (rate(shopmicro_relay_published_total" + RATE + "))", "{{job}} published/s"),
            ("shopmicro_relay_backlog_rows", "{{job}} backlog rows")]),
        ("Relay: oldest unpublished row", "s", [
            ("shopmicro_relay_oldest_unpublished_age_seconds", "{{job}}")]),
        ("Notifications: jobs published, delivered, dead-lettered", "ops", [
            ("rate(shopmicro_notification_jobs_published_total" + RATE + ")", "published"),
            ("rate(shopmicro_notification_jobs_delivered_total" + RATE + ")", "delivered"),
            ("rate(shopmicro_notification_jobs_dead_lettered_total" + RATE + ")", "dead-lettered")]),
        ("Consumer lag (saga and notifications)", "short", [
            ("sum by (job) (shopmicro_catalog_saga_consumer_lag)", "catalog saga"),
            ("sum by (job) (shopmicro_order_saga_consumer_lag)", "order saga"),
            ("sum by (job) (shopmicro_notification_consumer_lag)", "notification")]),
    ]),
]


def panel(pid, title, unit, queries, x, y):
    return {
        "id": pid, "type": "timeseries", "title": title, "datasource": DS,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                    "tooltip": {"mode": "multi"}},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DS, "expr": e,
                     "legendFormat": legend} for i, (e, legend) in enumerate(queries)],
    }


def row(pid, title, y):
    return {"id": pid, "type": "row", "title": title, "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []}


def dashboard():
    panels = [row(1, ALERTS_ROW, 0),
              dict(ALERTS_PANEL, id=2, gridPos={"h": ALERTS_HEIGHT, "w": 24, "x": 0, "y": 1})]
    pid, y = 3, 1 + ALERTS_HEIGHT
    for row_title, row_panels in ROWS:
        panels.append(row(pid, row_title, y))
        pid, y = pid + 1, y + 1
        for i, (title, unit, queries) in enumerate(row_panels):
            panels.append(panel(pid, title, unit, queries, 12 * (i % 2), y + 8 * (i // 2)))
            pid += 1
        y += 8 * ((len(row_panels) + 1) // 2)
    return {
        "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource",
                      "pluginId": "prometheus", "pluginName": "Prometheus"}],
        "__requires": [{"type": "datasource", "id": "prometheus", "name": "Prometheus",
                        "version": "1.0.0"}],
        "uid": "shopmicro-overview", "title": "ShopMicro", "tags": ["shopmicro"],
        "timezone": "browser", "schemaVersion": 39, "version": 1, "editable": True,
        "refresh": "5s", "time": {"from": "now-15m", "to": "now"},
        "templating": {"list": []}, "annotations": {"list": []},
        "panels": panels,
    }


def render():
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


def main():
    text = render()
    if sys.argv[1:] == ["--check"]:
        try:
            with open(OUT, encoding="utf-8") as f:
                same = f.read() == text
        except OSError:
            same = False
        if not same:
            print("%s is not what dashboard.py writes: run deploy/observability/dashboard.py" % OUT)
            return 1
        print("ok: %s is up to date (%d panels)" % (OUT, len(dashboard()["panels"])))
        return 0
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s" % OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
