"""A join without ``select`` merges each pair's payloads (the right's value wins a shared
field). Column by column (``join._merged``) it must give exactly the text the payload by
payload merge gives, or decline; it may not decline payloads it can write."""

from __future__ import annotations

import json
import string

import numpy as np
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.forms.rows import payload_to_json
from cti.operators.join import _merged

NAMES = st.sampled_from(["key", "value", "owner", "a", "Z", "é", 'q"', "k\\"])
PLAIN_TYPES = [st.integers(-2**63, 2**63 - 1), st.booleans(),
               st.text(string.ascii_letters + string.digits + " -:.,{}[]", max_size=8)]
PLAIN = st.one_of(*PLAIN_TYPES)
ANY = st.one_of(PLAIN, st.none(), st.floats(allow_nan=False), st.integers(2**63, 2**70),
                st.text(max_size=4), st.lists(st.integers(), max_size=2),
                st.sampled_from(["2024-01-01T00:00:00", "2024-01-01", "1.5", "true"]))


def _side(draw, values, n: int, same_fields: bool) -> list[str]:
    """``n`` payloads; with ``values`` None, one plain type per field."""
    names = draw(st.lists(NAMES, max_size=4, unique=True))
    typed = {f: draw(st.sampled_from(PLAIN_TYPES)) for f in names}
    out = []
    for _ in range(n):
        fields = names if same_fields else draw(st.lists(NAMES, max_size=4, unique=True))
        out.append(payload_to_json({f: draw(typed[f] if values is None else values)
                                    for f in fields}))
    return out


@st.composite
def pairs(draw, values=ANY, same_fields=None):
    n = draw(st.integers(1, 12))
    same = draw(st.booleans()) if same_fields is None else same_fields
    left, right = _side(draw, values, n, same), _side(draw, values, n, same)
    if draw(st.booleans()):  # repeated payloads, as reference rows repeat
        right = [right[0]] * n
    return np.asarray(left, object), np.asarray(right, object)


def _by_payload(left: np.ndarray, right: np.ndarray) -> list[str]:
    return [payload_to_json({**json.loads(a), **json.loads(b)})
            for a, b in zip(left, right, strict=True)]


@settings(max_examples=examples(300), deadline=None)
@given(pairs())
def test_the_column_merge_writes_what_the_payload_merge_writes_or_declines(case):
    got = _merged(*case)
    assert got is None or got == _by_payload(*case)


@settings(max_examples=examples(100), deadline=None)
@given(pairs(values=None, same_fields=True))
def test_plain_payloads_with_the_same_fields_are_merged_by_column(case):
    assert _merged(*case) == _by_payload(*case)
