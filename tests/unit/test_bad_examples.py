"""runtime/bad_examples.py: the budget of undecodable training examples."""

import numpy as np
import pytest

from echoray.runtime.bad_examples import BadExamples

pytestmark = pytest.mark.unit


def test_within_the_budget_they_are_skipped_beyond_it_the_run_fails_naming_five():
    b = BadExamples(n_train=1000, max_bad_fraction=0.004)  # 4 allowed
    v = b.add([(7, "a.png", "truncated"), (3, "b.png", "not an image")])
    assert (v["count"], v["over"]) == (2, False)
    v = b.add([(7, "a.png", "truncated"), (11, "c.png", "truncated"), (12, "d.png", "truncated")])
    assert (v["count"], v["over"]) == (4, False)  # id 7 again (an echo copy, a replay): once
    v = b.add([(13, "e.png", "truncated"), (14, "f.png", "truncated")])
    assert (v["count"], v["over"]) == (6, True)
    assert v["message"] == ("6 undecodable training image(s), more than source.max_bad_fraction=0.004 of 1000 "
                            "allows (4): a.png (truncated); b.png (not an image); c.png (truncated); "
                            "d.png (truncated); e.png (truncated)")
    assert b.ids().tolist() == [3, 7, 11, 12, 13, 14] and b.ids().dtype == np.int64
    assert b.shown_files() == ["a.png", "b.png", "c.png", "d.png", "e.png"]


def test_with_no_budget_the_first_one_is_over():
    v = BadExamples(n_train=50).add([(0, "x.png", "truncated")])
    assert v["over"] and v["count"] == 1
