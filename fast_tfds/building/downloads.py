"""A quick look at a source URL before TFDS downloads it, to fail in seconds when it cannot work.

TFDS 4.9.10 downloads with `requests` and urllib3's `Retry(total=10,
backoff_factor=0.2)`: it retries a host name that does not resolve, a refused
connection or an HTTP 5xx ten times with exponential backoff, about 3.5 minutes
before the error comes, and it sets no timeout, so a server that accepts the
connection and then says nothing makes the build wait forever. Changing that
would mean patching TFDS's downloader for every dataset in the process.

Instead `check_url` makes one streamed GET of the URL itself, with timeouts,
through the same `requests` (so the same proxy variables and certificates), and
reads only the first bytes. Problems no retry can fix (the name does not
resolve, the connection is refused, HTTP 4xx, an HTML page where an archive
should be, a size other than the registered one) fail at once; transient ones
(a timeout, HTTP 5xx, a reset connection) get `ATTEMPTS` tries a few seconds
apart. `describe` puts any download exception into the same few words.
"""

from __future__ import annotations

import errno
import socket
import time
import urllib.parse

import requests
import urllib3

from fast_tfds.core.options import env_seconds

# Seconds to wait for the connection, and then for each answer from the server.
TIMEOUT_ENV = "FAST_TFDS_DOWNLOAD_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0
# Tries for a transient problem, `RETRY_PAUSE_S * 2**i` apart.
ATTEMPTS = 3
RETRY_PAUSE_S = 2.0
# urllib3 >= 2 names a failed lookup; below that only socket.gaierror says it.
_NAME_NOT_RESOLVED = tuple(
    e for e in (getattr(urllib3.exceptions, "NameResolutionError", None), socket.gaierror) if e
)
# Enough of the body to tell an archive from an HTML page.
_SNIFF_BYTES = 512


class DownloadProblem(Exception):
    """Why a URL cannot be downloaded, in a few words; `transient` if a retry may help."""

    def __init__(self, reason: str, transient: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.transient = transient

    def __str__(self) -> str:
        return self.reason


def timeout_s() -> float:
    """FAST_TFDS_DOWNLOAD_TIMEOUT, else 30 s; a one-line ValueError for a bad value."""
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


def check_url(url: str, expected_size: int | None = None) -> None:
    """Raises DownloadProblem if a download of `url` cannot give the registered file."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        return  # gs://, ftp://, local paths: TFDS's own file copy.
    for attempt in range(ATTEMPTS):
        try:
            _probe(url, expected_size, timeout_s())
            return
        except DownloadProblem as problem:
            if not problem.transient or attempt == ATTEMPTS - 1:
                if problem.transient and ATTEMPTS > 1:
                    problem.reason += f" ({ATTEMPTS} tries)"
                raise
        time.sleep(RETRY_PAUSE_S * 2**attempt)


def _probe(url: str, expected_size: int | None, timeout: float) -> None:
    try:
        with (
            requests.Session() as session,
            session.get(url, stream=True, timeout=(timeout, timeout)) as response,
        ):
            if response.status_code != 200:  # What TFDS's downloader requires.
                code = response.status_code
                raise DownloadProblem(
                    f"the server answered HTTP {code} {response.reason or ''}".rstrip(),
                    transient=code >= 500 or code == 429,
                )
            first = response.raw.read(_SNIFF_BYTES, decode_content=True)
            length = response.headers.get("Content-Length")
            encoded = response.headers.get("Content-Encoding", "identity") != "identity"
    except requests.exceptions.SSLError:
        # TFDS may be told not to verify certificates (DownloadConfig(verify_ssl=False)),
        # which this check cannot see: let TFDS's own download decide.
        return
    except requests.RequestException as err:
        raise describe(err, timeout) from None
    if first.lstrip()[:1] == b"<":  # An archive never starts with markup.
        raise DownloadProblem(
            "the server sent an HTML page, not the archive (a proxy's or a login page?)"
        )
    if expected_size and length and length.isdigit() and not encoded:
        if int(length) != int(expected_size):
            raise DownloadProblem(
                f"the server offers {int(length):,} bytes where the registered file has "
                f"{int(expected_size):,}: not the registered file (a proxy's page, a moved file?)"
            )


def describe(err: BaseException, timeout: float | None = None) -> DownloadProblem:
    """What a download exception (from requests, urllib3, TFDS or the OS) means, in a few words."""
    chain = list(_causes(err))
    proxy = any(
        isinstance(c, requests.exceptions.ProxyError | urllib3.exceptions.ProxyError) for c in chain
    )
    url = _url_of(err)
    # The host:port requests was fetching.
    server = (urllib.parse.urlsplit(url).netloc if url else None) or "the server"
    proxied = _proxy_for(url)
    if proxied and not proxy:  # Who stays silent: the proxy, or the server behind it.
        server = f"{server} (through the HTTP proxy {proxied})"
    # urllib3's connection errors know where they tried to connect: the server,
    # or the proxy (whose failures requests reports as ProxyError).
    conn = next((c.conn for c in chain if getattr(getattr(c, "conn", None), "host", None)), None)
    where = f"{conn.host}:{conn.port}" if conn is not None else server
    where = f"the HTTP proxy {where}" if proxy else where
    for cause in chain:
        if isinstance(cause, _NAME_NOT_RESOLVED):
            name = conn.host if conn is not None else server
            of_proxy = "of the HTTP proxy " if proxy else ""
            return DownloadProblem(
                f"the host name {of_proxy}{name} does not resolve (no network, or no DNS)"
            )
        if isinstance(cause, ConnectionRefusedError):
            return DownloadProblem(f"{where} refused the connection")
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return DownloadProblem(f"no route to {where} (no network?)")
    for cause in chain:
        if isinstance(cause, requests.exceptions.ProxyError):
            return DownloadProblem("the HTTP proxy failed the request")
        if isinstance(cause, requests.exceptions.SSLError):
            return DownloadProblem("the TLS certificate check failed (a proxy that intercepts?)")
        if isinstance(cause, requests.exceptions.ConnectTimeout):
            wait = f" within {timeout:g} s" if timeout else ""
            return DownloadProblem(f"no connection to {server}{wait}", True)
        if isinstance(cause, requests.exceptions.ReadTimeout | TimeoutError):
            wait = f" for {timeout:g} s" if timeout else ""
            return DownloadProblem(f"{server} sent nothing{wait}", True)
        if isinstance(cause, requests.exceptions.RetryError):
            return DownloadProblem("the server kept answering with an error (HTTP 5xx)", True)
        if isinstance(
            cause,
            requests.exceptions.ChunkedEncodingError
            | urllib3.exceptions.ProtocolError
            | ConnectionResetError,
        ):
            return DownloadProblem("the connection was cut during the download", True)
    first_line = (str(err).splitlines() or [""])[0][:200]
    return DownloadProblem(f"{type(err).__name__}: {first_line}")


def _causes(err: BaseException):
    """err, what it wraps (requests keeps urllib3's error in args, urllib3 in .reason)."""
    seen, todo = set(), [err]
    while todo:
        cause = todo.pop(0)
        if cause is None or id(cause) in seen:
            continue
        seen.add(id(cause))
        yield cause
        todo += [cause.__cause__, cause.__context__, getattr(cause, "reason", None)]
        todo += [arg for arg in getattr(cause, "args", ()) if isinstance(arg, BaseException)]


def _url_of(err: BaseException) -> str | None:
    """The URL requests was fetching, if the error says."""
    return getattr(getattr(err, "request", None), "url", None)


def _proxy_for(url: str | None) -> str | None:
    """The proxy the environment sets for `url`, if any."""
    if not url:
        return None
    proxies = requests.utils.get_environ_proxies(url)
    return proxies.get(urllib.parse.urlsplit(url).scheme) or proxies.get("all")
