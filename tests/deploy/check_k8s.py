#!/usr/bin/env python3
"""tests/deploy/check_k8s.py: render deploy/k8s (kustomize) and check the objects strictly, without a cluster.

    check_k8s.py [--root DIR] [NAME=BINARY]...

1. Render: `kubectl kustomize deploy/k8s` with every kubectl in $KUBECTL (a list separated by ':'),
   or else the `kubectl` on PATH (Debian 12's kubernetes-client is kubectl 1.20 with kustomize
   v2.0.3; deploy/k8s is kept simple enough for it). No kubectl at all: exit 77 (ctest
   SKIP_RETURN_CODE), saying so loudly; that is the only reason this check skips. Every render gets
   every check below.
2. Schema: each object's kind and apiVersion are among the seven deploy/k8s uses, and every field,
   down to the probes and security contexts, is a field of that type in the Kubernetes 1.30 API
   (the property names, value kinds and required fields in SCHEMA below were taken from its
   api/openapi-spec/swagger.json); a typo such as `readinesProbe` or `initialDelaySecond` fails.
3. Rules, per Deployment: replicas >= 2; requests and limits of cpu and memory, requests <= limits;
   startup, liveness and readiness probes whose ports name a containerPort (the gRPC probe's port
   number is one), liveness on /healthz; runAsNonRoot with a non-root uid, no privilege escalation,
   ALL capabilities dropped, a read-only root filesystem (so the gateway's GATEWAY_LOCK_DIR is
   none); terminationGracePeriodSeconds above the service's drain plus its preStop pause; catalog's
   and order's startupProbe longer than *_DB_STARTUP_WAIT_MS; enableServiceLinks false (Kubernetes
   would otherwise add CATALOG_SERVICE_HOST, ORDER_PORT... beside our own variables); each *_LISTEN
   on 0.0.0.0 at the containerPort of that name, on the port docs/operations.md (and --help)
   gives as the default; one PodDisruptionBudget and one Service whose selectors match its pods
   (and no other Deployment's), PDB minAvailable below replicas, Service targetPorts that exist.
   One Ingress, whose only path is /v1/ (Prefix) to the gateway Service's http port: nothing else
   of the cluster (the gateway's admin port, /readyz, any other Service) is reachable through it.
4. Config: every ConfigMap and Secret a container references exists in the render, no variable is
   set twice, and (for each NAME=BINARY) every variable is one that `BINARY --help` documents.
   Every address in them (*_ADDR, *_KAFKA_BROKERS, NOTIFY_RABBITMQ_HOST/PORT, host= and port= of
   each *_DB_DSN) names a Service of the render with that port; for our own Services the port
   leads to the container listening there, and *_CATALOG_ADDR / *_ORDER_ADDR to that service's gRPC
   port. The relays' databases are order's and catalog's. The Secrets hold placeholders only.
5. Volumes: every volumeMount names a volume of its pod, every configMap volume a ConfigMap of the
   render or one of EXTERNAL_CONFIGMAPS (made at apply time, never part of the render). The
   gateway verifies tokens: GATEWAY_JWKS_FILE is a file of a read-only mount, without subPath (a
   subPath mount never sees a ConfigMap update, so the gateway's reload would not either), of the
   configMap volume gateway-jwks, not optional, whose items (if listed) give that file;
   GATEWAY_JWT_ISSUER and GATEWAY_JWT_AUDIENCE are set; the rate limits are not off.
6. The optional component components/shopper (kustomize 3.7+: a kubectl whose kustomize is older
   says so and skips it), rendered in a temporary overlay of the base: it changes no object of the
   base and adds only the shopper's Deployment, ConfigMap and Secret, in the namespace with the
   part-of label. Its Deployment: every field a Kubernetes 1.30 field, one replica (the rate is per
   pod), the same security context as the others, requests and limits, startup and liveness probes
   running its alive.py, LOCUST_HOST the gateway Service's API port, a gentle SHOPPER_RATE (at most
   5), the tokens a file of a read-only mount of the Secret shopper-tokens (no token in the
   ConfigMap), a placeholder there, and the statistics file in an emptyDir (the root filesystem is
   read-only); no Service or PodDisruptionBudget selects it.
An empty or unbuilt BINARY fails the check: every program is built before ctest runs.
This file has rules 1-5 and the run; k8s_lib.py the verdict counter, the schema walk and the
container hardening both use, k8s_shopper.py rule 6.
"""
import base64
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k8s_lib import PLACEHOLDER, check, check_hardened, failures, note, walk  # noqa: E402
from k8s_shopper import check_shopper, render_with_shopper  # noqa: E402

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
KNOWN_KINDS = {("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"),
               ("apps/v1", "Deployment"), ("policy/v1", "PodDisruptionBudget"),
               ("networking.k8s.io/v1", "Ingress")}
# The one path the Ingress may send in from outside, to the gateway's API port (docs/gateway.md,
# "Security": /metrics, /readyz's details and /debug/resilience are not for the world).
INGRESS_PATH = ("/v1/", "Prefix", "gateway", "http")
# Each service's drain (the variable and the default from docs/operations.md): SIGTERM lets that
# much work finish, so terminationGracePeriodSeconds must be longer.
DRAIN = {"catalog": ("CATALOG_DRAIN_MS", 10000), "order": ("ORDER_DRAIN_MS", 10000),
         "gateway": ("GATEWAY_DRAIN_MS", 10000), "relay": ("RELAY_DRAIN_MS", 10000),
         "notification": ("NOTIFY_JOB_DEADLINE_MS", 10000)}
STARTUP_WAIT = {"catalog": ("CATALOG_DB_STARTUP_WAIT_MS", 15000), "order": ("ORDER_DB_STARTUP_WAIT_MS", 15000)}
# The gRPC listen variable of the service an *_ADDR points at.
ADDR_TARGET = {"CATALOG_ADDR": ("catalog", "CATALOG_LISTEN"), "ORDER_ADDR": ("order", "ORDER_LISTEN")}
# The relays: RELAY_NAME -> the variable whose database's outbox it relays.
RELAY_DB = {"relay": "ORDER_DB_DSN", "relay-catalog": "CATALOG_DB_DSN"}
# ConfigMaps that pods mount but the kustomization must not make: created (and updated in place)
# at apply time, so that `kubectl apply -k` never replaces what is in them (README.md "Tokens").
EXTERNAL_CONFIGMAPS = {"gateway-jwks": "the token issuer's JWKS (README.md, \"Tokens\")"}
GRACE_MARGIN_S = 5

# ---- helpers ----
def host_port(addr):
    """(host, port) of "host:port" or of gRPC's "dns:///host:port"."""
    m = re.match(r"^(?:dns:///)?\[?([^\]]*)\]?:(\d+)$", addr.strip())
    return (m.group(1), int(m.group(2))) if m else (None, None)


def dsn_fields(dsn):
    return dict(re.findall(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", dsn))


def binary_help(bins):
    """NAME -> {VAR: default} from `BINARY --help` ("  NAME (default: VALUE[; range ...])")."""
    out = {}
    for name, path in bins:
        if not path or not os.access(path, os.X_OK):
            raise SystemExit(f"FAIL: {name}: {path or '(no path)'} is not built: its variable "
                             "names cannot be checked")
        text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=20).stdout
        vars_ = {}
        for m in re.finditer(r"^  ([A-Z][A-Z0-9_]*) \(default: (.*?)(?:; range [^)]*)?\)$", text, re.M):
            vars_[m.group(1)] = m.group(2)
        check(bool(vars_), f"{name}: '{path} --help' lists {len(vars_)} environment variables")
        out[name] = vars_
    return out


def doc_ports(root):
    """VAR -> default port, from the table "## Ports" of docs/operations.md."""
    text = open(os.path.join(root, "docs", "operations.md"), encoding="utf-8").read()
    sect = text.split("## Ports", 1)[1].split("\n## ", 1)[0]
    ports = {}
    for line in sect.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) != 3:
            continue
        m = re.match(r"^[\d.]+:(\d+)$", cols[1])
        v = re.match(r"^`([A-Z][A-Z0-9_]*)`", cols[2])
        if m and v and v.group(1) not in ports:  # the first row of a variable is its own default
            ports[v.group(1)] = int(m.group(1))
    return ports


def render(kubectl, kdir):
    ver = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True, timeout=30)
    vtext = " ".join((ver.stdout + ver.stderr).split())
    m = re.search(r'GitVersion:"([^"]+)"', vtext) or re.search(r"Client Version: (\S+)", vtext)
    version = m.group(1) if m else vtext[:80]
    m = re.search(r"Kustomize Version: (\S+)", vtext)
    if m:
        version += f" (kustomize {m.group(1)})"
    r = subprocess.run([kubectl, "kustomize", kdir], capture_output=True, text=True, timeout=120)
    return version, r.returncode, r.stdout, r.stderr


# ---- the checks of one render ----
def check_render(tag, docs, helps, dports):
    objs = {}
    for d in docs:
        if d is None:
            continue
        key = (d.get("kind"), (d.get("metadata") or {}).get("name"))
        check(key not in objs, f"{tag}: {key[0]}/{key[1]} is defined once")
        objs[key] = d
    by_kind = {}
    for (kind, name), d in objs.items():
        by_kind.setdefault(kind, {})[name] = d

    # Schema and metadata
    namespaces = list(by_kind.get("Namespace", {}))
    check(len(namespaces) == 1, f"{tag}: one Namespace ({', '.join(namespaces)})")
    ns = namespaces[0] if namespaces else None
    for (kind, name), d in sorted(objs.items()):
        av = d.get("apiVersion")
        if not check((av, kind) in KNOWN_KINDS, f"{tag}: {kind}/{name}: {av} {kind} is a known kind"):
            continue
        errors, unchecked = [], []
        walk(d, kind, f"{kind}/{name}", errors, unchecked)
        check(not errors, f"{tag}: {kind}/{name}: every field is a Kubernetes 1.30 field of its type"
              + ("" if not errors else ": " + "; ".join(errors)))
        for u in unchecked:
            note(f"{tag}: {u}: no schema here, not checked")
        meta = d.get("metadata") or {}
        if kind != "Namespace":
            check(meta.get("namespace") == ns, f"{tag}: {kind}/{name}: in namespace {ns}")
        check((meta.get("labels") or {}).get("app.kubernetes.io/part-of") == "shopmicro",
              f"{tag}: {kind}/{name}: label app.kubernetes.io/part-of=shopmicro")

    cms = {n: dict(d.get("data") or {}) for n, d in by_kind.get("ConfigMap", {}).items()}
    secrets = {}
    for n, d in by_kind.get("Secret", {}).items():
        vals = {}
        for k, v in (d.get("data") or {}).items():
            vals[k] = base64.b64decode("".join(str(v).split())).decode()
        vals.update(d.get("stringData") or {})
        secrets[n] = vals
    services = by_kind.get("Service", {})
    deploys = by_kind.get("Deployment", {})
    pdbs = by_kind.get("PodDisruptionBudget", {})

    def subset(sel, labels):
        return bool(sel) and all(labels.get(k) == v for k, v in sel.items())

    # Per Deployment: the pod and its container
    pods = {}  # deployment -> (labels, container, env, ports{name: number}, program)
    images = set()
    for dname, d in sorted(deploys.items()):
        spec = d.get("spec") or {}
        tmpl = spec.get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        pspec = tmpl.get("spec") or {}
        sel = (spec.get("selector") or {}).get("matchLabels") or {}
        check(subset(sel, labels) and not (spec.get("selector") or {}).get("matchExpressions"),
              f"{tag}: Deployment/{dname}: selector {sel} matches its pod labels")
        replicas = spec.get("replicas", 1)
        check(replicas >= 2, f"{tag}: Deployment/{dname}: {replicas} replicas (2 at least)")
        check(pspec.get("enableServiceLinks") is False, f"{tag}: Deployment/{dname}: enableServiceLinks: false")
        containers = pspec.get("containers") or []
        if not check(len(containers) == 1 and not pspec.get("initContainers"),
                     f"{tag}: Deployment/{dname}: one container"):
            continue
        c = containers[0]
        images.add(c.get("image"))
        cmd = (c.get("command") or []) + (c.get("args") or [])
        prog = os.path.basename(cmd[0]) if cmd else None
        check(prog in DRAIN and cmd[0] == f"/usr/local/bin/{prog}",
              f"{tag}: Deployment/{dname}: runs one of the image's services ({cmd[:1]})")
        check_hardened(tag, dname, pspec, c)
        # Environment: envFrom sources exist, no variable twice, names from --help
        env = {}
        sources = {}
        for ef in c.get("envFrom") or []:
            check(not ef.get("prefix"), f"{tag}: {dname}: envFrom without prefix")
            for kind, store in (("configMapRef", cms), ("secretRef", secrets)):
                ref = ef.get(kind)
                if ref is None:
                    continue
                rname = ref.get("name")
                if check(rname in store, f"{tag}: {dname}: {kind} {rname} exists in the render"):
                    check(ref.get("optional") is not True, f"{tag}: {dname}: {kind} {rname} is not optional")
                    for k, v in store[rname].items():
                        if k in env:
                            check(False, f"{tag}: {dname}: {k} is set twice (again in {rname})")
                        env[k] = v
                        sources[k] = ("secret" if kind == "secretRef" else "configmap", rname)
        for e in c.get("env") or []:
            k = e.get("name")
            if k in env:
                check(False, f"{tag}: {dname}: {k} is set twice (again in env)")
            env[k], sources[k] = e.get("value", ""), ("env", None)
            vf = e.get("valueFrom") or {}
            for kind, store in (("configMapKeyRef", cms), ("secretKeyRef", secrets)):
                ref = vf.get(kind)
                if ref is not None:
                    val = store.get(ref.get("name"), {}).get(ref.get("key"))
                    check(val is not None, f"{tag}: {dname}: {k} from {kind} {ref.get('name')}/{ref.get('key')}, which exists")
                    env[k] = val or ""
                    sources[k] = ("secret" if kind == "secretKeyRef" else "configmap", ref.get("name"))
        if prog in helps:
            unknown = sorted(k for k in env if k not in helps[prog])
            check(not unknown, f"{tag}: {dname}: every variable is documented by '{prog} --help'"
                  + (f" (unknown: {', '.join(unknown)})" if unknown else f" ({len(env)} set)"))
        defaults = helps.get(prog, {})

        def setting(var, doc_default):
            if var in env:
                return env[var]
            return defaults.get(var, str(doc_default))

        # Ports and listen addresses
        cports = {}
        for p in c.get("ports") or []:
            check(p.get("protocol", "TCP") == "TCP", f"{tag}: {dname}: port {p.get('name')} is TCP")
            check(bool(p.get("name")), f"{tag}: {dname}: containerPort {p.get('containerPort')} is named")
            cports[p.get("name")] = p.get("containerPort")
        listened = set()
        listen_vars = sorted(v for v in set(env) | set(defaults) if v.endswith("_LISTEN"))
        for var in listen_vars:
            val = setting(var, "")
            if val in ("none", "0", ""):
                continue
            host, port = host_port(val)
            check(host in ("0.0.0.0", "::"), f"{tag}: {dname}: {var}={val} listens on every address, not loopback")
            check(port in cports.values(), f"{tag}: {dname}: {var}'s port {port} is a containerPort ({cports})")
            if var in dports:
                check(port == dports[var], f"{tag}: {dname}: {var}'s port {port} is docs/operations.md's default {dports[var]}")
            if var in defaults:
                check(port == host_port(defaults[var])[1], f"{tag}: {dname}: {var}'s port {port} is '{prog} --help''s default ({defaults[var]})")
            listened.add(port)
        for n, p in cports.items():
            check(p in listened, f"{tag}: {dname}: containerPort {n}={p} is a port the service listens on")
        # Volumes: mounts name volumes; configMap volumes name ConfigMaps of the render or external ones
        vols = {v.get("name"): v for v in pspec.get("volumes") or []}
        for m in c.get("volumeMounts") or []:
            check(m.get("name") in vols, f"{tag}: {dname}: volumeMount {m.get('name')} names a volume of the pod")
        for vname, v in sorted(vols.items()):
            cmv = v.get("configMap")
            if cmv is not None:
                cname = cmv.get("name")
                if cname in EXTERNAL_CONFIGMAPS:
                    check(cname not in cms, f"{tag}: {dname}: volume {vname}: ConfigMap {cname} is made at apply time "
                          f"({EXTERNAL_CONFIGMAPS[cname]}), not by the kustomization")
                else:
                    check(cname in cms, f"{tag}: {dname}: volume {vname}: ConfigMap {cname} exists in the render")
            check(any(m.get("name") == vname for m in c.get("volumeMounts") or []),
                  f"{tag}: {dname}: volume {vname} is mounted")
        if prog == "gateway":
            check(setting("GATEWAY_LOCK_DIR", "/tmp") == "none" or any(
                m.get("mountPath") == setting("GATEWAY_LOCK_DIR", "/tmp") for m in c.get("volumeMounts") or []),
                f"{tag}: {dname}: GATEWAY_LOCK_DIR is none or a mounted volume (the root filesystem is read-only)")
            jwks = setting("GATEWAY_JWKS_FILE", "")
            mount = max((m for m in c.get("volumeMounts") or []
                         if jwks.startswith(m.get("mountPath", "").rstrip("/") + "/")),
                        key=lambda m: len(m.get("mountPath", "")), default=None)
            check(mount is not None and mount.get("readOnly") is True and not mount.get("subPath")
                  and not mount.get("subPathExpr"),
                  f"{tag}: {dname}: GATEWAY_JWKS_FILE={jwks or '(unset)'} is in a read-only mount without subPath"
                  f" ({mount and mount.get('mountPath')})")
            cmv = (vols.get((mount or {}).get("name")) or {}).get("configMap") or {}
            rel = jwks[len((mount or {}).get("mountPath", "").rstrip("/")) + 1:] if mount else ""
            items = cmv.get("items")
            check(cmv.get("name") == "gateway-jwks" and cmv.get("optional") is not True
                  and (items is None or any(i.get("path") == rel for i in items)),
                  f"{tag}: {dname}: that mount is the ConfigMap gateway-jwks, not optional, holding {rel or '?'}"
                  f" ({cmv.get('name')}, items {[i.get('path') for i in items or []] or 'all'})")
            check(bool(setting("GATEWAY_JWT_ISSUER", "")) and bool(setting("GATEWAY_JWT_AUDIENCE", "")),
                  f"{tag}: {dname}: GATEWAY_JWT_ISSUER ({setting('GATEWAY_JWT_ISSUER', '') or 'unset'}) and "
                  f"GATEWAY_JWT_AUDIENCE ({setting('GATEWAY_JWT_AUDIENCE', '') or 'unset'}) are set")
            check(setting("GATEWAY_RATE_LIMITS", "").strip() != "off",
                  f"{tag}: {dname}: rate limits on ({setting('GATEWAY_RATE_LIMITS', '')})")
        # Probes
        def probe_port(pr):
            for h in ("httpGet", "tcpSocket"):
                if h in pr:
                    p = pr[h].get("port")
                    return h, p, (cports.get(p) if isinstance(p, str) else p if p in cports.values() else None)
            if "grpc" in pr:
                p = pr["grpc"].get("port")
                return "grpc", p, p if p in cports.values() else None
            return None, None, None
        for pname in ("startupProbe", "livenessProbe", "readinessProbe"):
            pr = c.get(pname)
            if not check(isinstance(pr, dict), f"{tag}: {dname}: has a {pname}"):
                continue
            h, p, num = probe_port(pr)
            check(h is not None and num is not None, f"{tag}: {dname}: {pname} {h} port {p} names a containerPort")
            if h == "httpGet":
                check(pr["httpGet"].get("path") in ("/healthz", "/readyz"),
                      f"{tag}: {dname}: {pname} asks {pr['httpGet'].get('path')} (/healthz or /readyz)")
            if h == "grpc":
                gvar = {"catalog": "CATALOG_LISTEN", "order": "ORDER_LISTEN"}.get(prog)
                check(gvar is not None and num == host_port(setting(gvar, ""))[1],
                      f"{tag}: {dname}: {pname} asks grpc.health.v1 on the gRPC port")
        lp = c.get("livenessProbe") or {}
        check((lp.get("httpGet") or {}).get("path") == "/healthz",
              f"{tag}: {dname}: liveness is /healthz (never a dependency: an outage must not restart every pod)")
        pause = 0
        pre = ((c.get("lifecycle") or {}).get("preStop") or {})
        if "sleep" in pre:
            pause = pre["sleep"].get("seconds", 0)
        elif "exec" in pre:
            ecmd = pre["exec"].get("command") or []
            if len(ecmd) == 2 and ecmd[0] in ("sleep", "/bin/sleep") and ecmd[1].isdigit():
                pause = int(ecmd[1])
            else:
                check(False, f"{tag}: {dname}: preStop is a plain sleep ({ecmd})")
        if prog in DRAIN:
            var, dflt = DRAIN[prog]
            drain_s = int(setting(var, dflt)) / 1000
            grace = pspec.get("terminationGracePeriodSeconds", 30)
            check(grace >= drain_s + pause + GRACE_MARGIN_S,
                  f"{tag}: {dname}: terminationGracePeriodSeconds {grace} >= {var} {drain_s:g} s + preStop {pause} s + {GRACE_MARGIN_S} s")
        sp = c.get("startupProbe") or {}
        if prog in STARTUP_WAIT:
            var, dflt = STARTUP_WAIT[prog]
            budget = sp.get("initialDelaySeconds", 0) + sp.get("periodSeconds", 10) * sp.get("failureThreshold", 3)
            wait = int(setting(var, dflt)) / 1000
            check(budget > wait + 10, f"{tag}: {dname}: startupProbe allows {budget} s > {var} {wait:g} s + 10 s of migrations")
        ann = (tmpl.get("metadata") or {}).get("annotations") or {}
        if "prometheus.io/port" in ann:
            check(int(ann["prometheus.io/port"]) in cports.values(), f"{tag}: {dname}: prometheus.io/port is a containerPort")
        for t in pspec.get("topologySpreadConstraints") or []:
            check(subset((t.get("labelSelector") or {}).get("matchLabels") or {}, labels),
                  f"{tag}: {dname}: topologySpreadConstraint selects its own pods")
        pods[dname] = (labels, c, env, sources, cports, prog, replicas)
    check(len(images) == 1, f"{tag}: every Deployment runs one image ({', '.join(sorted(map(str, images)))})")

    # Services
    def selected(sel):
        return [dn for dn, p in pods.items() if subset(sel, p[0])]
    own_svc = {}  # service -> deployment
    for sname, s in sorted(services.items()):
        spec = s.get("spec") or {}
        ports = spec.get("ports") or []
        check(bool(ports), f"{tag}: Service/{sname}: has ports")
        if spec.get("type") == "ExternalName":
            # kustomize's commonLabels adds app.kubernetes.io/part-of to every Service's selector;
            # an ExternalName Service gets no endpoints whatever its selector (Kubernetes 1.23+,
            # kubernetes#105986), so that one label is allowed, nothing else.
            sel = spec.get("selector") or {}
            check(bool(re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", spec.get("externalName") or ""))
                  and set(sel) <= {"app.kubernetes.io/part-of"},
                  f"{tag}: Service/{sname}: ExternalName {spec.get('externalName')}, no selector but kustomize's part-of ({sel})")
            continue
        sel = spec.get("selector") or {}
        match = selected(sel)
        if not check(len(match) == 1, f"{tag}: Service/{sname}: selector {sel} matches the pods of one Deployment ({match})"):
            continue
        own_svc[sname] = match[0]
        cports = pods[match[0]][4]
        for p in ports:
            tp = p.get("targetPort", p.get("port"))
            num = cports.get(tp) if isinstance(tp, str) else tp if tp in cports.values() else None
            check(num is not None, f"{tag}: Service/{sname}: port {p.get('name')} targetPort {tp} is a containerPort of {match[0]}")
            check(num == p.get("port"), f"{tag}: Service/{sname}: port {p.get('port')} is the container's port ({num})")
    for dn in pods:
        check(dn in own_svc.values(), f"{tag}: Deployment/{dn}: a Service selects it")

    # PodDisruptionBudgets
    covered = {}
    for pname, p in sorted(pdbs.items()):
        spec = p.get("spec") or {}
        sel = (spec.get("selector") or {}).get("matchLabels") or {}
        match = selected(sel)
        if not check(len(match) == 1, f"{tag}: PodDisruptionBudget/{pname}: selector {sel} matches the pods of one Deployment ({match})"):
            continue
        covered.setdefault(match[0], []).append(pname)
        ma = spec.get("minAvailable")
        replicas = pods[match[0]][6]
        check(isinstance(ma, int) and 1 <= ma < replicas and "maxUnavailable" not in spec,
              f"{tag}: PodDisruptionBudget/{pname}: minAvailable {ma} (at least 1, below the {replicas} replicas)")
    for dn in pods:
        check(len(covered.get(dn, [])) == 1, f"{tag}: Deployment/{dn}: one PodDisruptionBudget ({covered.get(dn)})")

    # Addresses in the configuration
    def service_of(host):
        parts = host.split(".")
        if len(parts) == 1 or (parts[1] == ns and (len(parts) == 2 or parts[2:] in (["svc"], ["svc", "cluster", "local"]))):
            return parts[0] if parts[0] in services else None
        return None

    def check_addr(dname, var, host, port, want=None):
        sname = service_of(host or "")
        if not check(sname is not None, f"{tag}: {dname}: {var} names a Service of the render ({host})"):
            return
        sports = [p.get("port") for p in (services[sname].get("spec") or {}).get("ports") or []]
        check(port in sports, f"{tag}: {dname}: {var}: port {port} is a port of Service/{sname} ({sports})")
        if want is not None:
            prog_want, listen_var = want
            target = own_svc.get(sname)
            tp = pods.get(target)
            ok = tp is not None and tp[5] == prog_want
            if ok:
                lv = tp[2].get(listen_var)
                ok = lv is not None and host_port(lv)[1] == port
            check(ok, f"{tag}: {dname}: {var} leads to {prog_want}'s {listen_var} (Service/{sname} -> Deployment/{target})")
        elif sname in own_svc:
            check(False, f"{tag}: {dname}: {var} points at our own Service/{sname}: not expected")
    dsns = {}
    for dname, (labels, c, env, sources, cports, prog, _) in sorted(pods.items()):
        for var, val in sorted(env.items()):
            suffix = next((s for s in ADDR_TARGET if var.endswith("_" + s)), None)
            if suffix:
                h, p = host_port(val)
                check_addr(dname, var, h, p, ADDR_TARGET[suffix])
                # round robin needs every pod's address: dns:/// over a headless Service
                spec = (services.get(service_of(h or "") or "", {}).get("spec") or {})
                check(val.startswith("dns:///") and spec.get("clusterIP") == "None",
                      f"{tag}: {dname}: {var} is dns:/// over a headless Service ({val})")
            elif var.endswith("_KAFKA_BROKERS") and val != "none":
                for b in val.split(","):
                    h, p = host_port(b)
                    check_addr(dname, var, h, p)
            elif var.endswith("_DB_DSN"):
                check(sources.get(var, ("",))[0] == "secret", f"{tag}: {dname}: {var} comes from a Secret (it carries the password)")
                f = dsn_fields(val)
                check_addr(dname, var, f.get("host"), int(f.get("port", "5432")))
                check(f.get("password") == PLACEHOLDER, f"{tag}: {dname}: {var}'s password is the placeholder {PLACEHOLDER}")
                key = env.get("RELAY_NAME", "relay") if prog == "relay" else var
                dsns[key] = f.get("dbname")
            elif var == "NOTIFY_RABBITMQ_HOST":
                check_addr(dname, var, val, int(env.get("NOTIFY_RABBITMQ_PORT", "25772")))
            elif var == "NOTIFY_RABBITMQ_PASSWORD":
                check(sources.get(var, ("",))[0] == "secret" and val == PLACEHOLDER,
                      f"{tag}: {dname}: {var} comes from a Secret and is the placeholder {PLACEHOLDER}")
            elif var == "NOTIFY_WEBHOOK_SECRET":
                # The placeholder must not be a usable key (the service refuses it): not base64,
                # or fewer than 24 bytes.
                try:
                    raw = base64.b64decode(val[len("whsec_"):], validate=True)
                except ValueError:
                    raw = b""
                check(sources.get(var, ("",))[0] == "secret" and val == "whsec_" + PLACEHOLDER and len(raw) < 24,
                      f"{tag}: {dname}: {var} comes from a Secret and is the placeholder whsec_{PLACEHOLDER}, which is no valid key")
    for relay_name, var in sorted(RELAY_DB.items()):
        check(relay_name in dsns and dsns.get(relay_name) == dsns.get(var),
              f"{tag}: the relay named {relay_name} relays the database of {var} ({dsns.get(relay_name)} = {dsns.get(var)})")
    check_ingress(tag, by_kind.get("Ingress", {}), services)


def check_ingress(tag, ingresses, services):
    """One Ingress, whose only path is INGRESS_PATH, to a Service port that exists."""
    want_path, want_type, want_svc, want_port = INGRESS_PATH
    check(len(ingresses) == 1, f"{tag}: one Ingress ({', '.join(sorted(ingresses))})")
    for name, ing in sorted(ingresses.items()):
        spec = ing.get("spec") or {}
        check("defaultBackend" not in spec, f"{tag}: Ingress/{name}: no defaultBackend (nothing but {want_path})")
        paths = [p for r in spec.get("rules") or [] for p in ((r.get("http") or {}).get("paths") or [])]
        got = [(p.get("path"), p.get("pathType"), ((p.get("backend") or {}).get("service") or {}).get("name"),
                (((p.get("backend") or {}).get("service") or {}).get("port") or {}).get("name"))
               for p in paths]
        check(got == [INGRESS_PATH], f"{tag}: Ingress/{name}: only {want_path} ({want_type}) to "
              f"{want_svc}:{want_port} ({got})")
        ports = [p.get("name") for p in ((services.get(want_svc) or {}).get("spec") or {}).get("ports") or []]
        check(want_port in ports, f"{tag}: Ingress/{name}: Service {want_svc} has the port {want_port} ({ports})")


def main(argv):
    root = ROOT
    if argv[:1] == ["--root"]:
        root = os.path.realpath(argv[1])
        argv = argv[2:]
    kdir = os.path.join(root, "deploy", "k8s")
    bins = [tuple(a.split("=", 1)) for a in argv]
    tools = [t for t in os.environ.get("KUBECTL", "").split(os.pathsep) if t]
    if not tools and shutil.which("kubectl"):
        tools = [shutil.which("kubectl")]
    if not tools:
        print("SKIPPED: no kubectl: install Debian's kubernetes-client (kubectl 1.20), or set KUBECTL.")
        print("         deploy/k8s was NOT rendered and NOTHING in it was validated.")
        return 77
    try:
        import yaml  # python3-yaml
    except ImportError:
        print("FAIL: python3-yaml is not installed (Debian package python3-yaml): nothing was checked")
        return 1
    helps = binary_help(bins)
    dports = doc_ports(root)
    check(len(dports) >= 7, f"docs/operations.md's Ports table gives {len(dports)} listen defaults")
    for kubectl in tools:
        version, rc, out, err = render(kubectl, kdir)
        tag = f"kubectl {version}"
        for line in err.strip().splitlines():
            note(f"{tag}: kustomize says: {line}")
        if not check(rc == 0, f"{tag}: kubectl kustomize deploy/k8s ({kubectl})"):
            print(err)
            continue
        docs = list(yaml.safe_load_all(out))
        check(len(docs) > 0, f"{tag}: the render has {len(docs)} objects")
        check_render(tag, docs, helps, dports)
        m = re.search(r"kustomize v?(\d+)\.(\d+)", version)
        if m and (int(m.group(1)), int(m.group(2))) < (3, 7):
            note(f"{tag}: components need kustomize 3.7 or later: components/shopper not rendered with this kubectl")
            continue
        rc, out, err = render_with_shopper(kubectl, kdir)
        if not check(rc == 0, f"{tag}: kubectl kustomize of an overlay with components/shopper"):
            print(err)
            continue
        check_shopper(tag, docs, list(yaml.safe_load_all(out)))
    if failures():
        print(f"deploy/k8s: {failures()} check(s) FAILED")
        return 1
    print("deploy/k8s: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
