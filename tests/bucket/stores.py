"""S3 and Azure on loopback, beside the emulated GCS bucket (`emulated`), behind the same
`Proxy` (which counts every request and can delay or drop them): moto's S3 server and
Azurite (Azure Blob Storage). Each is one `Store` with the emulated GCS bucket's face:
`url(...)`, `env()` for a child process that reads it, `upload`, `rewrite`, `delete`,
`proxy`, `close`.

The readers find the store through each client's usual settings, never an argument:
s3fs takes `AWS_ENDPOINT_URL` and the AWS_* credentials from the environment, adlfs
`AZURE_STORAGE_CONNECTION_STRING`. Objects are put straight to the server (not counted
by the proxy), through boto3 (moto's dependency) and the Azure SDK (adlfs').

Azurite is the npm package `azurite`, which `scripts/test.sh` installs into `.azurite/`
of the clone (`AZURITE`); where it is not there the Azure tests skip, and with CI=true
the run fails instead.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.bucket.emulated import (
    AZURITE_ACCOUNT,
    START_TIMEOUT_S,
    EmulatorUnavailable,
    Proxy,
    _wait_for_port,
    end_server,
    free_port,
)
from tests.helpers import REPO

# What scripts/test.sh installs (npm install --prefix .azurite azurite@VERSION).
AZURITE = REPO / ".azurite" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's well-known development account (its documentation publishes the key).
AZURE_ACCOUNT = AZURITE_ACCOUNT
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class Store:
    """A server of one store's API in a child process, behind a counting `Proxy`."""

    scheme: str

    def __init__(self, folder: Path, name: str = "fast-tfds-test", port: int | None = None):
        """A new server, run from `folder`; or, given `port`, the server another process
        started, behind a proxy of this process's own (as `emulated.Bucket`'s)."""
        self.name = name
        self.folder = folder
        self.process: subprocess.Popen | None = None
        if port is not None:
            self.port = port
            self.proxy = Proxy(self.port)
            return
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.process = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder
        )
        try:
            _wait_for_port(self.port, START_TIMEOUT_S, self.process)
            self.create()
        except BaseException:
            self.stop()
            raise
        self.proxy = Proxy(self.port)

    def command(self) -> list[str]:
        raise NotImplementedError

    def create(self) -> None:
        """Makes the bucket (container)."""
        raise NotImplementedError

    def url(self, *parts: str) -> str:
        return "/".join([f"{self.scheme}://{self.name}", *parts])

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def put(self, name: str, data: bytes) -> None:
        raise NotImplementedError

    def delete(self, name: str) -> None:
        raise NotImplementedError

    def upload(self, local: Path, prefix: str) -> int:
        """Uploads every file under `local` to `prefix/...`; the number of files."""
        count = 0
        for path in sorted(Path(local).rglob("*")):
            if path.is_file():
                self.put(f"{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())
                count += 1
        return count

    def rewrite(self, name: str, data: bytes) -> str:
        """Uploads `data` as object `name` again, so that the store says it changed (as
        a new upload of a shard would); its new version (`version`)."""
        self.put(name, data)
        return self.version(name)

    def version(self, name: str) -> str:
        """What identifies the object's content in the store (its ETag)."""
        raise NotImplementedError

    def names(self, prefix: str) -> list[str]:
        """The names of the objects under `prefix/`, straight from the server."""
        raise NotImplementedError

    def stop(self) -> None:
        """Ends the server (and with it every object): the store is gone. (A server another
        process started is left running.)"""
        if self.process is not None:
            end_server(self.process)

    def close(self) -> None:
        if hasattr(self, "proxy"):
            self.proxy.close()
        self.stop()


class S3Bucket(Store):
    """moto's S3 server (`moto[server]`), in memory."""

    scheme = "s3"

    def command(self) -> list[str]:
        try:
            import moto.server  # noqa: F401
        except ImportError as error:
            raise EmulatorUnavailable(f"moto[server] is not installed: {error}") from None
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def _client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{self.port}",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def create(self) -> None:
        self._client().create_bucket(Bucket=self.name)

    def env(self) -> dict[str, str]:
        return {**S3_CREDENTIALS, "AWS_ENDPOINT_URL": self.proxy.url}

    def put(self, name: str, data: bytes) -> None:
        self._client().put_object(Bucket=self.name, Key=name, Body=data)

    def delete(self, name: str) -> None:
        self._client().delete_object(Bucket=self.name, Key=name)

    def rewrite(self, name: str, data: bytes) -> str:
        # The same bytes put again keep their ETag (their MD5): S3 says nothing changed.
        # Uploaded in parts (here one), the ETag is the parts' MD5s' MD5, suffixed "-1":
        # the object is new to the store, as a shard uploaded anew by another tool.
        client = self._client()
        upload = client.create_multipart_upload(Bucket=self.name, Key=name)["UploadId"]
        part = client.upload_part(
            Bucket=self.name, Key=name, UploadId=upload, PartNumber=1, Body=data
        )
        client.complete_multipart_upload(
            Bucket=self.name,
            Key=name,
            UploadId=upload,
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
        )
        return self.version(name)

    def version(self, name: str) -> str:
        return self._client().head_object(Bucket=self.name, Key=name)["ETag"]

    def names(self, prefix: str) -> list[str]:
        listed = self._client().list_objects_v2(Bucket=self.name, Prefix=f"{prefix}/")
        return sorted(item["Key"] for item in listed.get("Contents", []))

    @contextlib.contextmanager
    def authenticating(self) -> Iterator[dict[str, str]]:
        """moto's own checking of every request's access key and signature (as S3's), on
        for the block, then off again; yields the credentials (AWS_* variables) of an IAM
        user that may read and write the bucket. moto checks nothing by default; its
        `/moto-api/reset-auth` switches the running server (after 0 more requests): all
        its readers', so a server of the test's own (`own_store`), never the run's, which
        other xdist workers read meanwhile. The user is made through moto's IAM API while
        nothing is checked yet."""
        if not hasattr(self, "_user"):
            import boto3

            iam = boto3.client(
                "iam",
                endpoint_url=f"http://127.0.0.1:{self.port}",
                **{k.lower(): v for k, v in S3_CREDENTIALS.items() if "KEY" in k},
                region_name=S3_CREDENTIALS["AWS_DEFAULT_REGION"],
            )
            iam.create_user(UserName="reader")
            allow = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
            allow += '"Action": "s3:*", "Resource": "*"}]}'
            iam.put_user_policy(UserName="reader", PolicyName="s3", PolicyDocument=allow)
            key = iam.create_access_key(UserName="reader")["AccessKey"]
            self._user = {
                **S3_CREDENTIALS,
                "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
            }
        self._checks_after("0")
        try:
            yield dict(self._user)
        finally:
            self._checks_after("inf")

    def _checks_after(self, requests: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("POST", "/moto-api/reset-auth", body=requests.encode())
            response = conn.getresponse()
            response.read()
            assert response.status == 200, f"moto's reset-auth: HTTP {response.status}"
        finally:
            conn.close()


class AzureContainer(Store):
    """Azurite's blob service, in memory (`--inMemoryPersistence`)."""

    scheme = "az"

    def command(self) -> list[str]:
        if not AZURITE.exists():
            raise EmulatorUnavailable(f"Azurite is not installed in {AZURITE.parent.parent}")
        return [
            str(AZURITE),
            *("--blobHost", "127.0.0.1", "--blobPort", str(self.port)),
            *(
                "--inMemoryPersistence",
                "--silent",
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
            ),
        ]

    def connection_string(self, port: int) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};AccountKey={AZURE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{AZURE_ACCOUNT};"
        )

    def _container(self):
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient.from_connection_string(self.connection_string(self.port))
        return service.get_container_client(self.name)

    def create(self) -> None:
        self._container().create_container()

    def env(self) -> dict[str, str]:
        return {"AZURE_STORAGE_CONNECTION_STRING": self.connection_string(self.proxy.port)}

    def put(self, name: str, data: bytes) -> None:
        self._container().upload_blob(name, data, overwrite=True)

    def delete(self, name: str) -> None:
        self._container().delete_blob(name)

    def version(self, name: str) -> str:
        # Every write of a blob gives it a new ETag, the same bytes' included.
        return self._container().get_blob_client(name).get_blob_properties().etag

    def names(self, prefix: str) -> list[str]:
        return sorted(self._container().list_blob_names(name_starts_with=f"{prefix}/"))


def azurite_required() -> bool:
    """With CI=true, a missing Azurite fails the run instead of skipping its tests."""
    return os.environ.get("CI", "").lower() == "true"
