"""Typed schedule-tree marks (polytile/scheduling/marks.py): encode and decode are exact inverses.

Every kind round-trips (hypothesis over its fields), today's literal mark texts decode to the
values the code generators expect, text that no mark encodes to is refused with an
InternalError, and the marks of a real schedule tree all decode and re-encode to the same text.
"""
from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import polytile
from polytile.errors import InternalError
from polytile.scheduling import core
from polytile.scheduling.marks import (KINDS, NO_LOOP, Dim, Local, Pack, Parallel, Reduction, RegTile, Simd, Unroll, decode,
                                       encode)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
ops = st.sampled_from(["+", "*", "max", "min"]) | st.from_regex(r"[a-z+*|&^-]{1,3}", fullmatch=True)
reductions = st.lists(st.builds(Reduction, ops, names), max_size=4).map(tuple)
counts = st.integers(min_value=1, max_value=10 ** 6)
naturals = st.integers(min_value=0, max_value=10 ** 6)

marks = st.one_of(
    st.builds(Parallel, reductions),
    st.builds(Simd, reductions),
    st.builds(Unroll, counts),
    # Two different loops; a role may be absent (NO_LOOP, size 1): a block along one loop.
    st.tuples(naturals, names, counts, names, counts, counts).filter(lambda t: t[1] != t[3]).map(
        lambda t: RegTile(t[0], t[1], 1 if t[1] == NO_LOOP else t[2], t[3], 1 if t[3] == NO_LOOP else t[4], t[5])),
    st.builds(Pack, names, naturals, counts),
    st.builds(Local, names),
    st.builds(Dim, naturals),
)


@given(marks)
def test_round_trip(mark):
    text = encode(mark)
    assert decode(text) == mark
    assert encode(decode(text)) == text
    assert text.split(" ")[0] == mark.keyword and type(mark) is KINDS[mark.keyword]


@given(marks)
def test_from_arg_is_decode_of_the_keyword_and_arg(mark):
    assert type(mark).from_arg(mark.arg()) == mark  # how the tree reads a schedule's regtile argument


def test_from_arg_of_another_kind_is_refused():
    with pytest.raises(InternalError):
        RegTile.from_arg("B 1 32")


# Mark texts as the schedule tree writes them (polytile/scheduling/tree.py) and the code generators read them.
LITERALS = [
    ("parallel", Parallel()),
    ("parallel +:C,max:M", Parallel((Reduction("+", "C"), Reduction("max", "M")))),
    ("simd", Simd()),
    ("simd +:pt_acc0", Simd((Reduction("+", "pt_acc0"),))),
    ("simd *:s", Simd((("*", "s"),))),
    ("unroll 4", Unroll(4)),
    ("regtile 1 i=8 j=32 16", RegTile(1, "i", 8, "j", 32, 16)),
    ("regtile 0 i=6 co=16 8", RegTile(reduction_loops=0, rows="i", mr=6, cols="co", nr=16, lanes=8)),
    ("regtile 1 i=8 _=1 1", RegTile(1, "i", 8, NO_LOOP, 1, 1)),
    ("regtile 1 _=1 p=32 4", RegTile(1, NO_LOOP, 1, "p", 32, 4)),
    ("pack B 1 32", Pack("B", 1, 32)),
    ("pack A 0 8", Pack(array="A", dim=0, block=8)),
    ("local T_1", Local("T_1")),
    ("dim 0", Dim(0)),
    ("dim 13", Dim(13)),
]


@pytest.mark.parametrize("text,mark", LITERALS, ids=[t for t, _ in LITERALS])
def test_literal_texts(text, mark):
    assert decode(text) == mark
    assert encode(mark) == text


def test_reduction_fields():
    m = decode("parallel +:C,max:M")
    assert [(r.op, r.array) for r in m.reductions] == [("+", "C"), ("max", "M")]
    assert [tuple(r) for r in decode("simd").reductions] == []
    assert hash(Parallel([("+", "C")])) == hash(Parallel((Reduction("+", "C"),)))  # lists become tuples


@pytest.mark.parametrize("text", [
    "", "foo", "foo 1", "Parallel", "parallel ", " parallel", "parallel  +:C", "parallel +:C,", "parallel +C",
    "parallel :C", "parallel +:1C", "parallel +:C max:M", "simd +:", "unroll", "unroll 0", "unroll 04", "unroll -1",
    "unroll x", "unroll 4 ", "regtile 1 i=8 j=32", "regtile 1 i=8 j=32 0", "regtile i=8 j=32 16 1",
    "pack B 1", "pack B x 32", "pack B 1 0", "pack 1 1 32", "local", "local A B", "local 1A", "dim", "dim -1",
    "dim 1.0", "dim 01", "dim 3\n",
])
def test_unknown_text_is_refused(text):
    with pytest.raises(InternalError, match="mark"):
        decode(text)


@pytest.mark.parametrize("build", [
    lambda: Unroll(0), lambda: Unroll(True), lambda: Unroll("4"), lambda: Dim(-1), lambda: Local("A B"),
    lambda: Local("1A"), lambda: Pack("B", 1, 0), lambda: RegTile(1, "i", 8, "j=", 32, 16),
    lambda: RegTile(1, "_", 8, "j", 32, 4), lambda: RegTile(1, "i", 8, "i", 32, 4), lambda: RegTile(1, "_", 1, "_", 1, 1),
    lambda: Parallel((("+", "C D"),)), lambda: Parallel((("+:", "C"),)), lambda: Simd("+:s"),
    lambda: Simd((("+",),)),
])
def test_fields_that_no_text_holds_are_refused(build):
    with pytest.raises(InternalError):
        build()


def test_encode_refuses_other_values():
    with pytest.raises(InternalError):
        encode("parallel")


def test_schedule_mark_kinds_are_the_keywords():
    assert (core.PARALLEL, core.SIMD, core.UNROLL, core.REGTILE, core.PACK) == \
        (Parallel.keyword, Simd.keyword, Unroll.keyword, RegTile.keyword, Pack.keyword)


def _mark_texts(tree: isl.Schedule):
    texts = []

    def visit(node):
        if node.get_type() == isl.schedule_node_type.mark:
            texts.append(node.mark_get_id().get_name())
        return True

    tree.get_root().foreach_descendant_top_down(visit)
    return texts


def test_marks_of_a_real_tree_decode():
    s = polytile.schedule(EXAMPLES / "matmul.tile", dims="M=70,N=100,K=50")
    s = s.tile("S0", i=[32, 8], j=[64, 32], k=[16])
    s = s.reorder("S0", ["i_t", "j_t", "k_t", "j_t1", "i_t1", "k", "i", "j"])
    s = s.regtile("S0", "i", "j", mr=8, nr=32, lanes=16).pack("S0", "k_t", "B", dim=1, block=32)
    s = s.parallel("S0", "i_t").unroll("S0", "k_t", 2)
    texts = _mark_texts(s.tree())
    decoded = [decode(t) for t in texts]
    assert [encode(m) for m in decoded] == texts
    kinds = {type(m) for m in decoded}
    assert {Parallel, Unroll, RegTile, Pack, Dim} <= kinds
    assert RegTile(1, "i", 8, "j", 32, 16) in decoded and Pack("B", 1, 32) in decoded
    assert "[regtile 1 i=8 j=32 16]" in s.describe()
