"""The worker loop's ports (worker/ports.py): every implementation the platform passes to
WorkerEnv offers each of the port's methods, and an object missing one does not pass."""

from echoray.accounting.consumed import ConsumedLog
from echoray.config_load import load_config
from echoray.data.sources import index_source
from echoray.recovery.faults import Checkpointer
from echoray.train.lm_eval import make_evaluator
from echoray.train.local_run import LocalCollector
from echoray.worker.link import CollectorLink, LocalLink
from echoray.worker.ports import CheckpointPort, CollectorPort, EvaluatorPort


def test_the_links_the_evaluators_and_the_checkpointer_fill_their_ports():
    cfg = load_config(None, ["source.limit=64"])
    idx = index_source(cfg.source)
    assert isinstance(LocalLink(LocalCollector()), CollectorPort)
    assert isinstance(CollectorLink(handle=None), CollectorPort)  # no call is made until it is used
    assert isinstance(make_evaluator(cfg, idx, 0, 1), EvaluatorPort)
    assert isinstance(Checkpointer(cfg, idx, None, 0, 1, ConsumedLog()), CheckpointPort)


def test_an_object_missing_a_method_is_not_a_port():
    class SendsOnly:
        def send(self, method, *args, **kwargs):
            pass

        def ask(self, method, *args, **kwargs):
            return None

    assert not isinstance(SendsOnly(), CollectorPort)  # no beat, no live_factor
    assert not isinstance(LocalCollector(), CollectorPort)  # the collector itself is not a link
    assert not isinstance(LocalCollector(), EvaluatorPort) and not isinstance(object(), CheckpointPort)
