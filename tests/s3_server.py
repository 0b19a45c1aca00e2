"""A real S3-protocol server for the tests: `moto_server` (moto[server], a test dependency)
as its own process on 127.0.0.1, stopped by its process group at the end.

Authentication is on: the server first creates an IAM user with an S3 policy and an
access key, then requires a valid signature on every request, so wrong credentials are
refused (403) as AWS or MinIO would refuse them. The code under test sees only the
standard AWS variables of `env` (credentials, AWS_ENDPOINT_URL, AWS_REGION).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from helpers import free_port

REGION = "us-east-1"
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


class S3Server:
    def __init__(self, log: Path):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "w")
        moto = Path(sys.executable).parent / "moto_server"
        self.proc = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(self.port)], stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_up(120)
        self.env = self._user_with_access_key()

    def _wait_up(self, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.3)
        raise TimeoutError(f"moto_server on {self.endpoint} did not come up in {timeout_s} s")

    def _user_with_access_key(self) -> dict[str, str]:
        import boto3

        anon = {"endpoint_url": self.endpoint, "region_name": REGION, "aws_access_key_id": "setup",
                "aws_secret_access_key": "setup"}
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="echoray")
        iam.put_user_policy(UserName="echoray", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="echoray")["AccessKey"]
        # From now on every request must be signed with a key the server knows.
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                     headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(req, timeout=30).read()
        return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION}

    def filesystem(self):
        import pyarrow.fs as pafs

        e = self.env
        return pafs.S3FileSystem(access_key=e["AWS_ACCESS_KEY_ID"], secret_key=e["AWS_SECRET_ACCESS_KEY"],
                                 endpoint_override=self.endpoint, region=REGION, allow_bucket_creation=True,
                                 allow_bucket_deletion=True)

    def make_bucket(self, name: str) -> str:
        self.filesystem().create_dir(name)
        return f"s3://{name}"

    def upload(self, local: Path, uri: str) -> str:
        """A local file or folder to s3://bucket/prefix (the same relative layout)."""
        import pyarrow.fs as pafs

        pafs.copy_files(str(local), uri.removeprefix("s3://"), source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=self.filesystem())
        return uri

    def keys(self, uri: str) -> list[str]:
        """Every object under s3://bucket/prefix, as keys relative to it."""
        import pyarrow.fs as pafs

        root = uri.removeprefix("s3://").rstrip("/")
        infos = self.filesystem().get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        return sorted(i.path[len(root) + 1:] for i in infos if i.type == pafs.FileType.File)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def without_aws(env: dict) -> dict:
    """An environment with none of the AWS settings (a process that must get them otherwise)."""
    return {k: v for k, v in env.items() if k not in AWS_VARS}
