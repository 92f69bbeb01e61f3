"""How many full-width FMAs a core issues per cycle, from the CPU's vendor, family and model.

``/proc/cpuinfo`` shows which vector instructions a core accepts (``avx512f``)
but not how wide the units that execute them are.  Two machines with the same
flags can differ by 2x in peak:

* Intel server cores (Skylake-SP to Granite Rapids) have two 512-bit FMA
  units; the client cores with AVX-512 (Ice Lake, Tiger Lake, Rocket Lake)
  have one (ports 0 and 1 fused into one 512-bit unit).
* AMD Zen 4 accepts AVX-512 but executes each 512-bit operation on its two
  256-bit FMA pipes together: one 512-bit FMA per cycle.  Zen 5 has full-width
  512-bit pipes on its desktop, server and Strix Halo parts, and 256-bit ones
  (the Zen 4 arrangement) on Strix Point and Krackan.

A descriptor counts FMA units of its ``simd_width_bits``, so a Zen 4 core is
``simd_width_bits = 512, fma_units_per_core = 1``: the same 32 fp32 flops per
cycle as two 256-bit units, and the right peak for a roofline.

Model numbers are CPUID's (family 6 for these Intel cores; 0x19 Zen 3/4,
0x1A Zen 5 for AMD; 0x17 Zen 1 and 2), as the Linux kernel and LLVM's host detection list them.
A hypervisor may report another model than the part it runs on (a KVM guest on a
Sapphire Rapids host seen as model A7h, Rocket Lake, with a 2 MiB L2 and AMX): the
AMX flags, which only the Xeon cores have, outrank a client model number.

    >>> fma_units("AuthenticAMD", 0x19, 0x11, {"avx512f", "fma"})
    (1, 'AMD family 19h model 11h (Zen 4): 512-bit operations run on two 256-bit FMA pipes, one 512-bit FMA per cycle')
    >>> fma_units("GenuineIntel", 6, 0x55, {"avx512f", "fma"})[0]
    2
    >>> fma_units("GenuineIntel", 6, 0x9E, {"avx2", "fma"}) is None
    True
    >>> fma_units("GenuineIntel", 6, 0xA7, {"avx512f", "amx_tile"})[0]   # a guest's masked model
    2

The private L2's bandwidth into L1 is not in ``/proc/cpuinfo`` either:
:func:`l2_bytes_per_cycle` knows the parts that differ from the 32 bytes per
cycle the host descriptor assumes.
"""
from __future__ import annotations

from typing import AbstractSet, Optional, Tuple

# Intel family 6 models with AVX-512 and two 512-bit FMA units per core (server parts).
_INTEL_SERVER_2FMA = {
    0x55: "Skylake-SP / Cascade Lake / Cooper Lake",
    0x6A: "Ice Lake-SP", 0x6C: "Ice Lake-D",
    0x8F: "Sapphire Rapids", 0xCF: "Emerald Rapids",
    0xAD: "Granite Rapids", 0xAE: "Granite Rapids-D",
}
# Intel family 6 client models whose AVX-512 runs on one 512-bit FMA unit.
_INTEL_CLIENT_1FMA = {
    0x66: "Cannon Lake", 0x7D: "Ice Lake", 0x7E: "Ice Lake",
    0x8C: "Tiger Lake", 0x8D: "Tiger Lake", 0xA7: "Rocket Lake",
}
# AMD family 1Ah (Zen 5) model ranges with 256-bit FMA pipes (the mobile parts).
_ZEN5_HALF_WIDTH = ((0x20, 0x2F, "Strix Point"), (0x60, 0x6F, "Krackan"))


def fma_units(vendor: str, family: int, model: int, flags: AbstractSet[str]) -> Optional[Tuple[int, str]]:
    """FMA units of the widest vector width ``flags`` allow, with the reason, or None when not known.

    Listed are the AVX-512 parts, whose unit width decides the peak, and Zen 1,
    whose 256-bit operations run on two 128-bit pipes.  Other AVX2 cores with
    ``fma`` (Haswell on, Zen 2 on) have two 256-bit units: the caller's default.
    """
    if vendor == "AuthenticAMD" and family == 0x17 and model < 0x30 and "avx2" in flags and "avx512f" not in flags:
        return 1, (f"AMD family 17h model {model:02X}h (Zen 1 / Zen+): 256-bit operations run on two 128-bit "
                   f"FMA pipes, one 256-bit FMA per cycle")
    if "avx512f" not in flags:
        return None
    where = f"{'AMD' if vendor == 'AuthenticAMD' else 'Intel'} family {family:X}h model {model:02X}h"
    if vendor == "GenuineIntel" and family == 6:
        if "amx_tile" in flags and model not in _INTEL_SERVER_2FMA:
            told = f" (reported as {_INTEL_CLIENT_1FMA[model]}, as a hypervisor may)" if model in _INTEL_CLIENT_1FMA else ""
            return 2, (f"{where}{told} with AMX, which only the Xeon cores (Sapphire Rapids on) have: "
                       f"two 512-bit FMA units")
        if model in _INTEL_SERVER_2FMA:
            return 2, (f"{where} ({_INTEL_SERVER_2FMA[model]}): two 512-bit FMA units "
                       f"(some Xeon Bronze, Silver and Gold 5xxx parts have one)")
        if model in _INTEL_CLIENT_1FMA:
            return 1, f"{where} ({_INTEL_CLIENT_1FMA[model]}): one 512-bit FMA unit (ports 0 and 1 fused)"
        return None
    if vendor == "AuthenticAMD":
        if family == 0x19:
            return 1, f"{where} (Zen 4): 512-bit operations run on two 256-bit FMA pipes, one 512-bit FMA per cycle"
        if family == 0x1A:
            for lo, hi, name in _ZEN5_HALF_WIDTH:
                if lo <= model <= hi:
                    return 1, (f"{where} (Zen 5, {name}): 512-bit operations run on two 256-bit FMA pipes, "
                               f"one 512-bit FMA per cycle")
            return 2, f"{where} (Zen 5): two full-width 512-bit FMA pipes"
    return None


def l2_bytes_per_cycle(vendor: str, family: int, model: int) -> Optional[Tuple[int, str]]:
    """Bytes per cycle a core's private L2 delivers to its L1, with the reason, or None when not known.

    Zen 5 doubled Zen 4's 32 bytes per cycle: published AIDA64 L2 read figures of a
    Ryzen 5 9600X against a 7600X are 1875 against 1028 GB/s at about the same clock,
    and one thread reading a 512 KiB buffer with AVX-512 loads on an EPYC Zen 5 VM
    moved 47-62 bytes per cycle.

    >>> l2_bytes_per_cycle("AuthenticAMD", 0x1A, 0x02)[0]
    64
    >>> l2_bytes_per_cycle("AuthenticAMD", 0x19, 0x11) is None
    True
    """
    if vendor == "AuthenticAMD" and family == 0x1A:
        return 64, f"AMD family 1Ah model {model:02X}h (Zen 5): L2 to L1 at 64 B/cycle, twice Zen 4's"
    return None


def cpuid_numbers(info: dict) -> Optional[Tuple[str, int, int]]:
    """(vendor, family, model) from ``/proc/cpuinfo`` fields, or None when they are missing.

    >>> cpuid_numbers({"vendor_id": "AuthenticAMD", "cpu family": "26", "model": "2"})
    ('AuthenticAMD', 26, 2)
    """
    try:
        return info["vendor_id"], int(info["cpu family"]), int(info["model"])
    except (KeyError, ValueError):
        return None
