"""A trial whose shared stream's hub is gone stops with StreamClosed, which its run ends
as KILLED (run.py), not as a failure of its own: a SIGTERMed search's driver kills its
hubs before Ray's SIGTERM reaches every trial (tune/share_consumer.py StreamClosed)."""

import numpy as np
import pytest
import ray

from echoray.tune.share_consumer import SharedStream, StreamClosed


@ray.remote(num_cpus=0)
class OneBlockHub:
    """The StreamHub calls a trial makes, with one block to give and then nothing."""

    def __init__(self):
        self.given = 0

    def attach(self, trial):
        return 0

    def take(self, trial, wait_s):
        self.given += 1
        if self.given == 1:
            return "block", [ray.put({"sample_id": np.arange(4)})], 4
        return "wait", [], 0

    def detach(self, trial, used, reason):
        return None


def test_a_killed_hub_stops_the_trial_with_stream_closed_naming_it(local_ray):
    hub = OneBlockHub.remote()
    blocks = SharedStream(hub, "r0-t3").blocks(quota_rows=100, stall_timeout_s=600)
    assert next(blocks)["sample_id"].tolist() == [0, 1, 2, 3]
    ray.kill(hub)
    with pytest.raises(StreamClosed, match="trial r0-t3: its shared preprocessing stream was closed"):
        next(blocks)

