"""The calibrated constants of the CPU cost model (see "Calibration" in docs/cost-model.md)."""
from __future__ import annotations

#: Images whose bounding box holds at most this many cells are counted exactly.
EXACT_CELLS = 1 << 16
#: Fraction of a cache a tile may fill before conflicts evict it.
FIT = 0.75
#: Register micro-kernel: fraction of the port-model rate reached (loop overhead, C loads/stores).
KERNEL_EFF = 0.9
#: gcc-vectorised innermost loop: fraction of peak (loads and stores of every operand each iteration).
EFF_VECTOR = 0.4
#: Vectors' worth of time a vectorised loop loses per execution (set-up, remainder checks):
#: a loop of T vectors runs at T / (T + VECTOR_STARTUP) of EFF_VECTOR.
VECTOR_STARTUP = 3.0
#: Innermost reduction loop: fraction of one scalar FMA pipe used by the dependent chain.
EFF_REDUCTION = 0.3
#: Scalar (strided, unvectorised) innermost loop: fraction of one scalar FMA pipe.
EFF_SCALAR = 0.5
#: Cycles of an FMA's latency (Skylake..Sapphire Rapids, Zen 3/4: 4).
FMA_LATENCY = 4.0
#: Cycles an accumulator's next FMA issues after its previous result is due, on average: the
#: scheduler does not always pick the ready FMA at once (loads and broadcasts compete).  Measured
#: on Zen 5 (gcc 12, AVX-512, one thread): 8 chains on 2 pipes reach 95.5% of peak in a pure FMA
#: loop (4 chains 50%, 6 chains 75%: the 4-cycle latency), 10 or more chains lose nothing.
CHAIN_SLACK = 0.2
#: Loads per cycle the register micro-kernel sustains (its A broadcasts and B vectors).
LOAD_PORTS = 2.0
#: Share of L1's load bandwidth (the descriptor's, per core and cycle) the micro-kernel's operand loads
#: sustain: its column vectors and row broadcasts, ``nr/V`` vectors and ``mr`` elements per step.  Fitted
#: on SGEMM (Xeon VM with AVX-512, 128 B/cycle, interleaved with numpy, exploratory): blocks of 2 or 3
#: rows, 21-33 bytes per multiply-add, ran 0.80-0.88x of the 6-14-row ones beside them (1500^3: 3x48
#: 255, 6x32 296, 8x32 289 GFLOP/s median), which the port count above called equal.  (4x32, 270, is
#: bound by the FMA latency, 8 accumulators: blocks of 4 rows or more stay below this term.)
OPERAND_FEED = 0.3
#: Seconds per entry into an OpenMP parallel region (fork + join barrier).
OMP_REGION_S = 3e-6
#: Independent vector accumulations a plain vectorised loop needs per step of its
#: reduction loop to hide the store-to-load forwarding + FMA latency.
VECTOR_CHAINS = 8.0
#: Widest vector gcc's auto-vectoriser uses (-mprefer-vector-width=256 on AVX-512 parts).
PLAIN_VECTOR_BYTES = 32
#: Page size: a cache whose sets span at most a page (sets * line <= page, the
#: virtually indexed L1) maps addresses to sets by their page offset, so the
#: set conflicts of power-of-two strides are predictable there.
PAGE_BYTES = 4096
