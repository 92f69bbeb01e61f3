"""The optimiser on a whole C file: every region extracted, optimised and spliced back into the file's bytes.

:func:`optimize_regions` returns the new bytes and a :class:`~.region.RegionResult`
per region; :func:`optimize_c` the new text.  Every byte outside the regions is
kept.  With ``cache`` (:func:`optimize_c`'s default, ``polytile opt``'s), a file
optimised before from the same input with the same options is served from the
``opt`` cache (:mod:`.result_cache`) instead of being optimised again.  A file
whose regions have parallel loops also gets, at its top, the helper that picks
each parallel region's thread count (:mod:`polytile.codegen.c_threads`).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ..codegen.c_threads import THREADS_PRELUDE, needs_threads_prelude
from ..errors import ScheduleError, SourceLocation
from ..frontends.c import CFrontendError
from ..frontends.c import extract, splice
from ..scheduling import FUSION, Step
from . import result_cache
from .region import RegionResult, optimize_region
from .machine import CMachine, machine as machine_of


def _load_steps(schedule: Any) -> Optional[List[Step]]:
    """Steps from a saved schedule (path, JSON document or list of steps)."""
    if schedule is None:
        return None
    from ..scheduling.saved import read_schedule_file, schedule_steps

    doc = read_schedule_file(schedule) if isinstance(schedule, (str, Path)) else schedule
    return list(schedule_steps(doc))


def optimize_regions(path, *, tile: bool = True, parallel: bool = True, fusion: str = "smart",
                     hardware: Any = "host", params: Optional[Mapping[str, int]] = None, schedule: Any = None,
                     skip_nonaffine: bool = False, assume_no_alias: bool = False,
                     function: Optional[str] = None, reassociate: bool = False, pure: Sequence[str] = (),
                     cpp_args: Sequence[str] = (), cache: bool = False) -> Tuple[bytes, List[RegionResult]]:
    """The optimised file's bytes and what happened to each region (with ``function``: that function's body).

    With ``cache``, a result kept in the ``opt`` cache for the same input and
    options is returned instead of optimising again (and a new one is kept):
    its regions then carry their text and notes but no ``schedule``
    (:mod:`polytile.c_optimiser.result_cache`).
    """
    if fusion not in FUSION:
        raise ScheduleError(f"unknown fusion choice {fusion!r}; use one of {', '.join(FUSION)}")
    # extract() reads the file first: a missing file or a directory is a located user error there.
    regions = extract(path, function=function, params=params, skip_nonaffine=skip_nonaffine,
                      assume_no_alias=assume_no_alias, reassociate=reassociate, pure=pure, cpp_args=cpp_args)
    raw = Path(path).read_bytes()
    if not regions:
        return raw, []
    machine = machine_of(hardware) if tile else CMachine()
    steps = _load_steps(schedule)
    key = None
    if cache:
        options = {"tile": tile, "parallel": parallel, "fusion": fusion, "skip_nonaffine": skip_nonaffine,
                   "assume_no_alias": assume_no_alias, "function": function, "reassociate": reassociate,
                   "pure": [str(n) for n in pure],
                   "params": [[str(k), int(v)] for k, v in (params or {}).items()]}
        key = result_cache.key_for(path, raw, cpp_args, machine=machine, steps=steps, options=options)
        hit = result_cache.lookup(key, path, regions)
        if hit is not None:
            return hit
    results = [optimize_region(cs, tile=tile, parallel=parallel, fusion=fusion, machine=machine, steps=steps)
               for cs in regions]
    reps = [(r.cscop, r.text) for r in results if r.text is not None]
    out = splice(raw, reps) if reps else raw
    added = "".join(_generated_part(cs, text) for cs, text in reps)
    if any(needs_threads_prelude(text) for _, text in reps):
        # The parallel loops' thread count (a helper at file scope: regions sit inside functions).
        out = THREADS_PRELUDE.encode() + out
        added += THREADS_PRELUDE
    _check_generated_names(path, raw, added, regions)
    if key is not None:
        result_cache.store(key, path, out, results)
    return out, results


def optimize_c(path, *, tile: bool = True, parallel: bool = True, fusion: str = "smart", hardware: Any = "host",
               params: Optional[Mapping[str, int]] = None, schedule: Any = None, skip_nonaffine: bool = False,
               assume_no_alias: bool = False, function: Optional[str] = None, reassociate: bool = False,
               pure: Sequence[str] = (), cpp_args: Sequence[str] = (), cache: bool = True) -> str:
    """The C file ``path`` with every ``#pragma scop`` region optimised (tiled, parallel, vectorised).

    With ``function``, that function's body is the region instead (``polytile opt --function``).

    By default every reduction keeps its order of evaluation, so the output
    computes bitwise the same values as the original -- when both are built
    with ``-ffp-contract=off`` (otherwise GCC may contract ``a * b + c`` into
    an FMA in one loop structure and not in the other; see
    :data:`polytile.c_runner.DEFAULT_FLAGS`).  ``reassociate=True``
    lets the schedule reorder the updates of reductions (``s += e``,
    ``s -= e``, ``s *= e`` whose ``e`` never reads the updated cell): loops
    over them may be tiled and interchanged, and a reduction into a scalar
    is vectorised with one partial sum per lane.  Results then differ by
    rounding; for sums of n terms the error bound grows like n * eps *
    sum(|terms|).

    ``params`` fixes parameters (the output is then only valid for those
    values; a fixed macro, like a macro cpp expanded from a header or a
    ``-D``, is guarded in the output with ``#if N != value`` / ``#error``);
    ``pure`` names functions the statements may call besides math.h's and
    those declared ``__attribute__((const))``/``((pure))``; ``cpp_args``
    are preprocessor options (``["-I", "utilities", "-DSMALL_DATASET"]``)
    -- build the output with the same ones; ``schedule`` (a file saved by ``polytile schedule -o`` or a list
    of steps) replaces the automatic choices for every region; regions the
    frontend cannot model raise, or are left untouched with
    ``skip_nonaffine=True``.  Bytes outside the regions are unchanged, except
    the thread-count helper put at the top of a file with parallel loops
    (``num_threads(pt_threads())``: idle cores, capped by ``OMP_NUM_THREADS``);
    a file without regions comes back byte-identical.

    A file optimised before from the same input (its bytes and what the
    preprocessor makes of it) with the same options comes from the ``opt``
    cache (``POLYTILE_CACHE_DIR``) unless ``cache=False``.
    """
    out, _ = optimize_regions(path, tile=tile, parallel=parallel, fusion=fusion, hardware=hardware, params=params,
                              schedule=schedule, skip_nonaffine=skip_nonaffine, assume_no_alias=assume_no_alias,
                              function=function, reassociate=reassociate, pure=pure, cpp_args=cpp_args,
                              cache=cache)
    return out.decode("utf-8", errors="surrogateescape")


_GENERATED_NAME = re.compile(r"\bpt_\w+")


def _generated_part(cs, text: str) -> str:
    """``text`` (a region's replacement) without what the file itself wrote into it: the statements (and
    the parts of them register blocks and reductions spell out), hoisted declarations and replayed loop
    headers, the original statements run where the context's assumptions fail.  What remains names only what
    polytile generated."""
    own = list(cs.declarations) + [cs.final_values, cs.original]
    for st in cs.scop.statements if cs.scop is not None else ():
        own += [st.c_text or ""] + [p for p in (st.c_update or ()) + (st.c_reduction or ()) if isinstance(p, str)]
    for piece in sorted((p for p in own if p and len(p) > 2), key=len, reverse=True):
        text = text.replace(piece, " ")
    return text


def _check_generated_names(path, raw: bytes, added: str, regions) -> None:
    """Refuse a file that names something the generated code also declares (``pt_threads``, ``pt_i0``,
    ...): the generated name would shadow the file's inside a region, or clash with it at file scope
    (``int pt_threads = 3;`` made the output fail to compile).  Loop counters pick names of their own
    (codegen.c.fresh_counter_prefix); these are fixed.

    >>> # int pt_threads = 3;  ->  k.c:1:5: the file names pt_threads, which polytile's generated code defines
    """
    taken = set().union(*(cs.taken for cs in regions))
    clash = sorted(set(_GENERATED_NAME.findall(added)) & taken)
    if not clash:
        return
    text = raw.decode("utf-8", "replace")
    at = re.search(rf"\b{re.escape(clash[0])}\b", text)
    loc = None
    if at is not None:  # the file's first mention, shown with a caret like the frontend's own errors
        start = text.rfind("\n", 0, at.start()) + 1
        end = text.find("\n", at.start())
        loc = SourceLocation(str(path), text.count("\n", 0, at.start()) + 1, at.start() - start + 1,
                             text[start:end if end >= 0 else len(text)])
    raise CFrontendError(f"the file names {', '.join(clash)}, which polytile's generated code defines too "
                         "(every name it generates begins with pt_); rename it in the file", loc, "generated name")
