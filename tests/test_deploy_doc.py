"""docs/DEPLOY.md as an operator follows it (issue 37): its nginx balancer and its systemd unit, read from the page's
own fenced blocks (so the page and this test cannot drift) and run on this machine.

The balancer: Debian's nginx (``make install`` installs it) with the page's config changed only where a test machine
must: the three upstream addresses are three servers on loopback, ``listen 443`` a free loopback port, the
certificate one made here (self-signed, trusted by the clients), the pid, logs and temp files in a temp folder,
nothing that needs root. The three servers run the unit's ``ExecStart`` (its arguments as written, only bound to
loopback on free ports: three on one machine) with the unit's ``Environment=``, one token copied to each home (the
page's section 3), one PostgreSQL entity. Clients dial the balancer with the page's ``server_name`` as their Host,
as they would through DNS.

The unit: its ``ExecStart`` with the specifiers systemd substitutes (``%i``), its ``Environment=``, the clean
environment and ``/`` working directory systemd gives a service, in a network namespace of its own (``unshare``)
so that ``--host 0.0.0.0 --port 8765`` stays exactly as written and reaches nothing but that namespace's loopback;
where namespaces are not allowed, the same command bound to loopback on a free port. ``systemd-analyze verify``
checks the unit file where it is installed.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import shlex
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from pps_postgres.testing import pg_dsn  # noqa: F401 - fixture

from pps_core.testing.server import init_entity, start_server

REPO = Path(__file__).resolve().parents[1]
DEPLOY = (REPO / "docs" / "DEPLOY.md").read_text()
PPS = str(Path(sys.executable).parent / "pps")
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)
OPENSSL = shutil.which("openssl")


def fenced(lang: str) -> str:
    """The one ```lang block of docs/DEPLOY.md."""
    found = re.findall(rf"^```{lang}\n(.*?)^```", DEPLOY, re.S | re.M)
    assert len(found) == 1, f"docs/DEPLOY.md has {len(found)} ```{lang} blocks; this test reads exactly one"
    return found[0]


# -- the systemd unit --------------------------------------------------------------------------------------------


@dataclass
class Unit:
    path: str  # where the page installs it: /etc/systemd/system/pps@.service
    instance: str  # the instance the page enables: lyra (systemctl enable --now pps@lyra)
    text: str
    service: dict[str, list[str]]  # [Service] key -> its values in order (Environment= may repeat)

    @property
    def name(self) -> str:  # pps@lyra.service
        return Path(self.path).name.replace("@.", f"@{self.instance}.")

    def specifiers(self, value: str) -> str:
        """``value`` with the specifiers systemd substitutes (systemd.unit(5) "Specifiers"); any other fails."""
        prefix = self.name.split("@")[0]
        table = {"i": self.instance, "I": self.instance, "n": self.name, "N": self.name.rsplit(".", 1)[0],
                 "p": prefix, "P": prefix, "%": "%"}

        def one(match: re.Match[str]) -> str:
            assert match.group(1) in table, f"the unit uses %{match.group(1)}, which this test does not substitute"
            return table[match.group(1)]

        return re.sub(r"%(.)", one, value)

    def environment(self) -> dict[str, str]:
        """``Environment=`` assignments (space-separated, quotes as systemd reads them), specifiers substituted."""
        env: dict[str, str] = {}
        for line in self.service.get("Environment", []):
            for word in shlex.split(self.specifiers(line)):
                key, eq, value = word.partition("=")
                assert eq, f"Environment={line}: not KEY=VALUE"
                env[key] = value
        assert "EnvironmentFile" not in self.service, "the unit reads an EnvironmentFile: give it to this test"
        return env

    def exec_start(self) -> list[str]:
        (line,) = self.service["ExecStart"]
        argv = shlex.split(self.specifiers(line))
        assert argv[0].startswith("/") and argv[0][0] not in "-@:+!", f"ExecStart needs an absolute path: {argv[0]}"
        return argv


def unit() -> Unit:
    text = fenced("ini")
    where = re.search(r"^#\s*(/etc/systemd/system/\S+)\s.*systemctl enable --now (\S+)@(\S+?)\)", text, re.M)
    assert where, "the unit's first line names its path and the `systemctl enable --now` that starts it"
    section, keys = "", {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        if section == "Service":
            keys.setdefault(key.strip(), []).append(value.strip())
    return Unit(path=where.group(1), instance=where.group(3), text=text, service=keys)


def on_this_machine(argv: list[str], env: dict[str, str], root: Path) -> tuple[list[str], dict[str, str]]:
    """The unit's command and environment with the paths a test machine must change: the installed ``pps`` is this
    checkout's (a console script like it), and the unit's ``PPS_ROOT`` (every path under it too) a temp folder."""
    assert argv[0].endswith("/bin/pps"), argv[0]
    assert "PPS_ROOT" in env, "the unit sets PPS_ROOT"
    where = env["PPS_ROOT"].rstrip("/")
    moved = {k: str(root) + v[len(where):] if v == where or v.startswith(where + "/") else v for k, v in env.items()}
    return [PPS, *argv[1:]], moved


def systemd_env(root: Path, unit_env: dict[str, str]) -> dict[str, str]:
    """What systemd gives a service (systemd.exec(5) "Environment Variables in Spawned Processes"): a fixed PATH, the
    User='s HOME, nothing of anyone's shell; then the unit's ``Environment=``."""
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin", "LANG": "C.UTF-8", "HOME": str(root),
            **unit_env}


def _netns() -> list[str] | None:
    """``unshare`` that gives a command a network namespace of its own, or None where that is not allowed."""
    if not shutil.which("unshare"):
        return None
    for cmd in (["unshare", "--net"], ["unshare", "--user", "--map-root-user", "--net"]):
        if subprocess.run([*cmd, "true"], capture_output=True).returncode == 0:
            return cmd
    return None


#: Run inside the namespace: its loopback up, the unit's command, then /health and /ready on the bound port.
PROBE = r"""
import fcntl, json, socket, struct, subprocess, sys, time, urllib.request
argv, env, port = json.loads(sys.argv[1])
with socket.socket() as s:  # ip link set lo up (SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP)
    flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
server = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.DEVNULL)
seen = {}
try:
    deadline = time.monotonic() + 60
    while server.poll() is None and time.monotonic() < deadline and "ready" not in seen:
        for path in ("health", "ready"):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path}", timeout=5) as answer:
                    seen[path] = [answer.status, json.loads(answer.read())]
            except OSError:
                time.sleep(0.1)
                break
finally:
    server.terminate()
    seen["exit"] = server.wait(30)
print(json.dumps(seen))
"""


def test_the_unit_serves_the_entity_as_systemd_runs_it(pg_dsn):  # noqa: F811
    """The unit's ExecStart, as systemd runs it, serves the entity it names (``%i``): alive and ready."""
    u = unit()
    root = Path(tempfile.mkdtemp(prefix="pps-unit-"))  # not under pytest's 0700 tmp: see pps_postgres.testing
    schema = f"t{uuid.uuid4().hex[:10]}_unit"
    try:
        argv, env = on_this_machine(u.exec_start(), u.environment(), root)
        assert argv[1:5] == ["serve", "http", "--entity", u.instance], argv
        init_entity(root, u.instance, "postgres,explorer,http", "[postgres]", f"dsn = {pg_dsn!r}",
                    f"schema = {schema!r}")
        netns = _netns()
        port = int(argv[argv.index("--port") + 1])
        if netns is None:  # no namespace here: the same command on loopback, on a port that is free
            host = argv.index("--host") + 1
            argv[host], port = "127.0.0.1", _free_port()
            argv[argv.index("--port") + 1] = str(port)
        probe = [*(netns or []), sys.executable, "-I", "-c", PROBE, json.dumps([argv, systemd_env(root, env), port])]
        done = subprocess.run(probe, capture_output=True, text=True, timeout=120, cwd="/")
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen.get("health") == [200, {"ok": True, "entities": 1}], (seen, done.stderr[-3000:])
        assert seen.get("ready", [None])[0] == 200 and seen["ready"][1]["ready"] is True, (seen, done.stderr[-3000:])
        assert seen["exit"] == 0, done.stderr[-3000:]  # systemctl stop (SIGTERM) is a clean exit
        assert "Traceback" not in done.stderr
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_the_unit(tmp_path):
    """``systemd-analyze verify`` of the page's unit, installed under its name with the instance the page enables;
    only the program's path is this machine's (verify checks it is executable). Not even a warning."""
    u = unit()
    template = tmp_path / Path(u.path).name
    (line,) = u.service["ExecStart"]
    template.write_text(u.text.replace(line, line.replace(shlex.split(line)[0], PPS, 1)))
    (tmp_path / u.name).symlink_to(template.name)
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / u.name)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr.strip() and not done.stdout.strip(), done.stdout + done.stderr


# -- the balancer ------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_name() -> str:
    found = re.findall(r"^\s*server_name\s+(\S+?);", fenced("nginx"), re.M)
    assert len(found) == 1, found
    return found[0]


def body_limit() -> int:
    """The config's ``client_max_body_size`` in bytes."""
    (size,) = re.findall(r"^\s*client_max_body_size\s+(\d+)([kKmMgG]?);", fenced("nginx"), re.M)
    return int(size[0]) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[size[1].lower()]


def nginx_config(folder: Path, upstreams: list[str], port: int, cert: Path, key: Path) -> str:
    """The page's config, changed where a test machine must, inside the main and ``http`` contexts nginx.conf gives
    it (Debian's conf.d) with this folder for pid, logs and temp files."""
    block = fenced("nginx")
    lines = re.findall(r"^\s*server\s+(\S+:\d+)\b[^;{]*;", block, re.M)
    assert len(lines) == len(upstreams), f"the page's upstream has {len(lines)} servers: {lines}"
    for address, local in zip(lines, upstreams, strict=True):
        block = re.sub(rf"(^\s*server\s+){re.escape(address)}\b", rf"\g<1>{local}", block, count=1, flags=re.M)
    block, n = re.subn(r"^(\s*listen\s+)443(\s+ssl\s*;)", rf"\g<1>127.0.0.1:{port}\2", block, flags=re.M)
    assert n == 1, "the page's server listens on 443 with ssl"
    block, n = re.subn(r"^(\s*ssl_certificate\s+)\S+;", rf"\g<1>{cert};", block, flags=re.M)
    assert n == 1, "the page's server names no ssl_certificate: `listen 443 ssl` does not start without one"
    block, n = re.subn(r"^(\s*ssl_certificate_key\s+)\S+;", rf"\g<1>{key};", block, flags=re.M)
    assert n == 1, "the page's server names no ssl_certificate_key"
    user = ""
    if os.geteuid() == 0:  # nginx's workers drop root; they only need the temp folders (created for them)
        nobody = pwd.getpwnam("nobody")
        user = f"user nobody {grp.getgrgid(nobody.pw_gid).gr_name};"
    temp = "\n".join(f"    {kind}_temp_path {folder}/{kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                               "uwsgi", "scgi"))
    return f"""{user}
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 256; }}
http {{
{temp}
    log_format fleet '$http_x_test_run $request_method $uri $status $upstream_addr';
    access_log {folder}/access.log fleet;
{block}
}}
"""


class Link:
    """A TCP port on loopback that forwards to the session's PostgreSQL (its unix socket), until ``cut``: then
    connections are refused and the open ones closed, as when the network between a server and the database fails."""

    def __init__(self, dsn: str) -> None:
        import threading

        info = psycopg.conninfo.conninfo_to_dict(dsn)
        self.target = f"{info['host']}/.s.PGSQL.{info.get('port') or 5432}"
        self.listener = socket.create_server(("127.0.0.1", 0))
        port = self.listener.getsockname()[1]
        self.dsn = f"postgresql://{info.get('user') or 'postgres'}@127.0.0.1:{port}/{info.get('dbname') or 'postgres'}"
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            far = socket.socket(socket.AF_UNIX)
            far.connect(self.target)
            with self.lock:
                self.open += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.listener.close()
        with self.lock:
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.open.clear()


@dataclass
class Balancer:
    url: str  # what clients dial (https, a name the certificate holds)
    host: str  # the Host they send: the page's server_name
    verify: ssl.SSLContext
    folder: Path
    servers: list
    upstreams: list[str]
    link: Link  # between the third server and PostgreSQL
    entity: str  # the unit's instance

    def log(self) -> list[list[str]]:
        """The access log's lines: the client's X-Test-Run, method, path, status, the server(s) nginx passed the
        request to."""
        return [line.split(" ", 4) for line in (self.folder / "access.log").read_text().splitlines()]

    def client(self, run: str = "-", **kw) -> httpx.Client:
        headers = {"Host": self.host, "X-Test-Run": run, **kw.pop("headers", {})}
        kw.setdefault("base_url", self.url)
        return httpx.Client(verify=self.verify, headers=headers, timeout=60, **kw)

    def token(self) -> str:
        return self.servers[0].token(self.entity)


def _certificate(folder: Path, host: str) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", f"subjectAltName=DNS:localhost,DNS:{host}"], check=True, capture_output=True)
    return cert, key


@pytest.fixture(scope="module")
def balancer(pg_dsn, tmp_path_factory):  # noqa: F811
    if NGINX is None or OPENSSL is None:  # `make install` installs them (as root or with sudo): see the Makefile
        pytest.skip("nginx or openssl is not installed (apt-get install nginx-light openssl)")
    u = unit()
    schema = f"t{uuid.uuid4().hex[:10]}_deploy"
    base = tmp_path_factory.mktemp("deploy")
    roots = [base / f"machine{i}" for i in range(3)]
    link = Link(pg_dsn)  # the third server reaches PostgreSQL through a link the tests may cut

    def init(root: Path, dsn: str) -> None:
        root.mkdir()
        init_entity(root, u.instance, "postgres,explorer,http", "[postgres]", f"dsn = {dsn!r}", f"schema = {schema!r}")

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(init, roots, [pg_dsn, pg_dsn, link.dsn]))
    for root in roots[1:]:  # the page's section 3: the first home's token file copied to the others
        shutil.copyfile(roots[0] / u.instance / "token", root / u.instance / "token")

    def start(root: Path):
        argv, env = on_this_machine(u.exec_start(), u.environment(), root)
        assert argv[1:3] == ["serve", "http"], argv
        args = argv[3:]
        args[args.index("--host") + 1] = "127.0.0.1"  # three on one machine: loopback, each its own port
        args[args.index("--port") + 1] = "0"
        assert "FORWARDED_ALLOW_IPS" in env, "the unit names the balancer, whose X-Forwarded-Proto is believed"
        env["FORWARDED_ALLOW_IPS"] = "127.0.0.1"  # the balancer's address on this machine
        from pps_core.testing.server import pps_env

        return start_server(root, *args, env=pps_env(root, **env), program=(argv[0],), cwd=Path("/"))

    folder = Path(tempfile.mkdtemp(prefix="pps-nginx-"))  # nginx's workers (not root) enter it
    folder.chmod(0o755)
    servers: list = []
    proc = None
    try:
        with ThreadPoolExecutor(3) as pool:
            servers = list(pool.map(start, roots))
        upstreams = [s.url.removeprefix("http://") for s in servers]
        host = server_name()
        cert, key = _certificate(folder, host)
        port = _free_port()
        conf = folder / "nginx.conf"
        conf.write_text(nginx_config(folder, upstreams, port, cert, key))
        command = [NGINX, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")]
        checked = subprocess.run([*command, "-t", "-q"], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
        proc = subprocess.Popen([*command, "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        verify = ssl.create_default_context(cafile=str(cert))
        url = f"https://localhost:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/health", verify=verify, headers={"Host": host}, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (folder / "error.log").read_text()
            time.sleep(0.05)
        yield Balancer(url=url, host=host, verify=verify, folder=folder, servers=servers, upstreams=upstreams,
                       link=link, entity=u.instance)
    finally:
        link.cut()
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda server: server.stop(), servers))
        shutil.rmtree(folder, ignore_errors=True)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def passed_to(balancer: Balancer, run: str, path: str, count: int) -> list[str]:
    """The servers nginx passed the ``count`` requests for ``path`` of client ``run`` to (nginx writes a line once
    the exchange is over: waited for)."""
    deadline = time.monotonic() + 30
    while True:
        seen = [line[4] for line in balancer.log() if line[0] == run and line[2] == path]
        if len(seen) >= count or time.monotonic() > deadline:
            assert len(seen) == count, seen
            return seen
        time.sleep(0.05)


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # the initialize handshake (Mcp-Session-Id), and the newest
async def test_an_mcp_session_through_the_balancer_is_answered_by_every_server(balancer, mode):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    run = uuid.uuid4().hex
    headers = {"Host": balancer.host, "X-Test-Run": run, "Authorization": f"Bearer {balancer.token()}"}
    sent: list[str] = []

    async def note(request) -> None:
        sent.append(request.url.path)

    http = httpx2.AsyncClient(headers=headers, verify=balancer.verify, timeout=60, event_hooks={"request": [note]})
    async with Client(streamable_http_client(f"{balancer.url}/mcp", http_client=http), mode=mode) as client:
        for i in range(4):
            stored = await client.call_tool("store_message", {"content": f"behind nginx {mode} {i}",
                                                              "author_name": "Jeff", "channel": "terminal"})
            assert not stored.is_error, stored
        assert "raw_search" in {t.name for t in (await client.list_tools()).tools}
        found = await client.call_tool("raw_search", {"query": f"behind nginx {mode}"})
        assert not found.is_error and f"behind nginx {mode} 3" in str(found.content), found
    assert set(passed_to(balancer, run, "/mcp", len(sent))) == set(balancer.upstreams)  # no sticky sessions


def test_oauth_discovery_through_the_balancer_names_its_public_url(balancer):
    """An MCP client that has no token yet (a claude.ai connector) is told where to authorize: the balancer's
    public URL, not a server's own address."""
    with balancer.client() as http:
        refused = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            headers={"Accept": "application/json, text/event-stream"})
        assert refused.status_code == 401, refused.text
        public = f"https://{balancer.host}"
        challenge = refused.headers.get("www-authenticate", "")
        metadata = re.search(r'resource_metadata="([^"]+)"', challenge)
        assert metadata and metadata.group(1).startswith(f"{public}/"), challenge
        resource = http.get(metadata.group(1).removeprefix(public))
        assert resource.status_code == 200, resource.text
        assert resource.json()["resource"].startswith(f"{public}/") and all(
            a.startswith(f"{public}/") for a in resource.json()["authorization_servers"]), resource.json()


def test_rest_calls_and_readiness_through_the_balancer(balancer):
    run = uuid.uuid4().hex
    token = {"Authorization": f"Bearer {balancer.token()}"}
    with balancer.client(run) as http:
        for i in range(3):
            stored = http.post("/tools/store_message", headers=token, json={
                "content": f"the lighthouse keeper's log, page {i}", "author_name": "Jeff", "channel": "terminal"})
            assert stored.status_code == 200, stored.text
        found = http.post("/tools/raw_search", headers=token, json={"query": "lighthouse keeper"})
        assert found.status_code == 200 and found.json()["count"] == 3, found.text
        refused = http.post("/tools/raw_search", json={"query": "lighthouse"})  # no token: PPS's own answer
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized", refused.text
        for _ in range(3):
            ready = http.get("/ready")
            assert ready.status_code == 200 and ready.json()["ready"] is True, ready.text
    assert set(passed_to(balancer, run, "/tools/store_message", 3)) == set(balancer.upstreams)
    assert set(passed_to(balancer, run, "/ready", 3)) == set(balancer.upstreams)


def test_an_explorer_login_through_the_balancer_holds_on_every_server(balancer):
    run = uuid.uuid4().hex
    with balancer.client(run, base_url=f"{balancer.url}/ui/{balancer.entity}") as browser:
        form = browser.get("/login")
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text).group(1)
        answer = browser.post("/login", data={"nonce": nonce, "token": balancer.token()},
                              headers={"Origin": f"https://{balancer.host}"})
        assert answer.status_code == 303, answer.text
        cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith("pps_ui_session="))
        assert "; Secure" in cookie, cookie  # the browser reached https: the cookie never goes over plain http
        pages = [browser.get("/timeline") for _ in range(3)]
        assert [p.status_code for p in pages] == [200] * 3, [p.headers.get("location") for p in pages]
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', pages[0].text).group(1)
        assert browser.post("/logout", data={"csrf": csrf}).status_code == 303
        after = [browser.get("/timeline") for _ in range(3)]
        assert [(p.status_code, p.headers.get("location")) for p in after] == [(303, f"/ui/{balancer.entity}/login")] * 3
    assert set(passed_to(balancer, run, f"/ui/{balancer.entity}/timeline", 6)) == set(balancer.upstreams)


def test_the_balancer_passes_every_body_the_servers_take_and_refuses_larger_ones_itself(balancer):
    """The config's body limit is the servers' own (``[limits] max_request_bytes``): a request they take passes, and
    a larger one is refused by nginx (413) before any server sees it. (A server refusing a body nginx is still sending
    resets the connection: nginx answers 502 and, ``max_fails=1``, takes that healthy server out of rotation.)"""
    from pps_core.settings import Limits

    server_limit = Limits().max_request_bytes
    assert body_limit() <= server_limit, (body_limit(), server_limit)
    token = {"Authorization": f"Bearer {balancer.token()}", "Content-Type": "application/json"}
    run = uuid.uuid4().hex
    with balancer.client(run) as http:
        letter = "a long letter. " * 6_000  # 90,000 characters, under a batched turn's 100,000
        count = (server_limit - 64 * 1024) // (len(letter) + 100)
        body = json.dumps({"messages": [{"content": f"{letter}{i}", "author_name": "Jeff", "channel": "letters"}
                                        for i in range(count)]})
        assert server_limit - 64 * 1024 > len(body) > 4 * 1024 * 1024
        taken = http.post("/tools/store_messages", headers=token, content=body)
        assert taken.status_code == 200 and taken.json()["stored"] == count, taken.text[:500]
        for _ in range(3):
            over = http.post("/tools/store_messages", headers=token, content=body + " " * (server_limit - len(body) + 1))
            assert over.status_code == 413, over.text[:500]
        servers = passed_to(balancer, run, "/tools/store_messages", 4)
        assert servers[0] in balancer.upstreams and servers[1:] == ["-"] * 3  # no server was sent a larger one
        assert all(http.get("/ready").status_code == 200 for _ in range(3))


def test_a_stopped_server_is_passed_over(balancer):
    """It stops the first server (for the rest of this module). Calls through the balancer go on: nginx sends them
    to another server (``proxy_next_upstream error``: a connection refused, so nothing was sent)."""
    balancer.servers[0].stop()
    run = uuid.uuid4().hex
    token = {"Authorization": f"Bearer {balancer.token()}"}
    with balancer.client(run) as http:
        for i in range(6):
            stored = http.post("/tools/store_message", headers=token, json={
                "content": f"one server down, turn {i}", "author_name": "Jeff", "channel": "terminal"})
            assert stored.status_code == 200, stored.text
        assert http.get("/ready").status_code == 200
    down = balancer.upstreams[0]
    assert any(e.startswith(f"{down}, ") for e in passed_to(balancer, run, "/tools/store_message", 6))  # tried


def test_a_server_that_is_not_ready_is_passed_over(balancer):
    """Last in this module. The third server loses PostgreSQL (the others keep it). A call (a POST, which nginx
    never sends twice) that reaches it gets its 503 (``unavailable``, never a 502 or a page of nginx's), and sent
    again at once it goes to another server (``proxy_next_upstream ... http_503`` with ``max_fails=1``: out of
    rotation for ``fail_timeout``); ``/ready`` through the balancer stays 200."""
    run = uuid.uuid4().hex
    token = {"Authorization": f"Bearer {balancer.token()}"}
    balancer.link.cut()
    lost = balancer.servers[2]
    deadline = time.monotonic() + 60
    while httpx.get(f"{lost.url}/ready", timeout=30).status_code != 503:  # it knows (the pool's connections cut)
        assert time.monotonic() < deadline, "the server never noticed PostgreSQL was gone"
        time.sleep(0.1)
    with balancer.client(run) as http:
        answers = []
        for i in range(6):  # round robin: the third server's turn comes
            turn = {"content": f"one server without its database, turn {i}", "author_name": "Jeff",
                    "channel": "terminal"}
            stored = http.post("/tools/store_message", headers=token, json=turn)
            answers.append(stored.status_code)
            if stored.status_code == 503:
                assert stored.json()["error"] == "unavailable", stored.text
                again = http.post("/tools/store_message", headers=token, json=turn)
                assert again.status_code == 200, again.text
                break
            assert stored.status_code == 200, stored.text
        assert answers[-1] == 503, answers
        for _ in range(6):
            ready = http.get("/ready")
            assert ready.status_code == 200 and ready.json()["ready"] is True, ready.text
    sent = passed_to(balancer, run, "/tools/store_message", len(answers) + 1)
    there = lost.url.removeprefix("http://")
    assert [e.split(", ")[-1] == there for e in sent if there in e] == [True], sent  # its 503 was not sent on
