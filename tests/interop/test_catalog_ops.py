#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Interop test: the catalog's operational surface through official clients.

grpcio (Debian python3-grpcio 1.51) with stubs generated at test time from
proto/grpc/health/v1/health.proto and proto/grpc/reflection/v1alpha/reflection.proto
(the standard protocols, as grpc_health_probe and grpcurl speak them) against the
real catalog binary on a fresh database (the fixture of test_catalog_interop.py):

  * grpc.health.v1.Health/Check for "", for the served service and for an
    unknown name (NOT_FOUND);
  * Watch: SERVING at once; the database made unreachable (connections refused
    for the catalog's database, the probe's session terminated) -> NOT_SERVING,
    reachable again -> SERVING, on the same stream; an unknown name ->
    SERVICE_UNKNOWN; SIGTERM -> NOT_SERVING, then the stream ends UNAVAILABLE and
    the process exits 0;
  * server reflection: list_services, file_containing_symbol (service, method,
    message, nested enum), file_by_filename, errors for unknown names, several
    questions on one stream; then a GetProduct call built only from what
    reflection returned (as grpcurl does it);
  * tools/healthcheck, the compose healthchecks' probe, against the same catalog
    (HEALTHCHECK_BIN, set by ctest);
  * the admin port: /metrics has the grpc_server_* series with the calls made,
    /readyz names its checks.

Usage (CTest passes both options, see tests/interop/CMakeLists.txt):
  test_catalog_ops.py --catalog BUILD/services/catalog/catalog --proto-dir proto
"""

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_catalog_interop as base  # noqa: E402  pylint: disable=wrong-import-position

from google.protobuf import descriptor_pb2, descriptor_pool  # noqa: E402
from google.protobuf import message_factory  # noqa: E402

G = None
HEALTH = "grpc/health/v1/health.proto"
REFLECTION = "grpc/reflection/v1alpha/reflection.proto"
CATALOG_SERVICE = "shopmicro.catalog.v1.CatalogService"
HEALTHCHECK = os.environ.get("HEALTHCHECK_BIN")  # tools/healthcheck, from ctest


def scaled(s):
    return base.scaled(s)


def generate_protocol_stubs(fx):
    """Stubs of the health and reflection protocols. Their .proto files live under
    grpc/..., which would make Python modules grpc.health..., hidden by the grpc
    package itself; copied under opsproto/ the modules are opsproto.health_pb2 and
    opsproto.reflection_pb2 (the wire names come from the proto package, unchanged)."""
    src = os.path.join(fx.tmp, "opsproto-src")
    out = os.path.join(fx.tmp, "opsproto-gen")
    os.makedirs(os.path.join(src, "opsproto"))
    os.mkdir(out)
    for p in (HEALTH, REFLECTION):
        shutil.copy(os.path.join(base.ARGS.proto_dir, p), os.path.join(src, "opsproto"))
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", src, "--python_out=" + out,
           "--grpc_python_out=" + out, "opsproto/health.proto", "opsproto/reflection.proto"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError("grpc_tools.protoc failed (%d): %s" % (r.returncode, r.stderr))
    sys.path.insert(0, out)


def setUpModule():  # noqa: N802
    global G  # pylint: disable=global-statement
    G = base.start_fixture({"CATALOG_KAFKA_BROKERS": "none"}, prepare=generate_protocol_stubs)
    # pylint: disable=import-outside-toplevel,import-error
    from opsproto import health_pb2, health_pb2_grpc
    from opsproto import reflection_pb2, reflection_pb2_grpc
    G.hpb, G.hstub = health_pb2, health_pb2_grpc.HealthStub(G.channel)
    G.rpb, G.rstub = reflection_pb2, reflection_pb2_grpc.ServerReflectionStub(G.channel)


def tearDownModule():  # noqa: N802
    if G is not None:
        G.close()


def admin_get(path):
    """(status, body) of GET path on the catalog's admin port."""
    url = "http://127.0.0.1:%d%s" % (G.admin_port, path)
    try:
        with urllib.request.urlopen(url, timeout=scaled(5)) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Watcher:
    """A Watch stream read on a thread of its own; statuses go to a queue."""

    def __init__(self, service=""):
        self.q = queue.Queue()
        self.call = G.hstub.Watch(G.hpb.HealthCheckRequest(service=service),
                                  timeout=scaled(60))
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        try:
            for m in self.call:
                self.q.put(m.status)
            self.q.put(("end", grpc.StatusCode.OK))
        except grpc.RpcError as e:
            self.q.put(("end", e.code()))

    def next(self, timeout=10.0):
        return self.q.get(timeout=scaled(timeout))

    def cancel(self):
        self.call.cancel()
        self.thread.join(scaled(5))


class Health(unittest.TestCase):
    def check(self, service):
        return G.hstub.Check(G.hpb.HealthCheckRequest(service=service),
                             timeout=scaled(5)).status

    def test_check_server_and_service(self):
        serving = G.hpb.HealthCheckResponse.SERVING
        self.assertEqual(self.check(""), serving)
        self.assertEqual(self.check(CATALOG_SERVICE), serving)
        self.assertEqual(self.check("grpc.health.v1.Health"), serving)

    def test_check_unknown_service_is_not_found(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.check("no.such.Service")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("no.such.Service", cm.exception.details())

    def test_watch_unknown_service(self):
        w = Watcher("no.such.Service")
        try:
            self.assertEqual(w.next(), G.hpb.HealthCheckResponse.SERVICE_UNKNOWN)
        finally:
            w.cancel()

    def wait_serving(self):
        """After the database is back: until Check says SERVING again (the probe's
        answer is reused for 0.5 s, the server's for up to 1 s), at most 10 s."""
        deadline = time.monotonic() + scaled(10)
        while self.check("") != G.hpb.HealthCheckResponse.SERVING:
            self.assertLess(time.monotonic(), deadline, "still NOT_SERVING 10 s after recovery")
            time.sleep(0.1)

    def set_db_reachable(self, reachable):
        G.psql('ALTER DATABASE "%s" ALLOW_CONNECTIONS %s' % (G.db, "true" if reachable else "false"))
        if not reachable:  # the probe's open session too (the workers' may stay)
            G.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                   "WHERE datname = '%s' AND application_name = 'catalog'" % G.db)

    def test_watch_follows_the_database(self):
        hpb = G.hpb.HealthCheckResponse
        w = Watcher("")
        try:
            self.assertEqual(w.next(), hpb.SERVING)
            self.set_db_reachable(False)
            self.assertEqual(w.next(timeout=10), hpb.NOT_SERVING)
            self.assertRegex(G.wait_log(r"health: SERVING -> NOT_SERVING: database") or "",
                             r"health_to=NOT_SERVING")
            status, body = admin_get("/readyz")
            self.assertEqual(status, 503, body)
            self.assertIn('"name":"database","ok":false', body)
            self.set_db_reachable(True)
            self.assertEqual(w.next(timeout=10), hpb.SERVING)
        finally:
            self.set_db_reachable(True)
            w.cancel()
        self.wait_serving()
        status, body = admin_get("/readyz")
        self.assertEqual(status, 200, body)

    def probe(self, *args):
        """tools/healthcheck (the compose healthchecks' probe): (exit status, its line)."""
        r = subprocess.run([HEALTHCHECK, "--timeout-ms", "2000"] + list(args),
                           capture_output=True, text=True, timeout=scaled(10), check=False)
        return r.returncode, r.stdout.strip()

    @unittest.skipUnless(HEALTHCHECK, "HEALTHCHECK_BIN not set (ctest sets it)")
    def test_healthcheck_probe(self):
        grpc_addr, admin = "127.0.0.1:%d" % G.port, "127.0.0.1:%d" % G.admin_port
        self.assertEqual(self.probe("grpc", grpc_addr), (0, "SERVING"))
        self.assertEqual(self.probe("grpc", grpc_addr, CATALOG_SERVICE), (0, "SERVING"))
        self.assertEqual(self.probe("grpc", grpc_addr, "no.such.Service")[0], 1)
        self.assertEqual(self.probe("http", admin, "/readyz"), (0, "HTTP/1.1 200 OK"))
        self.assertEqual(self.probe("http", admin, "/nope")[0], 1)
        self.assertEqual(self.probe("grpc", "127.0.0.1:1")[0], 1)
        self.assertEqual(self.probe("bogus")[0], 2)
        try:
            self.set_db_reachable(False)
            deadline = time.monotonic() + scaled(10)
            while self.probe("grpc", grpc_addr)[0] == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertEqual(self.probe("grpc", grpc_addr), (1, "NOT_SERVING"))
            self.assertEqual(self.probe("http", admin, "/readyz")[0], 1)
        finally:
            self.set_db_reachable(True)
        self.wait_serving()
        self.assertEqual(self.probe("grpc", grpc_addr), (0, "SERVING"))


class Reflection(unittest.TestCase):
    def ask(self, *requests):
        """The responses to requests, all on one stream."""
        return list(G.rstub.ServerReflectionInfo(iter(requests), timeout=scaled(10)))

    def files(self, resp):
        self.assertEqual(resp.WhichOneof("message_response"), "file_descriptor_response", resp)
        out = []
        for raw in resp.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto()
            fd.ParseFromString(raw)
            out.append(fd)
        return out

    def test_list_services(self):
        (resp,) = self.ask(G.rpb.ServerReflectionRequest(list_services=""))
        names = sorted(s.name for s in resp.list_services_response.service)
        self.assertEqual(names, sorted([CATALOG_SERVICE, "grpc.health.v1.Health",
                                        "grpc.reflection.v1alpha.ServerReflection"]))

    def test_file_containing_symbol(self):
        rpb = G.rpb.ServerReflectionRequest
        answers = self.ask(rpb(file_containing_symbol=CATALOG_SERVICE),
                           rpb(file_containing_symbol=CATALOG_SERVICE + ".GetProduct"),
                           rpb(file_containing_symbol="shopmicro.catalog.v1.Product"),
                           rpb(file_containing_symbol="grpc.health.v1.HealthCheckResponse"
                                                      ".ServingStatus"),
                           rpb(file_by_filename="shopmicro/catalog/v1/catalog.proto"))
        self.assertEqual(len(answers), 5)
        for i in (0, 1, 2, 4):
            (fd,) = self.files(answers[i])
            self.assertEqual(fd.name, "shopmicro/catalog/v1/catalog.proto")
            self.assertEqual(fd.package, "shopmicro.catalog.v1")
            self.assertEqual([m.name for m in fd.service[0].method],
                             ["CreateProduct", "GetProduct", "ListProducts", "BatchGetProducts"])
        (hfd,) = self.files(answers[3])
        self.assertEqual(hfd.name, HEALTH)
        self.assertEqual(answers[0].original_request.file_containing_symbol, CATALOG_SERVICE)

    def test_unknown_names_are_not_found(self):
        rpb = G.rpb.ServerReflectionRequest
        for req in (rpb(file_containing_symbol="shopmicro.catalog.v1.Nope"),
                    rpb(file_by_filename="nope.proto"),
                    rpb(file_containing_symbol="shopmicro.catalog"),
                    rpb(all_extension_numbers_of_type="shopmicro.catalog.v1.Product")):
            (resp,) = self.ask(req)
            self.assertEqual(resp.WhichOneof("message_response"), "error_response", req)
            self.assertEqual(resp.error_response.error_code, grpc.StatusCode.NOT_FOUND.value[0])

    def test_call_built_from_reflection_alone(self):
        """What grpcurl does: no .proto at hand, only the server's descriptors."""
        created = G.stub.CreateProduct(G.pb.CreateProductRequest(
            name="Reflected mug", description="d", price_cents=450, stock=3), timeout=scaled(5))
        (resp,) = self.ask(G.rpb.ServerReflectionRequest(file_containing_symbol=CATALOG_SERVICE))
        pool = descriptor_pool.DescriptorPool()
        for fd in self.files(resp):
            pool.Add(fd)
        method = pool.FindServiceByName(CATALOG_SERVICE).FindMethodByName("GetProduct")
        # protobuf 3.21 (Debian 12) has MessageFactory.GetPrototype; 4.x GetMessageClass
        get_class = getattr(message_factory, "GetMessageClass", None) or \
            message_factory.MessageFactory(pool).GetPrototype
        req_cls, resp_cls = get_class(method.input_type), get_class(method.output_type)
        call = G.channel.unary_unary("/%s/GetProduct" % CATALOG_SERVICE,
                                     request_serializer=req_cls.SerializeToString,
                                     response_deserializer=resp_cls.FromString)
        got = call(req_cls(id=created.id), timeout=scaled(5))
        self.assertEqual(got.DESCRIPTOR.full_name, "shopmicro.catalog.v1.Product")
        self.assertEqual(got.name, "Reflected mug")
        self.assertEqual(got.price_cents, 450)


class Metrics(unittest.TestCase):
    def test_metrics_count_calls_by_method_and_code(self):
        for _ in range(3):
            with self.assertRaises(grpc.RpcError):
                G.stub.GetProduct(G.pb.GetProductRequest(id="00000000-0000-0000-0000-000000000000"),
                                  timeout=scaled(5))
        labels = 'grpc_type="unary",grpc_service="%s",grpc_method="GetProduct"' % CATALOG_SERVICE
        series = 'grpc_server_handled_total{%s,grpc_code="NotFound"}' % labels
        # A call is counted when it is completely over on the server, which can be just after
        # the client has its answer (as the access line): wait for the third, at most 5 s.
        deadline = time.monotonic() + scaled(5)
        while True:
            status, body = admin_get("/metrics")
            self.assertEqual(status, 200)
            line = [ln for ln in body.splitlines() if ln.startswith(series)]
            self.assertEqual(len(line), 1, body[:2000])
            if int(line[0].split()[-1]) >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(int(line[0].split()[-1]), 3)
        self.assertIn('grpc_server_handling_seconds_bucket{%s,le="+Inf"}' % labels, body)
        self.assertIn("shopmicro_db_up 1", body)
        self.assertRegex(body, r'shopmicro_db_connections_open [1-9]')

    def test_metrics_count_database_statements(self):
        def created():
            _, body = admin_get("/metrics")
            for ln in body.splitlines():
                if ln.startswith('shopmicro_db_queries_total{statement="cat_create",outcome="OK"}'):
                    return int(ln.split()[-1])
            self.fail("no cat_create OK series:\n" + body[:3000])
        before = created()
        G.stub.CreateProduct(G.pb.CreateProductRequest(name="Counted", price_cents=1, stock=1),
                             timeout=scaled(5))
        self.assertEqual(created(), before + 1)
        _, body = admin_get("/metrics")
        self.assertIn('shopmicro_db_query_seconds_bucket{statement="cat_create",le="+Inf"}', body)
        self.assertRegex(body, r'grpc_server_started_total\{grpc_type="unary",'
                               r'grpc_service="grpc.health.v1.Health",grpc_method="Check"\} \d+')

    def test_readyz_names_its_checks(self):
        status, body = admin_get("/readyz")
        self.assertEqual(status, 200, body)
        self.assertIn('"name":"database","ok":true', body)
        self.assertIn('"name":"saga_consumer","ok":true', body)


class Shutdown(unittest.TestCase):
    """Last (see load_tests): SIGTERM with a watch open."""

    def test_sigterm_ends_watch_with_not_serving(self):
        hpb = G.hpb.HealthCheckResponse
        w = Watcher("")
        self.assertEqual(w.next(), hpb.SERVING)
        t0 = time.monotonic()
        G.proc.send_signal(15)
        self.assertEqual(w.next(timeout=10), hpb.NOT_SERVING)
        self.assertEqual(w.next(timeout=10), ("end", grpc.StatusCode.UNAVAILABLE))
        self.assertEqual(G.proc.wait(timeout=scaled(15)), 0, G.log()[-2000:])
        self.assertLess(time.monotonic() - t0, scaled(10))


def load_tests(loader, tests, pattern):  # pylint: disable=unused-argument
    suite = unittest.TestSuite()
    for case in (Health, Reflection, Metrics, Shutdown):
        suite.addTests(loader.loadTestsFromTestCase(case))
    return suite


if __name__ == "__main__":
    base.main()
