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

import os
import subprocess
import sys
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

    def __init__(self, folder: Path, name: str = "fast-tfds-test"):
        self.name = name
        self.folder = folder
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

    def stop(self) -> None:
        """Ends the server (and with it every object): the store is gone."""
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


def azurite_required() -> bool:
    """With CI=true, a missing Azurite fails the run instead of skipping its tests."""
    return os.environ.get("CI", "").lower() == "true"
