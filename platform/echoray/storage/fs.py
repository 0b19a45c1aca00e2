"""Where data and checkpoints live: a local folder, a shared mount, or an object store URI.

Object stores are reached through pyarrow's filesystems with nothing configured here:
credentials, endpoint and region come from the standard environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3, AWS_REGION, or an instance
profile on AWS). pyarrow's S3 filesystem reads AWS_ENDPOINT_URL(_S3) itself (checked with
pyarrow 25 against a local S3 server), so the same run works on AWS, MinIO or the tests'
server. Ray's processes need the same variables: a local Ray inherits the driver's
environment; for `ray job submit` pass them in the job's runtime env (docs/how-to/object-storage.md).

This module turns an unusable location into one line naming the config key and the URI
(a missing bucket, denied credentials, an unreachable endpoint) before anything starts.

An S3 filesystem opened here has bounded waits: a connection attempt gives up after
CONNECT_TIMEOUT_S and a request after REQUEST_TIMEOUT_S without a byte (the AWS SDK's
curl low-speed limit), so a store that accepts connections but never answers (a frozen
server) fails a request in seconds instead of hanging it; pyarrow's own retries are off
(one try per call) and retry.RetryPolicy decides what is tried again and for
how long (TrainConfig.store_retry_s).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow.fs as pafs

# Filesystem types (as /proc/mounts names them) that other nodes can mount too.
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph",
              "glusterfs", "fuse.glusterfs", "fuse.cephfs", "fuse.s3fs", "fuse.gcsfuse",
              "fuse.juicefs", "fuse.mountpoint-s3", "efs", "9p")


# The AWS SDK's defaults (1 s connect, 3 s request) with more room to connect across a WAN.
CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S = 5.0, 3.0


class StorageError(ValueError):
    """A storage location that cannot be used; the message names the key and the URI."""


def is_uri(path: str) -> bool:
    """An object store or other remote filesystem URI (file:// and plain paths are local)."""
    return "://" in path and not path.startswith("file://")


def endpoint() -> str:
    return (os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            or "the provider's default endpoint")


def describe(exc: BaseException, uri: str, key: str) -> str:
    """One line for an object store error: what is wrong and what to check."""
    text = str(exc)
    if any(code in text for code in ("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")):
        why = ("access denied: check the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or "
               "the instance profile) and their permissions on the bucket")
    elif "NETWORK_CONNECTION" in text or "curlCode" in text or "Could not connect" in text:
        why = f"cannot reach the object store at {endpoint()} (AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3)"
    elif "NO_SUCH_BUCKET" in text or "NoSuchBucket" in text:
        why = "the bucket does not exist"
    else:
        why = text.splitlines()[0] if text else type(exc).__name__
    return f"{key} {uri}: {why}"


def open_location(uri: str, key: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and path for `uri` (local paths made absolute). For an object
    store, its bucket is checked (one HEAD request): a missing bucket, denied credentials or
    an unreachable endpoint fail here, naming `key` and `uri`, instead of as a missing folder
    or in the middle of a run."""
    if not is_uri(uri):
        uri = os.path.abspath(uri.removeprefix("file://"))
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        fs = bounded(fs, uri)
    except (pafs.ArrowInvalid, OSError, ValueError) as exc:  # type: ignore[attr-defined]
        raise StorageError(f"{key} {uri}: cannot open: {exc}") from None
    if is_uri(uri):
        bucket = path.split("/", 1)[0]
        try:
            info = fs.get_file_info(bucket)
        except OSError as exc:
            raise StorageError(describe(exc, uri, key)) from None
        if info.type == pafs.FileType.NotFound:
            raise StorageError(f"{key} {uri}: the bucket {bucket!r} does not exist (at {endpoint()})")
    return fs, path


def bounded(fs: pafs.FileSystem, uri: str, attempts: int = 1) -> pafs.FileSystem:
    """An S3 filesystem like `fs` (the options from_uri resolved: region, the endpoint of
    AWS_ENDPOINT_URL, credentials) with the module's timeouts and `attempts` tries per call
    (1: retry.py decides). Other filesystems are returned as they are."""
    return with_s3_options(fs, connect_timeout=CONNECT_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S,
                           retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=attempts))


def with_s3_options(fs: pafs.FileSystem, **changes) -> pafs.FileSystem:
    """An S3 filesystem like `fs` with `changes` to its options; other filesystems as they are."""
    if fs.type_name != "s3":
        return fs
    # S3FileSystem's pickle arguments are its options; the constructor alone would not read
    # AWS_ENDPOINT_URL (from_uri does), so they are carried over rather than rebuilt.
    return pafs.S3FileSystem(**{**fs.__reduce__()[1][0], **changes})


def upload_folder(fs: pafs.FileSystem, local_dir: Path, dest: str) -> None:
    """Every file under `local_dir` to `dest` on `fs`, one output stream per file, closed
    here so that a failed upload raises. pafs.copy_files ignores an upload that fails at
    close (pyarrow 25: "Error ignored when destroying file" after a part upload timed out
    against a frozen store, measured; copy_files then returned as if it had succeeded).
    `dest` and its subfolders are made first, as copy_files made them (a local or mounted
    `dest` needs them; on an object store they are no objects of their own)."""
    fs.create_dir(dest)
    for p in sorted(local_dir.rglob("*")):
        rel = p.relative_to(local_dir).as_posix()
        if p.is_dir():
            fs.create_dir(f"{dest}/{rel}")
        else:
            with fs.open_output_stream(f"{dest}/{rel}") as out:
                out.write(p.read_bytes())


def checkpoint_location(storage_path: str | None, run_dir: Path) -> str:
    """Where Ray Train keeps this run's checkpoints: `train.storage_path/<run folder name>`
    (runs sharing a bucket never share a folder), or, by default, the run folder itself."""
    if not storage_path:
        return str((run_dir / "ray").resolve())
    base = storage_path.rstrip("/")
    if not is_uri(base):
        base = os.path.abspath(base.removeprefix("file://"))
    return f"{base}/{run_dir.resolve().name}"


def network_mount(path: str, partitions: Iterable[tuple[str, str]]) -> str | None:
    """The filesystem type of the mount holding `path` when it is a network one, else None.
    `partitions`: (mountpoint, fstype) pairs, as psutil.disk_partitions(all=True) gives."""
    path = os.path.abspath(path)
    best = ("", "")
    for mountpoint, fstype in partitions:
        inside = path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")
        if inside and len(mountpoint) > len(best[0]):
            best = (mountpoint, fstype)
    fstype = best[1].lower()
    return fstype if fstype in NETWORK_FS or fstype.startswith("fuse.") else None


def unshared_storage(location: str, *, nodes: int, can_add_nodes: bool, declared_shared: bool,
                     partitions: Iterable[tuple[str, str]]) -> str | None:
    """Why checkpoints at `location` would be lost or unreadable on this cluster, or None.

    A local folder serves a single node. With more than one node, or an autoscaler that
    can add some (cluster.yaml scales from zero, so one node at start proves nothing), a
    restarted worker on another node must read what the dead one wrote: the folder must be
    an object store, a network mount, or declared shared (`train.storage_shared: true`).
    """
    if is_uri(location) or declared_shared or (nodes <= 1 and not can_add_nodes):
        return None
    if network_mount(location, partitions):
        return None
    where = f"{nodes} nodes" if nodes > 1 else "an autoscaler that can add nodes"
    return (f"train.storage_path {location}: a local folder, but this cluster has {where}; checkpoints "
            "must be readable from every node. Set train.storage_path to an object store URI "
            "(s3://bucket/runs) or a shared mount, or train.storage_shared=true if this path is "
            "shared storage on every node")


def mounted_partitions() -> list[tuple[str, str]]:
    import psutil

    return [(p.mountpoint, p.fstype) for p in psutil.disk_partitions(all=True)]


def require_shared_storage(location: str, checkpoint_every: int, declared_shared: bool) -> None:
    """Refuse (StorageError) checkpoints in a folder other nodes cannot read; Ray must be up."""
    if not checkpoint_every or is_uri(location) or declared_shared:
        return
    import ray

    from echoray.runtime.autoscaler import autoscaler_can_add_nodes

    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    problem = unshared_storage(location, nodes=nodes, can_add_nodes=nodes <= 1 and autoscaler_can_add_nodes(),
                               declared_shared=declared_shared, partitions=mounted_partitions())
    if problem:
        raise StorageError(problem)
