"""What the C optimiser reads from a hardware descriptor: one small frozen record.

The passes (:mod:`.tiling`, :mod:`.register_blocks`) size tiles by the L2
cache, register blocks by the vector register file and price work by the clock
(:mod:`.team`).  They get these facts
as a :class:`CMachine` made once per file (:func:`machine`), never by reading
the descriptor themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

from ..errors import PolytileError

#: Rows of a register block: four rows of running values, each row loading its
#: operand of the row loop once per reduction step for ``NR`` columns.
BLOCK_ROWS = 4
#: Independent updates a core needs in flight to keep its FMA units busy: latency 4 cycles x 2 units.
FMA_CHAINS = 8
#: The widest vector the C compilers use for plain C on x86: GCC and Clang prefer 256-bit vectors
#: on AVX-512 cores by default (``-mprefer-vector-width=256``), so a block sized for 512-bit
#: registers would spill.
C_VECTOR_BYTES = 32


@dataclass(frozen=True)
class CMachine:
    """The facts of a descriptor the C optimiser uses.

    >>> CMachine(l2_bytes=2 << 20, vector_registers=32, vector_bytes=32).block(8)
    (4, 16)
    """

    l2_bytes: int = 1 << 20
    vector_registers: int = 16
    vector_bytes: int = 32
    #: Clock in GHz, to the nearest 0.5 (the ``host`` descriptor reads the current frequency, which
    #: moves; the record is part of the ``opt`` cache key).
    ghz: float = 3.0

    def lanes(self, item_bytes: int) -> int:
        """Elements of ``item_bytes`` bytes in one vector as the C compilers use it."""
        return max(1, self.vector_bytes // max(1, item_bytes))

    def block(self, item_bytes: int) -> Tuple[int, int]:
        """``(MR, NR)`` of a register block of ``item_bytes`` elements: ``MR`` rows of ``NR`` columns,
        ``NR`` whole vectors, the ``MR * NR / lanes`` running values taking at most half the vector
        registers (the rest hold the operands).  On AVX-512 (32 registers, 256-bit as compiled):
        4 x 16 doubles; AVX2 (16): 4 x 8.  A 4 x 16 block ran PolyBench's gemm fastest of the shapes
        measured (4 x 8 to 8 x 16, 4 x 32; benchmarks/README.md)."""
        vectors_per_row = max(1, min(4, self.vector_registers // 2 // BLOCK_ROWS))
        return BLOCK_ROWS, vectors_per_row * self.lanes(item_bytes)

    def line(self, item_bytes: int, vectors: bool) -> int:
        """Cells of a register block along one loop: enough independent updates in flight to cover
        the FMA latency (``FMA_CHAINS``: 4 cycles on 2 units).  Along a loop every access walks with
        unit stride the cells pack into vectors: ``FMA_CHAINS`` vectors (within half the registers),
        32 doubles on AVX2 and AVX-512 as compiled; across rows they stay scalars: ``FMA_CHAINS`` cells.

        >>> CMachine(vector_registers=32, vector_bytes=32).line(8, vectors=True), CMachine().line(8, vectors=False)
        (32, 8)
        """
        if not vectors:
            return FMA_CHAINS
        return max(1, min(FMA_CHAINS, self.vector_registers // 2)) * self.lanes(item_bytes)

    def as_dict(self) -> Dict[str, float]:
        """The facts as a dict (part of the ``opt`` cache key)."""
        return {"l2_bytes": self.l2_bytes, "vector_registers": self.vector_registers,
                "vector_bytes": self.vector_bytes, "ghz": self.ghz}


def machine(hardware: Any) -> CMachine:
    """The :class:`CMachine` of a descriptor, preset name or file (defaults when None or not a CPU).

    >>> machine("x86-avx2").vector_registers
    16
    """
    if hardware is None:
        return CMachine()
    try:
        from .. import hardware as hw_mod

        hw = hw_mod.load(hardware)
        levels = hw.cache_levels()
        l2 = next((lv.size_bytes for lv in levels if lv.name.casefold() == "l2"), None)
        if l2 is None and levels:
            l2 = levels[min(1, len(levels) - 1)].size_bytes
        regs = getattr(hw, "vector_registers", None)
        simd = getattr(hw, "simd_bytes", None)
        ghz = getattr(hw, "clock_ghz", None)
    except PolytileError:
        raise
    except Exception:  # pragma: no cover - a descriptor without the usual levels
        return CMachine()
    default = CMachine()
    return CMachine(l2_bytes=int(l2 or default.l2_bytes),
                    vector_registers=int(regs or default.vector_registers),
                    vector_bytes=min(int(simd or default.vector_bytes), C_VECTOR_BYTES),
                    ghz=max(0.5, round(2 * float(ghz)) / 2) if ghz else default.ghz)
