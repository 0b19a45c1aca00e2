"""Whether an autoscaler can add nodes to the connected cluster (runtime/placement.py and
the shared-storage rule in storage/fs.py ask). No echoray import: both sides use it."""

from __future__ import annotations

import json
import re

import ray

# A v1 monitor without a cluster config (plain `ray start --head`) reports every node as
# its own read-only type named after the node id.
_READ_ONLY_TYPE = re.compile(r"node_[0-9a-f]{56}")


def autoscaler_can_add_nodes() -> bool:
    """Whether an autoscaler manages the connected cluster (Ray must be initialized).

    Ray has no public API for this: ray.autoscaler.sdk only requests resources, and
    ray.nodes / ray.cluster_resources / ray.util.state list what exists, not what can be
    added. The v2 SDK (ray.autoscaler.v2.sdk, outside ray._private) answers for `ray up`
    clusters; a KubeRay cluster's worker groups and a v1 monitor's report are read from
    the GCS the way Ray itself reads them (ray._private.state, used by Ray Data's own
    autoscaler; the v1 monitor's status key, read by `ray status`)."""
    gcs = ray.get_runtime_context().gcs_address
    try:  # autoscaler v2 (the default for `ray up` since Ray 2.50) reports its state to the GCS
        from ray.autoscaler.v2.sdk import get_cluster_status

        if int(get_cluster_status(gcs).stats.autoscaler_version or 0) > 0:
            return True
    except Exception:  # noqa: BLE001 - no v2 state: look for the other kinds
        pass
    import ray._private.state as state

    try:  # KubeRay publishes its worker groups
        config = state.state.get_cluster_config()
        if config and any(g.max_count != 0 for g in config.node_group_configs):
            return True
    except Exception:  # noqa: BLE001
        pass
    from ray._private import ray_constants
    from ray.experimental.internal_kv import _internal_kv_get

    raw = _internal_kv_get(ray_constants.DEBUG_AUTOSCALING_STATUS)
    return v1_status_can_add_nodes(raw.decode() if raw else None)


def v1_status_can_add_nodes(raw_status: str | None) -> bool:
    """A v1 monitor with a cluster config names node types from it; a read-only one does not."""
    if not raw_status:
        return False
    report = json.loads(raw_status).get("autoscaler_report") or {}
    types = set((report.get("node_type_mapping") or {}).values()) | set(report.get("pending_launches") or {})
    return any(not _READ_ONLY_TYPE.fullmatch(t) for t in types)
