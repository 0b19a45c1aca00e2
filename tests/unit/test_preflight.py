"""preflight.require_fits: the one check that train, tune and bench-input make before Ray
could wait silently for resources a local machine does not have."""

import pytest

from echoray.config_load import ConfigError
from echoray.preflight import require_fits

pytestmark = pytest.mark.unit


def test_a_demand_within_the_machine_passes():
    require_fits({"CPU": 2.0, "memory": 1e9}, "one trial", "; lower scaling.*", {"CPU": 2.0, "memory": 2e9})
    require_fits({"CPU": 0.0, "GPU": 0.0}, "one trial", "; lower scaling.*", {"CPU": 2.0})


def test_a_shortfall_is_bad_input_naming_what_and_how_much():
    with pytest.raises(ConfigError) as err:
        require_fits({"CPU": 3.0, "GPU": 1.0}, "the actor pool", "; lower preprocess.actors.*", {"CPU": 2.0})
    assert str(err.value) == ("the actor pool needs more than this machine has (CPU: needs 3, cluster has 2, "
                              "GPU: needs 1, cluster has 0); lower preprocess.actors.*")
