"""What the C frontend hands back: :class:`CScop` (one extracted region) and :class:`CParam`.

Also what a driver does with regions: :func:`splice` puts replacement text
in place of their bytes in the original file, :func:`guard_text` writes the
``#if``/``#error`` guards of the macros generated code depends on (see
:meth:`CScop.wrap`), and :func:`show` prints a region for reading.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence, Tuple, Union

from polytile.isl_parts import maps_of
from polytile.poly.scop import Scop

from .source import CFrontendError


@dataclass(frozen=True)
class CParam:
    """A parameter of the function holding the region (for drivers that call it).

    ``kind`` is ``int``, ``float``, ``array`` (arrays and pointers) or
    ``other``; ``dims`` are the C texts of an array's extents (``None`` where
    C does not say, e.g. the first extent of ``double (*A)[m]``).
    """

    name: str
    kind: str
    dtype: Optional[str]
    dims: Tuple[Optional[str], ...] = ()
    restrict: bool = False


@dataclass(frozen=True, eq=False)
class CScop:
    """One extracted region.

    ``start``/``end`` are byte offsets in the original file: from the start
    of the ``#pragma scop`` line to the end of the ``#pragma endscop`` line
    (function mode: from the first statement after the leading declarations
    to the closing brace, or to a final ``return``).  ``scop`` is None when
    the region is ``skipped`` (``reason`` says why); the caller then leaves
    its bytes untouched.
    """

    scop: Optional[Scop]
    path: str
    function: str
    start: int
    end: int
    lines: Tuple[int, int]
    iterators: Tuple[str, ...] = ()  # C names of the region's loop iterators
    scalars: Tuple[str, ...] = ()  # scalars assigned in the region (0-d arrays of the Scop)
    params: Tuple[str, ...] = ()  # parameters left symbolic (isl parameters of the Scop)
    fixed: Mapping[str, int] = field(default_factory=dict)  # parameters substituted by value
    macros: Mapping[str, int] = field(default_factory=dict)  # integer macros of the file and their values
    declarations: Tuple[str, ...] = ()  # declarations made inside the region, hoisted by wrap()
    signature: Tuple[CParam, ...] = ()
    notes: Tuple[str, ...] = ()
    skipped: bool = False
    reason: str = ""
    # integer macros whose value is baked into the optimised code, with that value (see wrap)
    guards: Tuple[Tuple[str, int], ...] = ()
    taken: frozenset = frozenset()  # every identifier of the file (generated names must avoid them)
    # scalars of ``scalars`` whose final value the function never reads (declared in the region, or locals
    # named nowhere outside it): a transform may leave them at any value (see _Extractor.dead_after)
    dead_after: Tuple[str, ...] = ()
    # the C type each scalar is declared with (``unsigned long``, a typedef name), for generated copies
    scalar_types: Mapping[str, str] = field(default_factory=dict)
    # C code to run after the generated code: leaves the loop iterators the function may still read at
    # their final values (the generated code binds its own; see _Extractor.final_values)
    final_values: str = ""
    # C conditions the Scop's context assumes and the code does not show (``n >= 1`` for a function
    # argument that sizes a loop), and the region's statements as written: see wrap
    assumptions: Tuple[str, ...] = ()
    original: str = ""
    # parameters of an unsigned C type: the generated code reads them as long (see wrap)
    unsigned_params: Tuple[str, ...] = ()

    def wrap(self, code: str) -> str:
        """The replacement for bytes ``[start, end)``: the hoisted declarations, ``code``, then the loop
        iterators' final values (:attr:`final_values`).

        Generated code binds the iterators itself (``const long i = c0;``), so
        only declarations made *inside* the region need to be repeated.  Each
        macro of :attr:`guards` gets an ``#if``/``#error`` pair first: the
        code was generated for that value only.  isl computes with integers,
        so ``code`` reads each unsigned parameter (:attr:`unsigned_params`)
        as a ``long`` copy of the same name (``n - 2`` in a loop bound is -1
        at ``n = 1``, not 2^32 - 1; statements cast it back, see
        ``typed_sizes``).  Where the context assumes what the program may
        break (:attr:`assumptions`: a call ``f(0, A)`` of a function whose
        loops run to ``n``), ``code`` runs only where the assumptions hold, and
        the region's original statements elsewhere (declarations too: a VLA
        sized by ``n`` is declared only where ``n >= 1``).

        >>> print(CScop(None, "k.c", "f", 0, 0, (1, 1), assumptions=("n >= 1",), unsigned_params=("n",),
        ...             original="  A[0] = 1;").wrap("  S;"))
        {
        if (n >= 1)
        {
        const long pt_sp_n = (long)(n);
        {
        const long n = pt_sp_n;
          S;
        }
        }
        else
        {
          A[0] = 1;
        }
        }
        <BLANKLINE>
        """
        code = code.rstrip("\n")
        if self.unsigned_params:
            copies = "".join(f"const long pt_sp_{p} = (long)({p});\n" for p in self.unsigned_params)
            shadows = "".join(f"const long {p} = pt_sp_{p};\n" for p in self.unsigned_params)
            code = f"{copies}{{\n{shadows}{code}\n}}"
        body = [f"  {d}" for d in self.declarations] + [code] + ([self.final_values.rstrip("\n")]
                                                                 if self.final_values else [])
        if self.assumptions:
            inner = "\n".join(body)
            return (guard_text(self.guards) + f"{{\nif ({' && '.join(self.assumptions)})\n{{\n{inner}\n}}\nelse\n"
                    f"{{\n{self.original.rstrip()}\n}}\n}}\n")
        return guard_text(self.guards) + "{\n" + "\n".join(body) + "\n}\n"


def guard_text(guards: Sequence[Tuple[str, int]]) -> str:
    """``#if NAME != value`` / ``#error`` / ``#endif`` for each baked macro.

    >>> print(guard_text([("N", 120)]), end="")
    #if N != 120
    #error "polytile opt: this file was optimised for N=120; re-run polytile opt"
    #endif
    """
    return "".join(f"#if {name} != {value}\n#error \"polytile opt: this file was optimised for {name}={value}; "
                   f"re-run polytile opt\"\n#endif\n" for name, value in guards)


def splice(source: Union[bytes, str], replacements: Sequence[Tuple[CScop, str]]) -> bytes:
    """``source`` (the original file's bytes) with each region's bytes replaced by its text."""
    raw = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    spans = sorted(replacements, key=lambda r: r[0].start)
    for (a, _), (b, _) in zip(spans, spans[1:]):
        if b.start < a.end:
            raise CFrontendError(f"regions at lines {a.lines[0]} and {b.lines[0]} overlap")
    for cs, text in reversed(spans):
        if cs.skipped:
            continue
        raw = raw[:cs.start] + text.encode("utf-8", "surrogateescape") + raw[cs.end:]
    return raw


def show(cscop: CScop) -> str:
    """A readable dump of a region: parameters, arrays, statements with domains and accesses (isl text)."""
    lines = [f"region {cscop.path}:{cscop.lines[0]}-{cscop.lines[1]} in {cscop.function}() "
             f"(bytes {cscop.start}..{cscop.end})"]
    if cscop.skipped:
        lines.append("  skipped: " + cscop.reason.replace("\n", "\n  "))
        return "\n".join(lines)
    scop = cscop.scop
    if cscop.params:
        lines.append(f"  parameters: {', '.join(cscop.params)}   context: {scop.context}")
    if cscop.assumptions:
        lines.append(f"  assumed, tested at run time (else the region runs as written): "
                     f"{' && '.join(cscop.assumptions)}")
    if cscop.fixed:
        lines.append("  fixed: " + ", ".join(f"{k}={v}" for k, v in sorted(cscop.fixed.items())))
    if cscop.declarations:
        lines.append("  hoisted declarations: " + " ".join(cscop.declarations))
    lines.append("  arrays:")
    for a in scop.arrays:
        shape = "x".join("?" if d < 0 else str(d) for d in a.shape) or "scalar"
        lines.append(f"    {a.name:<10} {a.dtype:<8} {shape}")
    lines.append("  statements:")
    for s in scop.statements:
        where = f" (line {s.loc.line})" if s.loc is not None else ""
        lines.append(f"    {s.name}{where}: {s.c_text}")
        lines.append(f"      domain: {s.domain}")
        lines.append(f"      write:  {s.write_map()}")
        for m in maps_of(s.reads()):
            lines.append(f"      read:   {m}")
    lines.append(f"  schedule: {scop.schedule.get_map()}")
    for n in cscop.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)
