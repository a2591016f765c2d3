"""Memory limits: sizes parsed, requests refused up front with what they would need."""

from __future__ import annotations

import math

import pytest

from crowdagg.core import memory
from crowdagg.errors import ResourceError, UsageError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4G", 4 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", 1.5 * 2**30), ("100MB", 100 * 2**20),
     ("2048", 2048.0), (10**9, 1e9), ("none", math.inf), ("inf", math.inf), (None, None)],
)
def test_parse_size(text, expected):
    assert memory.parse_size(text) == expected


@pytest.mark.parametrize("text", ["lots", "-1G", "0", "4X", True, "nan"])
def test_parse_size_refuses_nonsense(text):
    with pytest.raises(UsageError, match="max_memory"):
        memory.parse_size(text)


def test_check_refuses_with_the_size_and_the_cause():
    with pytest.raises(ResourceError) as exc:
        memory.check(5 * 2**30, "200 workers × 1,000² classes", "1G")
    msg = str(exc.value)
    assert msg.startswith("this needs ~5.00 GB (200 workers × 1,000² classes)")
    assert "1.00 GB" in msg and "max_memory" in msg
    assert "--max-memory" in exc.value.render(lambda n: "--" + n.replace("_", "-"))
    memory.check(2**20, "small", "1G")  # fits: no error
    memory.check(1e30, "anything", "none")


def test_default_limit_is_a_fraction_of_available_memory(monkeypatch):
    assert memory.available_bytes() > 0  # the real reading (it moves as other processes allocate)
    # a fixed reading, so that a busy machine cannot change it between two calls
    monkeypatch.setattr(memory, "available_bytes", lambda: 3 * 2**30)
    limit, how = memory.limit_bytes(None)
    assert limit == memory.DEFAULT_FRACTION * 3 * 2**30
    assert how == "80% of the 3.00 GB available"


_N = 20_000
_JSON_DOCUMENTS = {  # the shapes that cost the most per byte, and a worker model's
    "empty lists": "[" + ",".join(["[]"] * _N) + "]",
    "empty objects": "[" + ",".join(["{}"] * _N) + "]",
    "nested lists": "[" + ",".join(["[[]]"] * _N) + "]",
    "one-number lists": "[" + ",".join(["[0]"] * _N) + "]",
    "short floats": "[" + ",".join(["1.5"] * _N) + "]",
    "big integers": "[" + ",".join(["123456789012"] * _N) + "]",
    "short strings": "[" + ",".join(['"ab"'] * _N) + "]",
    "astral strings": "[" + ",".join(['"\U0001F600x"'] * _N) + "]",
    "escaped astral strings": "[" + ",".join(['"\\ud83d\\ude00"'] * _N) + "]",
    "one large object": "{" + ",".join(f'"k{i}":0' for i in range(_N)) + "}",
    "small objects": "[" + ",".join(['{"a":[]}'] * _N) + "]",
    "model-like": '{"counts": [' + ",".join(["[[0.12345678901234567, 1e-10], [3.5, 0.25]]"] * _N) + "]}",
}


@pytest.mark.parametrize("kind", list(_JSON_DOCUMENTS))
@pytest.mark.parametrize("as_bytes", [True, False])
def test_json_parse_bytes_bounds_what_parsing_takes(kind, as_bytes):
    """The estimate is above the measured peak of json.loads (tracemalloc), and not wildly so."""
    import json
    import tracemalloc

    from crowdagg.core.memory import json_parse_bytes

    text = _JSON_DOCUMENTS[kind]
    given = text.encode() if as_bytes else text
    tracemalloc.start()
    doc = json.loads(given)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del doc
    assert peak < json_parse_bytes(given) < 8 * peak
