"""An emulated Google Cloud Storage bucket on loopback, reachable by every gs:// client.

`gcp-storage-emulator` serves the GCS JSON API over plain HTTP. The clients reach it
in three ways, all through one `Proxy` here, which counts every request and can
delay each one (or only listings, or hold those of one object until released) or drop
the connection (a bucket gone):

- TensorFlow's own gs:// client (`tf.io.gfile`, `TFRecordDataset`, TFDS) has the
  endpoints compiled in (https://storage.googleapis.com, https://www.googleapis.com);
  its libcurl honours `https_proxy` and `CURL_CA_BUNDLE`. The proxy answers CONNECT,
  terminates TLS with a certificate for those hosts signed by a test CA made here
  (`openssl`), and forwards the plain requests. `GOOGLE_AUTH_TOKEN_FOR_TESTING` and
  `NO_GCE_CHECK=true` skip real authentication.
- gcsfs takes `STORAGE_EMULATOR_HOST`, and array_record (google-cloud-cpp)
  `CLOUD_STORAGE_EMULATOR_ENDPOINT`: both pointed at the proxy as a plain HTTP server.

TensorFlow reads some of this environment once per process, so gs:// reads run in
child processes with `Bucket.env()`. Data is uploaded with the JSON API's simple
upload (TensorFlow's chunked uploads are stored with their framing by the emulator).
Everything listens on 127.0.0.1 only, and every wait is bounded.

The proxy also answers two kinds of range reads as GCS does, where the emulator does not
(array_record asks for both at a file's end): a suffix range (`bytes=-N`) and a range
that starts at the object's end (416); and it hands the emulator gcsfs's multipart
uploads as simple ones, which it stores byte for byte (`_multipart_as_media`).
"""

from __future__ import annotations

import copy
import dataclasses
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

# Generous: the emulator is a Python program starting on a loaded 2-core machine.
START_TIMEOUT_S = 120
UPSTREAM_TIMEOUT_S = 60
HOSTS = ("storage.googleapis.com", "www.googleapis.com", "oauth2.googleapis.com")
# Azurite's development account (tests/bucket/stores.py), the first part of its paths.
AZURITE_ACCOUNT = "devstoreaccount1"
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
}


class EmulatorUnavailable(RuntimeError):
    """The emulator could not start here (the tests that need it skip with this)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise EmulatorUnavailable(f"the emulator exited with {process.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.2)
    raise EmulatorUnavailable(f"nothing answered on 127.0.0.1:{port} within {timeout:g} s")


# The emulator serves one connection at a time (http.server.HTTPServer) with a listen
# queue of 5: a burst of more connections than that (16 shard copies starting at once)
# overflows it, and the kernel drops the extra connection's SYN, which the client resends
# after 1 s: a stall of the emulator's making (GCS serves requests in parallel). A queue
# of 128 holds such a burst; the requests are still served one by one.
_EMULATOR_MAIN = """
import http.server, runpy
http.server.HTTPServer.request_queue_size = 128
runpy.run_module("gcp_storage_emulator", run_name="__main__", alter_sys=True)
"""


class Emulator:
    """`gcp-storage-emulator` in a child process, in memory, on a free loopback port (or
    the one at `port`, which another process started: `stop` leaves it running)."""

    def __init__(self, bucket: str, port: int | None = None):
        self.bucket = bucket
        self.port = free_port() if port is None else port
        self.process: subprocess.Popen | None = None

    def start(self) -> Emulator:
        command = [sys.executable, "-c", _EMULATOR_MAIN, "start"]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--in-memory", "--quiet"]
        command += ["--default-bucket", self.bucket]
        try:
            import gcp_storage_emulator  # noqa: F401
        except ImportError as error:
            raise EmulatorUnavailable(f"gcp-storage-emulator is not installed: {error}") from None
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_for_port(self.port, START_TIMEOUT_S, self.process)
        except EmulatorUnavailable:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Ends the emulator (and with it every object): the bucket is gone."""
        if self.process is not None:
            end_server(self.process)


def end_server(process: subprocess.Popen) -> None:
    """Ends a store's server process: terminated, then killed if it has not ended in 30 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


# The file, in a shared store's folder (`tests.bucket.conftest.shared_store`), that names its
# server's port and process for the xdist workers that reach it and for `end_shared_servers`.
SERVER_FILE = "server.json"


def record_shared_server(folder: Path, port: int, process: subprocess.Popen) -> None:
    """Names the server of a store that the run's workers share, in `folder`."""
    (folder / SERVER_FILE).write_text(json.dumps({"port": port, "pid": process.pid}))


def shared_server_port(folder: Path) -> int:
    return json.loads((folder / SERVER_FILE).read_text())["port"]


def end_shared_servers(base: Path) -> None:
    """Ends the servers of the stores the run's workers shared (in folders under `base`,
    the run's temporary folder): called once the run is over, by the process that ran it,
    as the worker that started a server may have ended long before the others' last read.
    Each is terminated, then killed if it has not ended in 30 s."""
    for record in sorted(base.glob(f"*/{SERVER_FILE}")):
        pid = json.loads(record.read_text())["pid"]
        for signal_number in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, signal_number)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and _running(pid):
                time.sleep(0.1)
            if not _running(pid):
                break
        record.unlink()


def _running(pid: int) -> bool:
    """Whether process `pid` has not ended (a child of this process that has is reaped; one
    that is not, an ended one that its parent has not reaped yet, is ended)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return False
    except ChildProcessError:
        pass  # not a child of this process: started by a worker
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        pass  # no /proc here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# What `make_certificates` names its files, in the order it gives them.
CERTIFICATES = ("ca.pem", "server.pem", "server.key")


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) for `HOSTS`, made with openssl
    (or, where it is not installed, with the cryptography package)."""
    folder.mkdir(parents=True, exist_ok=True)
    openssl = shutil.which("openssl")
    if openssl is None:
        return _certificates_with_cryptography(folder)
    (ca, cert, key), ca_key = (folder / n for n in CERTIFICATES), folder / "ca.key"
    csr = folder / "server.csr"
    extensions = folder / "server.ext"
    names = ",".join(f"DNS:{h}" for h in (*HOSTS, "*.googleapis.com"))
    extensions.write_text(
        f"subjectAltName={names}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    run(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
        *("-keyout", str(ca_key), "-out", str(ca), "-subj", "/CN=fast-tfds test CA"),
        *("-addext", "basicConstraints=critical,CA:TRUE"),
        *("-addext", "keyUsage=critical,keyCertSign,cRLSign"),
    )
    run(
        *("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr)),
        *("-subj", "/CN=storage.googleapis.com"),
    )
    run(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key)),
        *("-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(extensions)),
    )
    return ca, cert, key


def _certificates_with_cryptography(folder: Path) -> tuple[Path, Path, Path]:
    """What `make_certificates` makes, where openssl is not installed."""
    import datetime

    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise EmulatorUnavailable("neither openssl nor cryptography is installed") from None

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject, issuer, public_key, signing_key, extensions):
        builder = x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
        builder = builder.public_key(public_key).serial_number(x509.random_serial_number())
        builder = builder.not_valid_before(now - datetime.timedelta(hours=1))
        builder = builder.not_valid_after(now + datetime.timedelta(days=2))
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fast-tfds test CA")])
    ca_cert = certificate(
        ca_name, ca_name, ca_key.public_key(), ca_key,
        [(x509.BasicConstraints(ca=True, path_length=None), True)],
    )  # fmt: skip
    names = [x509.DNSName(h) for h in (*HOSTS, "*.googleapis.com")]
    server = certificate(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOSTS[0])]), ca_name,
        key.public_key(), ca_key,
        [
            (x509.SubjectAlternativeName(names), False),
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        ],
    )  # fmt: skip
    ca, cert, key_path = (folder / n for n in CERTIFICATES)
    ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca, cert, key_path


@dataclasses.dataclass(frozen=True)
class Request:
    """One request the proxy forwarded (or dropped)."""

    method: str
    host: str
    path: str
    object: str | None  # the object's name, for object requests
    media: bool  # a read of the object's bytes (not its metadata)
    status: int  # 0: not answered (the bucket was gone)
    body_bytes: int  # bytes of the response body


def _object_of(path: str) -> tuple[str | None, bool]:
    """(object name, whether the request reads its bytes) of a GCS request path."""
    parsed = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(parsed.query)
    parts = parsed.path.split("/")
    media = query.get("alt") == ["media"]
    # /storage/v1/b/B/o/NAME, /download/storage/v1/b/B/o/NAME, /b/B/o/NAME
    if "o" in parts and "b" in parts and parts.index("o") == parts.index("b") + 2:
        name = "/".join(parts[parts.index("o") + 1 :])
        if name and not parsed.path.startswith("/upload/"):
            return urllib.parse.unquote(name), media or parsed.path.startswith("/download/")
        return None, False
    if len(parts) > 3 and parts[1] == AZURITE_ACCOUNT:
        # Azurite's blobs: /ACCOUNT/CONTAINER/NAME
        return urllib.parse.unquote("/".join(parts[3:])), True
    if len(parts) > 2 and parts[1] not in ("storage", "upload", "batch", "download"):
        # XML API (and S3's, path-style): /BUCKET/NAME
        return urllib.parse.unquote("/".join(parts[2:])), True
    return None, False


class Proxy:
    """A loopback HTTP proxy to an emulator: CONNECT + TLS for TensorFlow's client,
    plain HTTP for gcsfs and array_record (and for the S3 and Azure emulators behind it,
    `tests.bucket.stores`: their objects are named as the XML API's, /BUCKET/NAME). It
    records every request (`requests`), sleeps `latency_s` before forwarding each one,
    and drops every connection while `gone` is set (as a network does to a bucket that
    went away)."""

    def __init__(self, upstream_port: int, cert: Path | None = None, key: Path | None = None):
        self.upstream_port = upstream_port
        # Without a certificate: plain HTTP only (the S3 and Azure clients take an endpoint).
        self.context = None
        if cert is not None:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(cert, key)
        self.latency_s = 0.0
        self.listing_latency_s = 0.0  # more, for listings of objects only
        # Requests for objects whose name ends with `held` wait until `release` is set
        # (at most UPSTREAM_TIMEOUT_S): a shard that is surely unread when a test
        # breaks the bucket, however fast the reader asks for the others.
        self.held: str | None = None
        self.release = threading.Event()
        # Uploads after the first `uploads_allowed` wait until `release` is set, then are
        # dropped unanswered: a publisher cut short mid-way, whose later objects never
        # reach the bucket, however its threads are scheduled.
        self.uploads_allowed: int | None = None
        self._uploads_seen = 0
        self.gone = False
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.5)
        self.port = self._server.getsockname()[1]
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="gcs-proxy")
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(10)
        self._server.close()

    def reset(self) -> None:
        """Forgets the requests seen so far (and the uploads `uploads_allowed` counts)."""
        with self._lock:
            self.requests.clear()
            self._uploads_seen = 0

    def uploaded(self) -> list[str]:
        """The names of the objects uploaded (the answered simple uploads, as gcsfs makes
        of files under its chunk size, and S3's and Azure's puts of whole objects), in the
        order they were answered."""
        with self._lock:
            made = [r for r in self.requests if r.status and _is_upload(r.method, r.path)]
        query = [urllib.parse.parse_qs(urllib.parse.urlsplit(r.path).query) for r in made]
        return [r.object or q["name"][0] for r, q in zip(made, query, strict=True)]

    def _beyond_allowed_uploads(self, method: str, target: str) -> bool:
        if self.uploads_allowed is None or not _is_upload(method, _origin_form(target)):
            return False
        with self._lock:
            self._uploads_seen += 1
            return self._uploads_seen > self.uploads_allowed

    def media_reads(self, suffix: str = "") -> list[Request]:
        """The answered reads of object bytes, of objects whose name ends with `suffix`."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.media and r.status and r.object and r.object.endswith(suffix)
            ]

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(UPSTREAM_TIMEOUT_S * 2)
        upstream = None
        try:
            stream = conn.makefile("rb")
            first = _read_head(stream)
            if first is None:
                return
            method, target, headers = first
            if method == "CONNECT" and self.context is not None:
                host = target.rsplit(":", 1)[0]
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                conn = self.context.wrap_socket(conn, server_side=True)
                stream = conn.makefile("rb")
                first = None
            else:
                host = headers.get("host", "")
            while True:
                if first is None:
                    first = _read_head(stream)
                    if first is None:
                        return
                method, target, headers = first
                first = None
                if headers.pop("expect", "").lower() == "100-continue":
                    # botocore asks before it sends an upload's body; the proxy reads the
                    # whole request before it forwards it, so it says go on at once.
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = _read_body(stream, headers)
                if self.gone:
                    self._record(method, host, target, 0, 0)
                    return  # the connection drops, unanswered
                if self._beyond_allowed_uploads(method, target):
                    self.release.wait(UPSTREAM_TIMEOUT_S)
                    self._record(method, host, target, 0, 0)
                    return
                if self.held and (_object_of(_origin_form(target))[0] or "").endswith(self.held):
                    self.release.wait(UPSTREAM_TIMEOUT_S)
                if self.latency_s:
                    time.sleep(self.latency_s)
                if self.listing_latency_s and _is_listing(_origin_form(target)):
                    time.sleep(self.listing_latency_s)
                path = _origin_form(target)
                forward = {k: v for k, v in headers.items() if k not in HOP_BY_HOP}
                if _is_upload(method, path):
                    # Recorded as made, with the object's name in the query (`uploaded`).
                    path, body = _multipart_as_media(path, forward, body)
                    target = path
                while True:
                    # A kept-alive connection to the server that it closed meanwhile (Azurite,
                    # Node's, closes idle ones after 5 s) is made again once, as a proxy
                    # does; a fresh one that fails is the server gone.
                    fresh = upstream is None
                    if fresh:
                        upstream = http.client.HTTPConnection(
                            "127.0.0.1", self.upstream_port, timeout=UPSTREAM_TIMEOUT_S
                        )
                    try:
                        if forward.get("range", "").startswith("bytes=-"):
                            forward["range"] = self._suffix_range(upstream, path, forward["range"])
                        upstream.request(method, path, body=body or None, headers=forward)
                        response = upstream.getresponse()
                        payload = response.read()
                        break
                    except OSError:
                        upstream.close()
                        upstream = None
                        if fresh:
                            self._record(method, host, target, 0, 0)
                            return
                status, reason = response.status, response.reason
                answer = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
                beyond = _beyond_the_end(status, response.getheader("content-range"))
                if beyond is not None:  # GCS answers 416 there; the emulator, 206 and nothing
                    status, reason = 416, "Requested Range Not Satisfiable"
                    answer = [(k, v) for k, v in answer if k.lower() != "content-range"]
                    answer.append(("Content-Range", f"bytes */{beyond}"))
                self._record(method, host, target, status, len(payload))
                out = [f"HTTP/1.1 {status} {reason}"]
                out += [f"{k}: {v}" for k, v in answer]
                length = response.getheader("content-length") if method == "HEAD" else None
                out.append(f"Content-Length: {length or len(payload)}")
                out.append("Connection: keep-alive")
                conn.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + payload)
                if headers.get("connection", "").lower() == "close":
                    return
        except (OSError, ssl.SSLError, ValueError):
            return
        finally:
            if upstream is not None:
                upstream.close()
            try:
                conn.close()
            except OSError:
                pass

    def _suffix_range(self, upstream: http.client.HTTPConnection, path: str, asked: str) -> str:
        """`bytes=-N` (the last N bytes) as `bytes=START-END`: the emulator answers a
        suffix range with the whole object (GCS, with the last N bytes), which array_record's
        client asks for to find a file's end. The object's size comes from its metadata."""
        name, _ = _object_of(path)
        quoted = urllib.parse.quote(name or "", safe="")
        upstream.request("GET", f"/storage/v1/b/{self._bucket_of(path)}/o/{quoted}")
        response = upstream.getresponse()
        metadata = response.read()
        if response.status != 200:
            return asked  # the object's own answer (404) comes with the read
        size = int(json.loads(metadata)["size"])
        last = int(asked.removeprefix("bytes=-"))
        return f"bytes={max(0, size - last)}-{max(0, size - 1)}"

    @staticmethod
    def _bucket_of(path: str) -> str:
        parts = urllib.parse.urlsplit(path).path.split("/")
        return parts[parts.index("b") + 1] if "b" in parts else parts[1]

    def _record(self, method: str, host: str, target: str, status: int, size: int) -> None:
        path = _origin_form(target)
        name, media = _object_of(path)
        with self._lock:
            self.requests.append(
                Request(method, host, path, name, media and method == "GET", status, size)
            )


def _is_upload(method: str, path: str) -> bool:
    """Whether a request uploads an object's bytes: GCS's uploads (/upload/...), and S3's
    and Azure's puts of a whole object (PUT /BUCKET/NAME, no query: no part or block)."""
    if method in ("POST", "PUT") and path.startswith("/upload/"):
        return True
    return method == "PUT" and "?" not in path and _object_of(path)[0] is not None


def _multipart_as_media(path: str, headers: dict[str, str], body: bytes) -> tuple[str, bytes]:
    """A multipart upload (gcsfs's of a file under its chunk size) as the simple media
    upload of the same object, (path, body), with `headers` set for it: the emulator
    parses a multipart body with Python's email parser, which takes a file's last byte, a CR,
    for part of the line break before the closing boundary and drops it (GCS keeps every
    byte). Other requests are given back as they are."""
    parsed = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(parsed.query)
    boundary = re.search(r'boundary="?([^";]+)"?', headers.get("content-type", ""))
    if query.get("uploadType") != ["multipart"] or boundary is None:
        return path, body
    parts = body.split(b"--" + boundary.group(1).encode())
    fields = []
    for part in parts[1:3]:  # the metadata (JSON), then the object's bytes
        blank = re.search(rb"\r?\n\r?\n", part)
        newline = b"\r\n" if blank.group(0) == b"\r\n\r\n" else b"\n"
        fields.append(part[blank.end() :].removesuffix(newline))
    name = json.loads(fields[0])["name"]
    # As bytes: the emulator would parse a media upload of "application/json" (a JSON
    # file's type) as a request's JSON.
    headers["content-type"] = "application/octet-stream"
    query.pop("uploadType")
    query = {**{k: v[0] for k, v in query.items()}, "uploadType": "media", "name": name}
    return f"{parsed.path}?{urllib.parse.urlencode(query)}", fields[1]


def _is_listing(path: str) -> bool:
    """Whether a GCS request path lists a bucket's objects (/storage/v1/b/B/o?...)."""
    return urllib.parse.urlsplit(path).path.rstrip("/").endswith("/o")


def _beyond_the_end(status: int, content_range: str | None) -> int | None:
    """The object's size, where the emulator answered a range that starts at or past
    its end (206 with `bytes START-END/SIZE`, END < START); else None."""
    if status != 206 or not content_range:
        return None
    spans, _, size = content_range.removeprefix("bytes ").partition("/")
    start, _, end = spans.partition("-")
    if start.isdigit() and end.isdigit() and int(end) < int(start) and size.isdigit():
        return int(size)
    return None


def _origin_form(target: str) -> str:
    if "://" in target:
        parsed = urllib.parse.urlsplit(target)
        return parsed.path + (f"?{parsed.query}" if parsed.query else "")
    return target


def _read_head(stream) -> tuple[str, str, dict[str, str]] | None:
    line = stream.readline(65536)
    if not line.strip():
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers = {}
    while True:
        line = stream.readline(65536)
        if line in (b"\r\n", b"\n", b""):
            break
        key, _, value = line.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    return method, target, headers


def _read_body(stream, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(stream.readline().split(b";")[0], 16)
            if size == 0:
                while stream.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(stream.read(size))
            stream.readline()
    return stream.read(int(headers.get("content-length", 0) or 0))


class Bucket:
    """An emulated bucket behind a proxy; `env()` is what a child process reading it needs."""

    scheme = "gs"

    def __init__(self, folder: Path, name: str = "fast-tfds-test", port: int | None = None):
        """A new emulator and certificates in `folder`; or, given `port`, the emulator
        another process started there (with its certificates in `folder`), behind a proxy
        of this process's own, so that the requests it counts are this process's."""
        self.name = name
        self.folder = folder
        if port is None:
            self.ca, self.cert, self.key = make_certificates(folder / "tls")
            self.emulator = Emulator(name).start()
        else:
            self.ca, self.cert, self.key = (folder / "tls" / n for n in CERTIFICATES)
            self.emulator = Emulator(name, port)
        self.proxy = Proxy(self.emulator.port, self.cert, self.key)

    def behind_own_proxy(self) -> Bucket:
        """The same bucket (its emulator, its objects) behind a new proxy, which a test may
        slow down without a server of its own to start; its requests are its own. Closing
        it closes only that proxy."""
        view = copy.copy(self)
        view.proxy = Proxy(self.emulator.port, self.cert, self.key)
        view.close = view.proxy.close
        return view

    def url(self, *parts: str) -> str:
        return "/".join([f"gs://{self.name}", *parts])

    def env(self) -> dict[str, str]:
        proxy = self.proxy.url
        return {
            # TensorFlow's client, through the proxy's TLS.
            "https_proxy": proxy,
            "HTTPS_PROXY": proxy,
            "no_proxy": "",
            "NO_PROXY": "",
            "CURL_CA_BUNDLE": str(self.ca),
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "test-token",
            "NO_GCE_CHECK": "true",
            # gcsfs and array_record, to the proxy as plain HTTP.
            "STORAGE_EMULATOR_HOST": proxy,
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
            "CLOUD_STORAGE_EMULATOR_ENDPOINT": proxy,
        }

    def upload(self, local: Path, prefix: str) -> int:
        """Uploads every file under `local` to `prefix/...` (JSON API simple uploads,
        straight to the emulator: not counted); the number of files."""
        count = 0
        conn = http.client.HTTPConnection("127.0.0.1", self.emulator.port, timeout=60)
        try:
            for path in sorted(Path(local).rglob("*")):
                if path.is_file():
                    name = f"{prefix}/{path.relative_to(local).as_posix()}"
                    self._put(conn, name, path.read_bytes())
                    count += 1
        finally:
            conn.close()
        return count

    def rewrite(self, name: str, data: bytes) -> str:
        """Uploads `data` as object `name` again (GCS gives it a new generation, as the
        emulator does); the new generation."""
        conn = http.client.HTTPConnection("127.0.0.1", self.emulator.port, timeout=60)
        try:
            self._put(conn, name, data)
            return self.metadata(name, conn)["generation"]
        finally:
            conn.close()

    def version(self, name: str) -> str:
        """What identifies the object's content in the bucket (its generation)."""
        return self.metadata(name)["generation"]

    def metadata(self, name: str, conn: http.client.HTTPConnection | None = None) -> dict:
        """The object's metadata (size, generation, crc32c, ...), straight from the emulator."""
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.emulator.port, timeout=60)
        try:
            conn.request("GET", f"/storage/v1/b/{self.name}/o/{urllib.parse.quote(name, safe='')}")
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200, f"metadata of {name}: HTTP {response.status}"
            return json.loads(body)
        finally:
            if own:
                conn.close()

    def _put(self, conn: http.client.HTTPConnection, name: str, data: bytes) -> None:
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        conn.request(
            "POST",
            f"/upload/storage/v1/b/{self.name}/o?{query}",
            body=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        response = conn.getresponse()
        response.read()
        assert response.status == 200, f"upload of {name}: HTTP {response.status}"

    def names(self, prefix: str) -> list[str]:
        """The names of the objects under `prefix/`, straight from the emulator."""
        conn = http.client.HTTPConnection("127.0.0.1", self.emulator.port, timeout=60)
        try:
            query = urllib.parse.urlencode({"prefix": f"{prefix}/"})
            conn.request("GET", f"/storage/v1/b/{self.name}/o?{query}")
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200, f"listing of {prefix}: HTTP {response.status}"
            return sorted(item["name"] for item in json.loads(body).get("items", []))
        finally:
            conn.close()

    def delete(self, name: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.emulator.port, timeout=60)
        try:
            quoted = urllib.parse.quote(name, safe="")
            conn.request("DELETE", f"/storage/v1/b/{self.name}/o/{quoted}")
            response = conn.getresponse()
            response.read()
            assert response.status in (200, 204), f"delete of {name}: HTTP {response.status}"
        finally:
            conn.close()

    def close(self) -> None:
        self.proxy.close()
        self.emulator.stop()


def child_env(bucket: Bucket, **extra: str) -> dict[str, str]:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    return {**env, **bucket.env(), **extra}
