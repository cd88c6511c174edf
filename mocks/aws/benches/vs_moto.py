#!/usr/bin/env python3
"""Benchmark: our AWS mock against moto_server on the same boto3 call sequence.

Why: issue 4 asks for the AWS mock to be at least 20x faster than moto (median ratio), so
that suites with thousands of cloud calls stay fast. To compare the servers and not
boto3's own client-side cost (signing, XML parsing, the same for both), the sequence is
made once per server with boto3 (its signed HTTP requests recorded through botocore's
`before-send` event), then replayed N times as raw bytes over one keep-alive TCP
connection (TCP_NODELAY, no client HTTP library), timing each request to the last byte
of its response. moto's server closes the connection after every response, so its times
include a loopback reconnect (as every real client of it pays).

Sequence (one iteration): DescribeInstances, DescribeInstances by private-dns-name,
ELB CreateLoadBalancer / DescribeLoadBalancers / DeleteLoadBalancer, ELBv2
CreateLoadBalancer / DescribeLoadBalancers / DeleteLoadBalancer, EC2 CreateRoute /
DescribeRouteTables / DeleteRoute. Each iteration leaves the cloud as it found it, so
replaying it is valid. Set-up (not timed) differs: our mock is seeded with instances, a
VPC, subnet and route table; moto gets them created first.

Run (from the repository root, after `cargo build --bin ccm-conformance`):
    python3 mocks/aws/benches/vs_moto.py [--iterations 200] [--bin target/debug/ccm-conformance]
Needs boto3 and moto[server] (scripts/setup.sh installs both). Prints per-call and
per-iteration medians for both servers and the ratio.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

import boto3
import botocore.config


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception:
            pass
        time.sleep(0.05)
    sys.exit(f"error: {what} did not come up within {timeout}s")


class Recorder:
    """Collects the prepared (signed) HTTP requests boto3 sends."""

    def __init__(self):
        self.requests = []
        self.on = False

    def __call__(self, request, **_):
        if self.on:
            body = request.body
            if isinstance(body, str):
                body = body.encode()
            self.requests.append(
                (request.method, request.url, dict(request.headers), body or b"")
            )
        return None  # let the request go through


def clients(endpoint, region, key, secret, recorder):
    cfg = botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"})
    made = {}
    for service in ("ec2", "elb", "elbv2"):
        c = boto3.client(
            service,
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=cfg,
        )
        c.meta.events.register("before-send", recorder)
        made[service] = c
    return made


def setup_moto(c):
    ec2 = c["ec2"]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    ec2.run_instances(ImageId="ami-12c6146b", MinCount=3, MaxCount=3, SubnetId=subnet)
    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc]}])
    return subnet, tables["RouteTables"][0]["RouteTableId"]


def setup_ours(c):
    ec2 = c["ec2"]
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    table = ec2.describe_route_tables()["RouteTables"][0]["RouteTableId"]
    return subnet, table


def sequence(c, subnet, table):
    ec2, elb, elbv2 = c["ec2"], c["elb"], c["elbv2"]
    instances = ec2.describe_instances()["Reservations"][0]["Instances"]
    first = instances[0]
    ec2.describe_instances(
        Filters=[{"Name": "private-dns-name", "Values": [first["PrivateDnsName"]]}]
    )
    elb.create_load_balancer(
        LoadBalancerName="bench-classic",
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 30080}],
        Subnets=[subnet],
    )
    elb.describe_load_balancers(LoadBalancerNames=["bench-classic"])
    elb.delete_load_balancer(LoadBalancerName="bench-classic")
    arn = elbv2.create_load_balancer(Name="bench-nlb", Subnets=[subnet], Type="network")[
        "LoadBalancers"
    ][0]["LoadBalancerArn"]
    elbv2.describe_load_balancers(Names=["bench-nlb"])
    elbv2.delete_load_balancer(LoadBalancerArn=arn)
    ec2.create_route(
        RouteTableId=table,
        DestinationCidrBlock="10.244.7.0/24",
        InstanceId=first["InstanceId"],
    )
    ec2.describe_route_tables(RouteTableIds=[table])
    ec2.delete_route(RouteTableId=table, DestinationCidrBlock="10.244.7.0/24")


def record(endpoint, region, key, secret, setup):
    recorder = Recorder()
    c = clients(endpoint, region, key, secret, recorder)
    subnet, table = setup(c)
    recorder.on = True
    sequence(c, subnet, table)
    return recorder.requests


def serialize(request):
    """The request as bytes on the wire: one `sendall`, no client-side HTTP library."""
    method, full_url, headers, body = request
    u = urllib.parse.urlsplit(full_url)
    path = (u.path or "/") + ("?" + u.query if u.query else "")
    lines = [f"{method} {path} HTTP/1.1", f"Host: {u.netloc}"]
    for k, v in headers.items():
        if k.lower() not in ("host", "content-length", "connection"):
            v = v.decode() if isinstance(v, bytes) else v
            lines.append(f"{k}: {v}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class Wire:
    """One keep-alive connection reading responses by Content-Length or chunks."""

    def __init__(self, host, port):
        self.addr = (host, port)
        self.sock = None
        self.buf = b""

    def _connect(self):
        self.sock = socket.create_connection(self.addr, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def exchange(self, raw):
        """Status and body; reconnects (timed) when the server closed the connection,
        as moto's werkzeug server does after every response."""
        if self.sock is None:
            self._connect()
        self.sock.sendall(raw)
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        if headers.get("connection", "").lower() == "close":
            body = self._take(int(headers["content-length"])) if "content-length" in headers else b""
            self.close()
            return status, body
        if "content-length" in headers:
            return status, self._take(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    self._line()
                    return status, body
                body += self._take(size)
                self._take(2)
        raise ValueError(f"response without a length: {headers}")


def replay(requests, iterations):
    """Per-iteration times and per-request-index times, in seconds."""
    url = urllib.parse.urlsplit(requests[0][1])
    wire = Wire(url.hostname, url.port)
    raws = [serialize(r) for r in requests]
    per_iteration, per_call = [], [[] for _ in requests]
    for _ in range(iterations):
        started = time.perf_counter()
        for index, raw in enumerate(raws):
            t0 = time.perf_counter()
            status, data = wire.exchange(raw)
            per_call[index].append(time.perf_counter() - t0)
            if status >= 300:
                sys.exit(f"error: replayed request {index} answered {status}: {data[:300]!r}")
        per_iteration.append(time.perf_counter() - started)
    wire.close()
    return per_iteration, per_call


def action_of(request):
    body = request[3].decode(errors="replace")
    for part in body.split("&"):
        if part.startswith("Action="):
            return part[len("Action=") :]
    return "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument(
        "--bin",
        default=os.environ.get("CCM_CONFORMANCE_BIN", "target/debug/ccm-conformance"),
    )
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="vs-moto-")
    ready_path = os.path.join(work, "aws.json")
    ours = subprocess.Popen(
        [args.bin, "mock", "aws", "--nodes", "3", "--ready-file", ready_path],
        stdout=subprocess.DEVNULL,
    )
    moto_port = free_port()
    moto = subprocess.Popen(
        ["moto_server", "-H", "127.0.0.1", "-p", str(moto_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ready = wait_for(
            lambda: os.path.getsize(ready_path) > 0 and json.load(open(ready_path)),
            "our AWS mock",
        )
        moto_url = f"http://127.0.0.1:{moto_port}"

        def moto_up():
            c = http.client.HTTPConnection("127.0.0.1", moto_port, timeout=2)
            c.request("GET", "/moto-api/")
            return c.getresponse().status < 500

        wait_for(moto_up, "moto_server")

        ours_requests = record(
            ready["endpoint"],
            ready["region"],
            ready["access_key_id"],
            ready["secret_access_key"],
            setup_ours,
        )
        moto_requests = record(moto_url, "us-east-1", "testing", "testing", setup_moto)
        ours_actions = [action_of(r) for r in ours_requests]
        moto_actions = [action_of(r) for r in moto_requests]
        if ours_actions != moto_actions:
            sys.exit(f"error: sequences differ: {ours_actions} vs {moto_actions}")

        # Warm both up, then measure.
        replay(ours_requests, 5)
        replay(moto_requests, 5)
        ours_iter, ours_calls = replay(ours_requests, args.iterations)
        moto_iter, moto_calls = replay(moto_requests, args.iterations)
    finally:
        for p in (ours, moto):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()

    ms = lambda s: s * 1e3
    print(f"{'call':<28} {'ours ms':>9} {'moto ms':>9} {'ratio':>7}")
    for action, o, m in zip(ours_actions, ours_calls, moto_calls):
        mo, mm = statistics.median(o), statistics.median(m)
        print(f"{action:<28} {ms(mo):>9.3f} {ms(mm):>9.3f} {mm / mo:>6.1f}x")
    o, m = statistics.median(ours_iter), statistics.median(moto_iter)
    ratio = m / o
    print(
        f"{'iteration (' + str(len(ours_actions)) + ' calls)':<28} {ms(o):>9.3f} {ms(m):>9.3f} {ratio:>6.1f}x"
    )
    print(
        f"median ratio moto/ours over {args.iterations} iterations: {ratio:.1f}x "
        f"(target >= 20x: {'met' if ratio >= 20 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
