"""Tests of polytile.hardware: presets, file validation, host detection, queries."""
from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import re
import tomllib
from pathlib import Path

import pytest

from polytile import hardware
from polytile.errors import PolytileError
from polytile.hardware import CPUDescriptor, GPUDescriptor, HardwareError, MemoryLevel

FILE_PRESETS = ["nvidia-h100", "nvidia-h200", "x86-avx2", "x86-avx512"]


# --------------------------------------------------------------------------- presets

def test_presets_listed():
    assert hardware.presets() == sorted(["host", *FILE_PRESETS])


@pytest.mark.parametrize("name", hardware.presets())
def test_preset_round_trips(name, tmp_path):
    hw = hardware.load(name)
    data = hardware.to_dict(hw)
    assert hardware.from_dict(data) == hw
    # Through real files in both formats; the text must parse with the standard readers.
    toml_file = tmp_path / f"{name}.toml"
    toml_file.write_text(hardware.to_toml(hw))
    assert tomllib.loads(toml_file.read_text()) == json.loads(json.dumps(data))
    assert hardware.load(toml_file) == hw
    json_file = tmp_path / f"{name}.json"
    json_file.write_text(hardware.to_json(hw))
    assert hardware.load(str(json_file)) == hw
    assert hash(hardware.load(json_file)) == hash(hw)


@pytest.mark.parametrize("name", FILE_PRESETS)
def test_descriptors_pickle_and_copy(name):
    hw = hardware.load(name)
    assert pickle.loads(pickle.dumps(hw)) == hw
    assert copy.deepcopy(hw) == hw
    assert len({hw, copy.deepcopy(hw)}) == 1  # hashable, equal copies hash alike


def test_load_passes_descriptors_through():
    hw = hardware.load("x86-avx2")
    assert hardware.load(hw) is hw


def test_unknown_preset_lists_available():
    with pytest.raises(HardwareError) as info:
        hardware.load("cray-1")
    msg = str(info.value)
    assert "cray-1" in msg
    for name in hardware.presets():
        assert name in msg


def test_h100_figures():
    hw = hardware.load("nvidia-h100")
    assert isinstance(hw, GPUDescriptor) and hw.kind == "gpu" and hw.arch == "sm_90"
    assert (hw.sms, hw.warp_size, hw.max_threads_per_block, hw.max_threads_per_sm) == (132, 32, 1024, 2048)
    assert (hw.registers_per_sm, hw.registers_per_thread) == (65536, 255)
    assert hw.shared_memory_per_sm_bytes == 228 * 1024
    assert hw.shared_memory_per_block_bytes == 227 * 1024
    assert hw.l2_bytes == 50 * 2**20
    assert hw.bandwidth("DRAM") == pytest.approx(3.35e12)
    assert hw.peak_gflops("float32") == pytest.approx(66_900)
    assert hw.peak_gflops("bfloat16", tensor=True) == pytest.approx(989_400)
    assert [lv.name for lv in hw.cache_levels()] == ["shared", "L2"]
    # shared memory: 32 banks x 4 bytes per clock on every SM
    assert hw.bandwidth("shared") == pytest.approx(128 * 1.98e9 * 132)
    with pytest.raises(HardwareError, match="bandwidth of L2 is not known"):
        hw.bandwidth("L2")


def test_h200_shares_the_h100_sm():
    h100, h200 = hardware.load("nvidia-h100"), hardware.load("nvidia-h200")
    same = ["arch", "sms", "warp_size", "max_threads_per_block", "max_threads_per_sm", "max_blocks_per_sm",
            "registers_per_thread", "registers_per_sm", "shared_memory_per_block_bytes",
            "shared_memory_per_sm_bytes", "l2_bytes"]
    assert all(getattr(h100, f) == getattr(h200, f) for f in same)
    assert h200.global_memory_bytes == 141 * 2**30
    assert h200.global_bandwidth_gbs == 4800


# --------------------------------------------------------------------------- queries

def test_derived_peak_formula():
    hw = hardware.load("x86-avx512")
    # cores x FMA units x 2 flops x lanes x GHz, nothing given in the file
    assert hw.peak_gflops("float32") == pytest.approx(56 * 2 * 2 * 16 * 2.0)
    assert hw.peak_gflops("float64") == pytest.approx(56 * 2 * 2 * 8 * 2.0)
    avx2 = hardware.load("x86-avx2")
    assert avx2.peak_gflops_fp32 == pytest.approx(8 * 2 * 2 * 8 * 3.8)
    # An explicit figure wins over the formula.
    data = hardware.to_dict(avx2)
    data["peak_gflops_fp32"] = 800
    assert hardware.from_dict(data).peak_gflops("fp32") == 800.0
    del data["peak_gflops_fp64"]
    data["clock_ghz"] = 4
    assert hardware.from_dict(data).peak_gflops("double") == pytest.approx(8 * 2 * 2 * 4 * 4)


def test_vector_lanes():
    avx512, avx2 = hardware.load("x86-avx512"), hardware.load("x86-avx2")
    assert avx512.vector_lanes("float32") == 16
    assert avx512.vector_lanes("float64") == 8
    assert avx512.vector_lanes("int8") == 64
    assert avx2.vector_lanes("float32") == 8
    assert avx2.vector_lanes("int64") == 4
    np = pytest.importorskip("numpy")
    assert avx512.vector_lanes(np.float32) == 16
    assert avx512.vector_lanes(np.dtype("float64")) == 8
    assert hardware.load("nvidia-h100").vector_lanes("float64") == 32  # a warp
    with pytest.raises(HardwareError, match="unknown element type 'complex256'"):
        avx2.vector_lanes("complex256")


def test_levels_and_bandwidth():
    hw = hardware.load("x86-avx2")
    assert [lv.name for lv in hw.memory] == ["registers", "L1", "L2", "L3", "DRAM"]
    assert [lv.name for lv in hw.cache_levels()] == ["L1", "L2", "L3"]
    assert hw.level("l2") is hw.level("L2")
    assert hw.dram.name == "DRAM"
    assert hw.level("registers").size_bytes == 16 * 32
    # per-core level: times cores; shared level: already a total
    assert hw.bandwidth("L1") == pytest.approx(243.2e9 * 8)
    assert hw.bandwidth(hw.level("L3")) == pytest.approx(972.8e9)
    assert hw.total_bytes("L2") == 8 * 512 * 1024
    with pytest.raises(HardwareError, match="no memory level 'L4'.*registers, L1, L2, L3, DRAM"):
        hw.level("L4")
    with pytest.raises(HardwareError, match="not known"):
        hw.bandwidth("registers")
    with pytest.raises(HardwareError, match="no peak rate for 'int32'"):
        hw.peak_gflops("int32")
    with pytest.raises(HardwareError, match="tensor"):
        hw.peak_gflops("float32", tensor=True)


def test_format_shows_level_table():
    text = hardware.format(hardware.load("x86-avx512"))
    lines = text.splitlines()
    assert "Intel Xeon Platinum 8480+" in lines[0] and "(cpu)" in lines[0]
    header = next(k for k, ln in enumerate(lines) if ln.split()[:3] == ["level", "size", "line"])
    rows = [ln.split() for ln in lines[header + 2: header + 7]]
    assert [r[0] for r in rows] == ["registers", "L1", "L2", "L3", "DRAM"]
    assert rows[1][1:3] == ["48", "KiB"] and "256/core" in lines[header + 3]
    assert "105 MiB" in lines[header + 5] and "1792 total" in lines[header + 5]
    assert "7168 (derived)" in text
    assert "notes:" in text
    gpu = hardware.format(hardware.load("nvidia-h100"))
    assert "sm_90" in gpu and "per SM" in gpu and "fp16_tensor 989.4" in gpu and "50 MiB" in gpu


# --------------------------------------------------------------------------- bad files

def _cpu_dict() -> dict:
    return hardware.to_dict(hardware.load("x86-avx2"))


def _write_toml(path: Path, data: dict) -> Path:
    # to_toml writes a descriptor; here the data may be invalid, so write it by hand.
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines, tables = [], []
    for k, v in data.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            tables.append((k, v))
        elif isinstance(v, dict):
            tables.append((k, [v]))
        else:
            lines.append(f"{k} = {value(v)}")
    for k, rows in tables:
        header = f"[[{k}]]" if isinstance(data[k], list) else f"[{k}]"
        for row in rows:
            lines += [header] + [f"{a} = {value(b)}" for a, b in row.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _edit_cpu(edit):
    data = _cpu_dict()
    edit(data)
    return data


BAD_CASES = [
    # (id, edit of a valid CPU descriptor, field path, words of the problem)
    ("size-not-int", lambda d: d["memory"][2].update(size_bytes="big"),
     "memory[2].size_bytes", 'expected a positive integer, got "big"'),
    ("negative-cores", lambda d: d.update(cores=-4), "cores", "expected a positive integer, got -4"),
    ("bool-cores", lambda d: d.update(cores=True), "cores", "expected a positive integer, got true"),
    ("unknown-top-field", lambda d: d.update(coers=8), "coers", "unknown field (did you mean cores?)"),
    ("unknown-level-field", lambda d: d["memory"][1].update(sise_bytes=1),
     "memory[1].sise_bytes", "known fields of a memory level: name, size_bytes"),
    ("missing-top-field", lambda d: d.pop("clock_ghz"), "clock_ghz", "missing required field"),
    ("missing-level-bandwidth", lambda d: d["memory"][3].pop("bandwidth_gbs"),
     "memory[3].bandwidth_gbs", "missing required field"),
    ("missing-level-shared", lambda d: d["memory"][1].pop("shared"), "memory[1].shared", "missing required field"),
    ("bad-shared", lambda d: d["memory"][2].update(shared="socket"),
     "memory[2].shared", 'expected one of "core", "all", got "socket"'),
    ("bad-simd", lambda d: d.update(simd_width_bits=384), "simd_width_bits", "expected one of 128, 256, 512"),
    ("cache-larger-than-next", lambda d: d["memory"][2].update(size_bytes=64 * 2**20),
     "memory[3].size_bytes", "L3 (33554432 bytes) must be larger than L2 (67108864 bytes)"),
    ("l1-smaller-than-registers", lambda d: d["memory"][1].update(size_bytes=256),
     "memory[1].size_bytes", "sizes grow outward"),
    ("registers-size-mismatch", lambda d: d["memory"][0].update(size_bytes=1024),
     "memory[0].size_bytes", "16 x 32 = 512 bytes, got 1024"),
    ("dram-not-last", lambda d: d["memory"].pop(), "memory[3].name", 'the last level must be "DRAM"'),
    ("registers-not-first", lambda d: d["memory"].pop(0), "memory[0].name", 'the first level must be "registers"'),
    ("core-after-all", lambda d: (d["memory"][3].update(shared="core"), d["memory"][2].update(shared="all")),
     "memory[3].shared", "sharing can only widen outward"),
    ("duplicate-level", lambda d: d["memory"][2].update(name="L1"), "memory[2].name", 'duplicate level name "L1"'),
    ("memory-not-tables", lambda d: d.update(memory=[1, 2]), "memory", "expected an array of tables"),
    ("notes-not-strings", lambda d: d.update(notes=["ok", 3]), "notes[1]", "expected a string, got 3"),
    ("bad-kind", lambda d: d.update(kind="tpu"), "kind", 'expected one of "cpu", "gpu", got "tpu"'),
    ("no-kind", lambda d: d.pop("kind"), "kind", "missing required field"),
    ("zero-clock", lambda d: d.update(clock_ghz=0), "clock_ghz", "expected a positive number, got 0"),
]


@pytest.mark.parametrize("case", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_cpu_file(case, tmp_path):
    _, edit, field, problem = case
    path = _write_toml(tmp_path / "bad.toml", _edit_cpu(edit))
    with pytest.raises(HardwareError) as info:
        hardware.load(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: {field}: "), msg
    assert problem in msg, msg
    assert isinstance(info.value, PolytileError)
    assert info.value.field == field and info.value.source == str(path)


def test_unknown_field_lists_known_ones(tmp_path):
    path = _write_toml(tmp_path / "bad.toml", _edit_cpu(lambda d: d.update(turbo=True)))
    with pytest.raises(HardwareError) as info:
        hardware.load(path)
    known = str(info.value).split("known fields of a cpu: ")[1]
    assert known.split(", ") == list(CPUDescriptor._CHECKS)


def _gpu_dict() -> dict:
    return hardware.to_dict(hardware.load("nvidia-h100"))


BAD_GPU_CASES = [
    ("bad-arch", lambda d: d.update(arch="hopper"), "arch", 'expected a CUDA architecture such as "sm_90"'),
    ("block-over-sm", lambda d: d.update(shared_memory_per_block_bytes=300_000),
     "shared_memory_per_block_bytes", "exceeds shared_memory_per_sm_bytes"),
    ("threads-not-warps", lambda d: d.update(max_threads_per_block=1000),
     "max_threads_per_block", "multiple of warp_size"),
    ("unknown-peak", lambda d: d["peak_tflops"].update(fp4_tensor=1.0),
     "peak_tflops.fp4_tensor", "known fields of peak_tflops: fp64, fp32, fp16"),
    ("missing-peak", lambda d: d["peak_tflops"].pop("fp32"), "peak_tflops.fp32", "missing required field"),
    ("peak-not-table", lambda d: d.update(peak_tflops=67), "peak_tflops", "expected a table, got 67"),
    ("missing-sms", lambda d: d.pop("sms"), "sms", "missing required field"),
    ("l2-over-global", lambda d: d.update(l2_bytes=d["global_memory_bytes"]), "l2_bytes", "sizes grow outward"),
]


@pytest.mark.parametrize("case", BAD_GPU_CASES, ids=[c[0] for c in BAD_GPU_CASES])
def test_bad_gpu_file(case, tmp_path):
    _, edit, field, problem = case
    data = _gpu_dict()
    edit(data)
    path = tmp_path / "bad-gpu.json"
    path.write_text(json.dumps(data))
    with pytest.raises(HardwareError) as info:
        hardware.load(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: {field}: "), msg
    assert problem in msg, msg


def test_unreadable_files(tmp_path):
    bad = tmp_path / "broken.toml"
    bad.write_text("cores = = 2\n")
    with pytest.raises(HardwareError, match=r"broken\.toml: invalid TOML"):
        hardware.load(bad)
    bad_json = tmp_path / "broken.json"
    bad_json.write_text("{\"kind\": ")
    with pytest.raises(HardwareError, match=r"broken\.json: invalid JSON: .*line 1"):
        hardware.load(bad_json)
    top_list = tmp_path / "list.json"
    top_list.write_text("[1, 2]")
    with pytest.raises(HardwareError, match=r"list\.json: expected a table at the top level"):
        hardware.load(top_list)
    with pytest.raises(HardwareError, match=r"missing\.toml: cannot read the file"):
        hardware.load(tmp_path / "missing.toml")
    with pytest.raises(HardwareError, match=r"\.yaml: expected a \.toml or \.json file"):
        hardware.load(tmp_path / "x.yaml")


def test_registers_may_be_left_to_the_isa(tmp_path):
    data = _cpu_dict()
    del data["memory"][0]["size_bytes"], data["memory"][0]["line_bytes"], data["memory"][2]["line_bytes"]
    hw = hardware.load(_write_toml(tmp_path / "ok.toml", data))
    assert hw.level("registers").size_bytes == 512 and hw.level("registers").line_bytes == 32
    assert hw.level("L2").line_bytes == 64  # the default
    assert hw == hardware.load("x86-avx2")


def test_direct_construction_is_checked():
    regs = MemoryLevel("registers", 512, 32, "core")
    dram = MemoryLevel("DRAM", 1 << 30, 64, "all", bandwidth_gbs=20)
    assert dram.bandwidth_gbs == 20.0 and isinstance(dram.bandwidth_gbs, float)
    hw = CPUDescriptor("toy", 4, 1, 256, 1, 16, 1.0, (regs, dram))
    assert hw.peak_gflops_fp32 == 4 * 1 * 2 * 8 * 1.0
    assert hw.cache_levels() == ()
    with pytest.raises(HardwareError, match="^size_bytes: expected a positive integer"):
        MemoryLevel("L1", 0, 64, "core", bandwidth_gbs=1)
    with pytest.raises(HardwareError, match=r"^memory\[1\]\.size_bytes: .*sizes grow outward"):
        CPUDescriptor("toy", 4, 1, 256, 1, 16, 1.0, (regs, MemoryLevel("DRAM", 100, 64, "all", bandwidth_gbs=1)))
    with pytest.raises(HardwareError, match="^cores: expected a positive integer"):
        dataclasses.replace(hw, cores=0)


# --------------------------------------------------------------------------- host detection

def test_detect_this_host():
    hw = hardware.load("host")
    assert isinstance(hw, CPUDescriptor) and hw.name.startswith("host")
    assert hw.memory[0].name == "registers" and hw.memory[-1].name == "DRAM"
    assert hw.cores * hw.threads_per_core >= 1
    assert any("fma_units_per_core" in n for n in hw.notes)
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if re.search(r"^flags\s*:.*\bavx512f\b", cpuinfo, re.M):
        assert hw.simd_width_bits == 512 and hw.vector_lanes("float32") == 16
    sysfs_l1 = Path("/sys/devices/system/cpu/cpu0/cache/index0/size")
    if sysfs_l1.exists():
        assert hw.cache_levels(), "sysfs has caches but none were detected"
    assert hardware.from_dict(hardware.to_dict(hw)) == hw
    assert "notes:" in hardware.format(hw)


def _fake_tree(root: Path, *, caches: dict, cpuinfo: str | None, meminfo: str | None,
               siblings: str | None = None, max_khz: str | None = None) -> tuple[Path, Path]:
    sysfs, procfs = root / "sys", root / "proc"
    sysfs.mkdir(parents=True)
    procfs.mkdir()
    for index, files in caches.items():
        d = sysfs / "cpu0" / "cache" / f"index{index}"
        d.mkdir(parents=True)
        for name, text in files.items():
            (d / name).write_text(text + "\n")
    if siblings is not None:
        (sysfs / "cpu0" / "topology").mkdir(parents=True)
        (sysfs / "cpu0" / "topology" / "thread_siblings_list").write_text(siblings + "\n")
    if max_khz is not None:
        (sysfs / "cpu0" / "cpufreq").mkdir(parents=True)
        (sysfs / "cpu0" / "cpufreq" / "cpuinfo_max_freq").write_text(max_khz + "\n")
    if cpuinfo is not None:
        (procfs / "cpuinfo").write_text(cpuinfo)
    if meminfo is not None:
        (procfs / "meminfo").write_text(meminfo)
    return sysfs, procfs


def _cache(level, ctype, size, ways, shared, line="64"):
    return {"level": str(level), "type": ctype, "size": size, "coherency_line_size": line,
            "ways_of_associativity": str(ways), "shared_cpu_list": shared}


CPUINFO_AVX2 = "".join(
    f"processor\t: {n}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD Ryzen 7 5800X 8-Core Processor\n"
    f"cpu MHz\t\t: 2200.000\nsiblings\t: 16\ncpu cores\t: 8\n"
    f"flags\t\t: fpu sse sse2 avx fma avx2 bmi2\n\n" for n in range(16))


def test_detect_fake_avx2_desktop(tmp_path):
    sysfs, procfs = _fake_tree(
        tmp_path,
        caches={0: _cache(1, "Data", "32K", 8, "0,8"), 1: _cache(1, "Instruction", "32K", 8, "0,8"),
                2: _cache(2, "Unified", "512K", 8, "0,8"), 3: _cache(3, "Unified", "32768K", 16, "0-15")},
        cpuinfo=CPUINFO_AVX2, meminfo="MemTotal:       32768000 kB\nMemFree: 1 kB\n",
        siblings="0,8", max_khz="4700000")
    hw = hardware.detect_host(sysfs, procfs, cpu_count=16)
    assert hw.name == "host: AMD Ryzen 7 5800X 8-Core Processor"
    assert (hw.cores, hw.threads_per_core, hw.simd_width_bits, hw.vector_registers) == (8, 2, 256, 16)
    assert hw.clock_ghz == pytest.approx(4.7)  # cpufreq max wins over the current 'cpu MHz'
    assert [(lv.name, lv.size_bytes, lv.associativity, lv.shared) for lv in hw.memory] == [
        ("registers", 512, None, "core"), ("L1", 32 << 10, 8, "core"), ("L2", 512 << 10, 8, "core"),
        ("L3", 32 << 20, 16, "all"), ("DRAM", 32768000 * 1024, None, "all")]
    assert hw.peak_gflops_fp32 == pytest.approx(8 * 2 * 2 * 8 * 4.7)
    assert hw.level("L1").bandwidth_gbs == pytest.approx(2 * 32 * 4.7)
    assert not any("larger than any real part" in n for n in hw.notes)
    assert not any("hypervisor" in n for n in hw.notes)
    assert any(n.startswith("bandwidths are defaults") for n in hw.notes)


def test_detect_fake_vm_with_huge_l3(tmp_path):
    # The shape of this repository's CI machine: a 2-CPU KVM guest reporting a 480 MiB L3.
    cpuinfo = "".join(f"processor\t: {n}\nmodel name\t: Intel(R) Xeon(R) Processor\ncpu MHz\t\t: 2599.998\n"
                      f"siblings\t: 2\ncpu cores\t: 2\nflags\t\t: fma avx2 avx512f hypervisor\n\n" for n in range(2))
    sysfs, procfs = _fake_tree(
        tmp_path,
        caches={0: _cache(1, "Data", "48K", 12, "0"), 2: _cache(2, "Unified", "2048K", 16, "0"),
                3: _cache(3, "Unified", "491520K", 16, "0-1")},
        cpuinfo=cpuinfo, meminfo="MemTotal: 24683656 kB\n")
    hw = hardware.detect_host(sysfs, procfs, cpu_count=2)
    assert (hw.cores, hw.threads_per_core, hw.simd_width_bits, hw.vector_registers) == (2, 1, 512, 32)
    assert hw.level("L3").size_bytes == 491520 * 1024  # kept as sysfs says
    assert any("L3 of 480 MiB for 2 CPUs" in n for n in hw.notes)
    assert any("hypervisor" in n for n in hw.notes)
    assert any("cpu MHz" in n for n in hw.notes)
    assert hw.clock_ghz == pytest.approx(2.599998)
    text = hardware.format(hw)
    assert "480 MiB" in text and "larger than any real part" in text


def test_detect_with_missing_files(tmp_path):
    sysfs, procfs = _fake_tree(tmp_path, caches={}, cpuinfo=None, meminfo=None)
    hw = hardware.detect_host(sysfs, procfs, cpu_count=4)
    notes = "\n".join(hw.notes)
    assert hw.name == "host"
    assert hw.cores == 4 and hw.threads_per_core == 1
    assert hw.simd_width_bits == 256 and hw.clock_ghz == hardware.DEFAULT_CLOCK_GHZ
    assert hw.dram.size_bytes == hardware.DEFAULT_DRAM_BYTES
    for words in ("cpuinfo unreadable", "assumed 256-bit SIMD", "clock unknown: default 2.0 GHz",
                  "memory size unknown: default 8 GiB", "threads per core unknown: default 1",
                  "no cache information in sysfs", "fma_units_per_core", "bandwidths are defaults"):
        assert words in notes, words
    assert [lv.name for lv in hw.cache_levels()] == ["L1", "L2", "L3"]
    assert hw.level("L3").size_bytes == 2 * 2**20 * 4
    for note in hw.notes:
        assert note in hardware.format(hw)
    # Without cpu_count the process's own affinity is used.
    assert hardware.detect_host(sysfs, procfs).cores >= 1


def test_detect_partial_cache_files(tmp_path):
    # A cache directory with some attribute files missing: defaults, noted, per attribute.
    sysfs, procfs = _fake_tree(
        tmp_path,
        caches={0: {"level": "1", "type": "Data", "size": "32K"},
                1: {"level": "2", "type": "Unified"},  # no size: skipped
                2: {"level": "3", "type": "Unified", "size": "8M", "shared_cpu_list": "0-3"}},
        cpuinfo="processor : 0\nflags : sse sse2\nmodel name : Old CPU @ 2.40GHz\n\n",
        meminfo="MemTotal: 4000000 kB\n", siblings="0")
    hw = hardware.detect_host(sysfs, procfs, cpu_count=4)
    notes = "\n".join(hw.notes)
    assert hw.simd_width_bits == 128 and hw.fma_units_per_core == 1
    assert hw.clock_ghz == pytest.approx(2.4) and "model name" in notes
    assert [lv.name for lv in hw.cache_levels()] == ["L1", "L3"]
    assert hw.level("L1").line_bytes == 64 and "L1 line size unknown: default 64" in notes
    assert "L1 sharing unknown" in notes and hw.level("L1").shared == "core"
    assert hw.level("L3").shared == "all" and hw.level("L1").associativity is None
    assert "index1: no readable level/size" in notes


@pytest.mark.parametrize("preset", ["x86-avx2", "host"])
def test_compile_and_schedule_accept_a_descriptor_object(preset):
    # Issue 13: Options.make turned a descriptor back into its display name, so
    # compile(src, hardware=hardware.load("x86-avx2")) failed with "unknown hardware preset".
    import numpy as np

    import polytile
    from polytile import hardware as H

    src = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"
    hw = H.load(preset)
    A = np.random.default_rng(0).integers(-3, 4, (48, 40)).astype(np.float32)
    B = np.random.default_rng(1).integers(-3, 4, (40, 56)).astype(np.float32)
    k = polytile.compile(src, hardware=hw)
    assert k.options.hardware == hw
    np.testing.assert_array_equal(k(A, B), polytile.reference(src, A, B))
    by_object = polytile.schedule(src, shapes={"A": A.shape, "B": B.shape}, hardware=hw)
    by_name = polytile.schedule(src, shapes={"A": A.shape, "B": B.shape}, hardware=preset)
    assert by_object.steps == by_name.steps and len(by_object.steps) > 1  # autotiled alike


def _cpuinfo(vendor: str, family: int, model: int, name: str, flags: str, n: int = 2) -> str:
    return "".join(f"processor\t: {k}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                   f"model name\t: {name}\ncpu MHz\t\t: 3000.000\nsiblings\t: {n}\ncpu cores\t: {n}\n"
                   f"flags\t\t: {flags}\n\n" for k in range(n))


@pytest.mark.parametrize("vendor, family, model, flags, units, words", [
    # Zen 4 (Genoa): AVX-512 on 256-bit pipes -- half the peak the flags suggest.
    ("AuthenticAMD", 0x19, 0x11, "fma avx2 avx512f", 1, "Zen 4"),
    # Zen 5 server (Turin) and desktop: full-width pipes; Strix Point: half width.
    ("AuthenticAMD", 0x1A, 0x02, "fma avx2 avx512f", 2, "Zen 5"),
    ("AuthenticAMD", 0x1A, 0x44, "fma avx2 avx512f", 2, "Zen 5"),
    ("AuthenticAMD", 0x1A, 0x24, "fma avx2 avx512f", 1, "Strix Point"),
    # Zen 1: 256-bit AVX2 on 128-bit pipes; Zen 3 (no AVX-512): the default two.
    ("AuthenticAMD", 0x17, 0x01, "fma avx2", 1, "Zen 1"),
    ("AuthenticAMD", 0x19, 0x21, "fma avx2", 2, "default 2"),
    # Intel: Xeon server cores have two 512-bit units, the AVX-512 client cores one.
    ("GenuineIntel", 6, 0x55, "fma avx2 avx512f", 2, "Skylake-SP"),
    ("GenuineIntel", 6, 0x8F, "fma avx2 avx512f", 2, "Sapphire Rapids"),
    ("GenuineIntel", 6, 0x8C, "fma avx2 avx512f", 1, "Tiger Lake"),
    # A KVM guest on a Sapphire Rapids host that reports Rocket Lake's model: AMX outranks the model.
    ("GenuineIntel", 6, 0xA7, "fma avx2 avx512f amx_tile", 2, "reported as Rocket Lake"),
    ("GenuineIntel", 6, 0xA7, "fma avx2 avx512f", 1, "Rocket Lake"),
    # An AVX-512 model not in the table keeps the stated default.
    ("GenuineIntel", 6, 0x01, "fma avx2 avx512f", 2, "not visible in cpuinfo"),
])
def test_detect_fma_units_from_the_cpu_model(tmp_path, vendor, family, model, flags, units, words):
    sysfs, procfs = _fake_tree(tmp_path, caches={0: _cache(1, "Data", "48K", 12, "0")},
                               cpuinfo=_cpuinfo(vendor, family, model, "Some CPU", flags),
                               meminfo="MemTotal: 8000000 kB\n", siblings="0")
    hw = hardware.detect_host(sysfs, procfs, cpu_count=2)
    assert hw.fma_units_per_core == units
    note = next(n for n in hw.notes if "fma_units_per_core" in n)
    assert words in note, note
    lanes = 16 if "avx512f" in flags else 8
    assert hw.peak_gflops_fp32 == pytest.approx(2 * units * 2 * lanes * 3.0)


def test_zen4_descriptor_prefers_fewer_accumulators():
    # One 512-bit FMA per cycle (Zen 4) is saturated by half the independent
    # accumulators two units need: the micro-kernel model must see the difference.
    from dataclasses import replace

    from polytile.cost.roofline import _kernel_efficiency

    xeon = hardware.load("x86-avx512")
    zen4 = replace(xeon, fma_units_per_core=1, peak_gflops_fp32=None, peak_gflops_fp64=None)
    small = (2, 32, 16)  # 4 accumulators
    assert _kernel_efficiency(small, zen4, "float32") > _kernel_efficiency(small, xeon, "float32")
    assert zen4.peak_gflops_fp32 == pytest.approx(xeon.peak_gflops_fp32 / 2)


@pytest.mark.parametrize("family, model, bytes_per_cycle", [
    (0x1A, 0x02, 64),  # Zen 5 (Turin): twice Zen 4's L2 -> L1 bandwidth
    (0x1A, 0x44, 64),  # Zen 5 desktop
    (0x19, 0x11, 32),  # Zen 4 (Genoa): the default
])
def test_private_l2_bandwidth_from_the_cpu_model(tmp_path, family, model, bytes_per_cycle):
    sysfs, procfs = _fake_tree(tmp_path, caches={0: _cache(1, "Data", "48K", 12, "0"),
                                                 1: _cache(2, "Unified", "1024K", 16, "0")},
                               cpuinfo=_cpuinfo("AuthenticAMD", family, model, "Some CPU", "fma avx2 avx512f"),
                               meminfo="MemTotal: 8000000 kB\n", siblings="0")
    hw = hardware.detect_host(sysfs, procfs, cpu_count=2)
    assert hw.level("L2").bandwidth_gbs == pytest.approx(bytes_per_cycle * 3.0)
    assert any("Zen 5" in n and "L2" in n for n in hw.notes) == (bytes_per_cycle == 64)


def test_eight_chains_on_two_pipes_lose_to_more():
    # 8 accumulators on 2 FMA pipes with a 4-cycle latency are exactly at the latency bound, which a
    # real core does not quite reach; 12 or 16 are not slowed by it.  (Blocks of 4 or more rows: fewer
    # are bound by their operand loads, test_cost.test_blocks_of_few_rows_are_bound_by_their_operand_loads.)
    from polytile.cost.roofline import _kernel_efficiency

    xeon = hardware.load("x86-avx512")
    eight, twelve, sixteen = (_kernel_efficiency(b, xeon, "float32") for b in ((4, 32, 16), (6, 32, 16), (4, 64, 16)))
    assert eight < twelve == sixteen
