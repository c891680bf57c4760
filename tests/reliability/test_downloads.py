"""Downloads that cannot work end in one actionable line after one try; transient ones are
retried a little; a download that is not the registered file is deleted and said so.

Real builders, a real `tfds build`, real HTTP: a misbehaving server on 127.0.0.1
(as the HTTP proxy the builders' real URLs go through, or fetched directly), a
closed port, and `.invalid` host names, which never resolve (RFC 2606).

What "fails at once" means is counted, not timed: the requests the server got, the
name look-ups and connections made, and the pauses between tries (`events`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
import subprocess
import sys
import time

import pytest
import tensorflow_datasets as tfds

import stanford_dogs_tfrecord
from fast_tfds.building import archive_sources, downloads
from fast_tfds.building.archive_sources import DownloadFailedError, SourceChecksumError
from tests import forks
from tests.helpers import TFDS_CLI
from tests.reliability.local_http import LocalServer, closed_port, proxy_env

IMAGES_URL = "http://vision.stanford.edu/aditya86/ImageNetDogs/images.tar"
IMAGES_TAR_SIZE = 793_579_520  # registered in checksums/stanford_dogs_tfrecord.tsv
ENV = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
# TFDS alone tries a name that does not resolve, a refused connection or an HTTP 5xx
# 11 times with pauses in between (~204 s), and waits forever on a server that hangs.
OUR_PAUSES = [
    ("fast_tfds.building.downloads", downloads.RETRY_PAUSE_S * 2**i)
    for i in range(downloads.ATTEMPTS - 1)
]


@dataclasses.dataclass
class Events:
    lookups: list[str]  # host names looked up
    connections: list[tuple]  # addresses connected to
    pauses: list[tuple[str, float]]  # (the module that paused, seconds)


@pytest.fixture
def events(monkeypatch):
    """What the download code did, seen at the standard library calls that every try
    (urllib3's and ours) goes through; each call still does what it does."""
    seen = Events([], [], [])
    lookup, connect, sleep = socket.getaddrinfo, socket.socket.connect, time.sleep

    def spy_lookup(host, *args, **kwargs):
        seen.lookups.append(host)
        return lookup(host, *args, **kwargs)

    def spy_connect(sock, address):
        seen.connections.append(address)
        return connect(sock, address)

    def spy_sleep(seconds):
        seen.pauses.append((sys._getframe(1).f_globals.get("__name__"), seconds))
        return sleep(seconds)

    monkeypatch.setattr(socket, "getaddrinfo", spy_lookup)
    monkeypatch.setattr(socket.socket, "connect", spy_connect)
    monkeypatch.setattr(time, "sleep", spy_sleep)
    return seen


@pytest.fixture
def server(request):
    started = []

    def start(behaviour: str, **kwargs) -> LocalServer:
        started.append(LocalServer(behaviour, **kwargs))
        return started[-1]

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def through_proxy(monkeypatch):
    def use(proxy: str) -> None:
        for name, value in proxy_env(proxy).items():
            monkeypatch.setenv(name, value)

    return use


@pytest.fixture(autouse=True)
def no_proxy_from_outside(monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def build_stanford(tmp_path):
    builder = tfds.builder(stanford_dogs_tfrecord.NAME, config="224", data_dir=tmp_path / "data")
    builder.download_and_prepare(download_dir=tmp_path / "downloads")
    return builder


def assert_one_actionable_line(message: str, url: str, reason: str, filename: str) -> None:
    assert "\n" not in message
    assert f"cannot download {url}: {reason}" in message, message
    assert f"Get {filename} another way, put it in a folder" in message
    # The command works as printed from any folder (tests/reliability/test_advice.py runs it).
    assert "`tfds build stanford_dogs_tfrecord --imports stanford_dogs_tfrecord " in message
    assert " --manual_dir FOLDER`" in message
    assert "download_config=tfds.download.DownloadConfig(manual_dir=FOLDER)" in message


def leftovers(folder) -> list[str]:
    """Files and folders left in TFDS's download dir, but its empty bookkeeping folders."""
    found = []
    for root, dirs, files in os.walk(folder):
        found += [os.path.relpath(os.path.join(root, n), folder) for n in dirs + files]
    return [f for f in found if f not in ("extracted", "stanford_dogs_tfrecord")]


# -- errors no retry can fix: one try, no pause -------------------------------------


@pytest.mark.parametrize(
    "problem, reason",
    [
        ("not_found", "the server answered HTTP 404 Not Found"),
        ("html", "the server sent an HTML page, not the archive"),
        ("refused", "the HTTP proxy 127.0.0.1:{port} refused the connection"),
        ("unresolvable", "the host name of the HTTP proxy proxy.nonexistent.invalid does not"),
    ],
)
def test_a_download_that_cannot_work_fails_after_one_try_in_one_line(
    tmp_path, server, through_proxy, events, problem, reason
):
    port = closed_port()
    if problem == "refused":
        through_proxy(f"http://127.0.0.1:{port}")
    elif problem == "unresolvable":
        through_proxy("http://proxy.nonexistent.invalid:3128")
    else:
        proxy = server(problem)
        through_proxy(proxy.url)

    with pytest.raises(DownloadFailedError) as excinfo:
        build_stanford(tmp_path)

    message = str(excinfo.value)
    assert_one_actionable_line(message, IMAGES_URL, reason.format(port=port), "images.tar")
    assert "(annotation.tar and lists.tar too, if they cannot be downloaded either)" in message
    # Once, and TFDS's retrying download never started: no retry of what cannot change.
    if problem in ("not_found", "html"):
        assert proxy.requests == [IMAGES_URL]
    elif problem == "refused":
        assert events.connections.count(("127.0.0.1", port)) == 1
    else:
        assert events.lookups.count("proxy.nonexistent.invalid") == 1
    assert events.pauses == []
    assert not leftovers(tmp_path / "downloads")
    assert not (tmp_path / "data" / stanford_dogs_tfrecord.NAME / "224" / "1.0.0").exists()


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://archive.nonexistent.invalid/images.tar", "the host name archive.nonexistent"),
        ("http://127.0.0.1:{port}/images.tar", "127.0.0.1:{port} refused the connection"),
    ],
)
def test_a_host_that_does_not_resolve_or_refuses_is_named(tmp_path, events, url, reason):
    port = closed_port()
    url = url.format(port=port)
    dl_manager = tfds.download.DownloadManager(
        download_dir=tmp_path / "downloads", dataset_name="stanford_dogs_tfrecord"
    )
    # What the builder passes: the command that builds it from any folder.
    builder = tfds.builder("stanford_dogs_tfrecord", config="224", data_dir=tmp_path / "data")
    with pytest.raises(DownloadFailedError) as excinfo:
        archive_sources.source_path(
            dl_manager,
            url,
            dataset="stanford_dogs_tfrecord",
            build_command=builder.tfds_build_command(),
        )
    assert_one_actionable_line(str(excinfo.value), url, reason.format(port=port), "images.tar")
    if "invalid" in url:
        assert events.lookups.count("archive.nonexistent.invalid") == 1
    else:
        assert events.connections.count(("127.0.0.1", port)) == 1
    assert events.pauses == []


# -- transient errors: a few tries, then the same one line -------------------------


def test_a_server_error_is_tried_again_then_named(tmp_path, server, through_proxy, events):
    proxy = server("server_error")
    through_proxy(proxy.url)
    with pytest.raises(DownloadFailedError) as excinfo:
        build_stanford(tmp_path)

    # Our tries, with our pauses between them, and none of TFDS's (urllib3's backoff).
    assert proxy.requests == [IMAGES_URL] * downloads.ATTEMPTS
    assert events.pauses == OUR_PAUSES
    assert_one_actionable_line(
        str(excinfo.value),
        IMAGES_URL,
        f"the server answered HTTP 503 Service Unavailable ({downloads.ATTEMPTS} tries)",
        "images.tar",
    )


def test_a_server_that_never_answers_fails_the_tfds_build_in_one_line(tmp_path, server):
    # TFDS sets no timeout: without the check, this build would wait forever.
    proxy = server("hang")
    env = {**ENV, **proxy_env(proxy.url), downloads.TIMEOUT_ENV: "1"}
    command = [*TFDS_CLI, "build", "stanford_dogs_tfrecord", "--imports", "stanford_dogs_tfrecord"]
    command += ["--data_dir", os.fspath(tmp_path / "data"), "--config", "224"]
    # A fork of a server that has imported TensorFlow (`tests.forks`): the proxy and the
    # timeout are read as the build downloads, not as the interpreter starts.
    done = forks.run(command, capture_output=True, text=True, env=env, timeout=300)

    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    errors = [line for line in output.splitlines() if "ERROR: " in line]
    assert len(errors) == 1, errors
    assert errors[0].endswith(
        f"ERROR: stanford_dogs_tfrecord: cannot download {IMAGES_URL}: vision.stanford.edu "
        f"(through the HTTP proxy {proxy.url}) sent nothing for 1 s ({downloads.ATTEMPTS} tries). "
        "Get images.tar another way, put it in a folder (annotation.tar and lists.tar too, "
        "if they cannot be downloaded either) and build with `tfds build stanford_dogs_tfrecord "
        f"--imports stanford_dogs_tfrecord --data_dir {tmp_path / 'data'} --manual_dir FOLDER`, "
        "or in Python pass "
        "download_config=tfds.download.DownloadConfig(manual_dir=FOLDER); a manual-dir "
        "file's checksum is not checked."
    ), errors[0]
    # Each of our tries waited its 1 s once; TFDS's download (no timeout) never started.
    assert proxy.requests == [IMAGES_URL] * downloads.ATTEMPTS


def test_as_fast_dataset_fails_with_the_same_line(tmp_path, server, through_proxy, events):
    proxy = server("not_found")
    through_proxy(proxy.url)
    with pytest.raises(DownloadFailedError) as excinfo:
        stanford_dogs_tfrecord.as_fast_dataset("train", data_dir=tmp_path / "data")
    assert proxy.requests == [IMAGES_URL] and events.pauses == []
    assert_one_actionable_line(
        str(excinfo.value), IMAGES_URL, "the server answered HTTP 404", "images.tar"
    )


# -- the download itself fails ------------------------------------------------------


def test_a_download_cut_short_is_named_and_its_partial_file_removed(
    tmp_path, server, through_proxy
):
    # Same size announced as the registered file: the check lets it through.
    proxy = server("cut", size=IMAGES_TAR_SIZE)
    through_proxy(proxy.url)
    with pytest.raises(DownloadFailedError) as excinfo:
        build_stanford(tmp_path)
    assert_one_actionable_line(
        str(excinfo.value),
        IMAGES_URL,
        "the connection was cut during the download",
        "images.tar",
    )
    assert len(proxy.requests) >= 2  # the check, then TFDS's download
    assert not leftovers(tmp_path / "downloads")  # TFDS's <name>.tmp.<uuid>/ removed


def test_a_download_with_the_wrong_checksum_says_to_use_the_manual_dir(
    tmp_path, server, through_proxy
):
    proxy = server("wrong_bytes")  # no length, not HTML: only the checksum tells
    through_proxy(proxy.url)
    builder = tfds.builder("stanford_dogs_tfrecord", config="224", data_dir=tmp_path / "data")
    with pytest.raises(SourceChecksumError) as excinfo:
        builder.download_and_prepare(download_dir=tmp_path / "downloads")

    # The real URL went through the proxy: TFDS checked the real registered checksum.
    assert IMAGES_URL in proxy.requests
    message = str(excinfo.value)
    assert "\n" not in message
    got = hashlib.sha256(proxy.body).hexdigest()
    assert (
        f"stanford_dogs_tfrecord: the download of {IMAGES_URL} does not match "
        "its registered checksum (expected 793,579,520 bytes, sha256 a443fc2f9a85...; "
        f"got {len(proxy.body):,} bytes, sha256 {got[:12]}...); the rejected download was "
        "deleted: the server or a proxy changed the file"
    ) in message
    assert "Get images.tar another way, put it in a folder and build with" in message
    assert "--manual_dir FOLDER" in message and "checksum is not checked" in message
    assert not leftovers(tmp_path / "downloads")
    assert not builder.is_prepared()


def test_a_file_already_downloaded_is_used_without_the_network(tmp_path, server):
    source = server("file", body=b"PK\x05\x06" + bytes(18))  # an empty zip
    url = f"{source.url}/archive.zip"
    first = tfds.download.DownloadManager(download_dir=tmp_path, dataset_name="some_dataset")
    path = archive_sources.source_path(first, url, dataset="some_dataset")
    source.stop()  # From now on, connections to it are refused.

    again = tfds.download.DownloadManager(download_dir=tmp_path, dataset_name="some_dataset")
    assert archive_sources.source_path(again, url, dataset="some_dataset") == path
    assert path.read_bytes() == b"PK\x05\x06" + bytes(18)


# -- what `tfds build` (any script) shows for such an error --------------------------


def test_an_uncaught_build_error_is_one_line_other_errors_keep_their_traceback():
    # What `fast-tfds` and, under `tfds build`, our builders install
    # (tests/reliability/test_startup.py checks that nothing else does).
    hook = "e.install_excepthook()\n"

    def run(code: str, **env) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", f"import fast_tfds.building.errors as e\n{hook}{code}"],
            capture_output=True,
            text=True,
            env={**ENV, **env},
            timeout=120,
        )

    ours = run("raise e.BuildError('some_dataset: what went wrong. What to do.')")
    assert ours.returncode == 1
    assert ours.stderr == "ERROR: some_dataset: what went wrong. What to do.\n"

    full = run("raise e.BuildError('x')", FAST_TFDS_TRACEBACK="1")
    assert full.returncode == 1 and "Traceback (most recent call last)" in full.stderr

    other = run("raise ValueError('not ours')")
    assert other.returncode == 1
    assert "Traceback (most recent call last)" in other.stderr
    assert other.stderr.endswith("ValueError: not ours\n")
