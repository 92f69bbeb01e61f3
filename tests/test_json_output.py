"""``--json`` of run, show, deps, hw and opt (polytile/cli/json_output.py; docs/json-output.md).

Each command runs in-process through ``polytile.cli.main`` (as tests/test_cli.py does); stdout must
parse as one JSON document whose values agree with what the same command reports otherwise (the
text output, the hardware loader, the C frontend, islpy reading the isl text back).  The key tables
of docs/json-output.md are parsed and held against the documents the commands print, both ways, so
the documentation and the code cannot drift apart.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import islpy as isl
import pytest

import polytile
from polytile import c_runner, cli, config, hardware, pipeline
from polytile.cli import json_output
from polytile.cli.parser import build_parser
from polytile.compare import Check
from polytile.frontends.c import extract

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
KERNELS = ROOT / "tests" / "c_kernels"
DOC = ROOT / json_output.DOC


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """Compiled kernels and optimised files go to a private cache (module-wide: the documents of the
    key-table test are made once)."""
    cache = tmp_path_factory.mktemp("json-cache")
    cache.chmod(0o700)  # polytile refuses a group-writable cache
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYTILE_CACHE_DIR", str(cache))
        with config.override(cache_dir=cache):
            yield cache


@pytest.fixture(autouse=True)
def private_cache(cache_dir):
    yield cache_dir


def polytile_json(*argv) -> Tuple[int, Dict[str, Any], str]:
    """(exit code, the document on stdout, stderr) of ``polytile ARGV`` run in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(a) for a in argv])
    text = out.getvalue()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"stdout is not one JSON document ({exc}):\n{text[:2000]}\nstderr:\n{err.getvalue()}")
    return code, doc, err.getvalue()


def polytile_text(*argv) -> Tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main([str(a) for a in argv])
    return code, out.getvalue()


def assert_envelope(doc, schema: str) -> None:
    assert doc["schema"] == schema and doc["polytile_version"] == polytile.__version__
    assert list(doc)[:2] == ["schema", "polytile_version"]


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------


def test_run_json_matmul_check():
    code, doc, err = polytile_json("run", EX / "matmul.tile", "--dims", "M=24,N=20,K=16", "--check",
                                   "--repeat", "3", "--json")
    assert code == 0, err
    assert_envelope(doc, "polytile.run/1")
    assert doc["file"] == str(EX / "matmul.tile") and doc["kernel"] == "pt_matmul" and doc["target"] == "openmp"
    assert doc["dims"] == {"M": 24, "K": 16, "N": 20} and doc["dims_source"] == "option"
    assert doc["inputs"] == [{"name": "A", "shape": [24, 16], "dtype": "float32"},
                             {"name": "B", "shape": [16, 20], "dtype": "float32"}]
    assert doc["outputs"] == [{"name": "C", "shape": [24, 20], "dtype": "float32"}]
    t = doc["timing"]
    assert t["repeat"] == 3 and len(t["times_s"]) == 3 and t["min_s"] <= t["median_s"] <= t["max_s"]
    assert doc["flops"] == 2 * 24 * 20 * 16
    assert doc["gflops"]["median"] == pytest.approx(doc["flops"] / t["median_s"] / 1e9)
    check = doc["check"]
    assert check["ok"] is True and [c["name"] for c in check["outputs"]] == ["C"]
    c = check["outputs"][0]
    assert c["ok"] and c["max_abs_err"] <= c["tolerance"] and c["exact"] is False and c["detail"] is None
    assert doc["schedule"]["steps"][0]["op"] == "base" and doc["schedule"]["file"] is None
    assert doc["kernel_cache"] in ("hit", "miss") and Path(doc["library"]).is_file()
    assert doc["provenance"]["polytile"] == polytile.__version__
    # The same kernel again: no compiler runs.
    code, again, _ = polytile_json("run", EX / "matmul.tile", "--dims", "M=24,N=20,K=16", "--repeat", "1", "--json")
    assert code == 0 and again["kernel_cache"] == "hit" and again["check"] is None and again["library"] == doc["library"]


def test_run_json_failed_check_is_its_own_document_exit_1(monkeypatch):
    from polytile.cli import compile_run

    monkeypatch.setattr(compile_run, "check_output",
                        lambda name, got, want: Check(name, False, float("inf"), "-", "made to fail"))
    code, doc, err = polytile_json("run", EX / "matmul.tile", "--dims", "M=4,N=4,K=4", "--check", "--repeat", "1",
                                   "--json")
    assert code == 1 and doc["schema"] == "polytile.run/1"
    assert doc["check"]["ok"] is False
    assert doc["check"]["outputs"][0] == {"name": "C", "ok": False, "max_abs_err": "inf", "tolerance": None,
                                          "exact": False, "detail": "made to fail"}


def test_run_json_dims_from_the_file_note_on_stderr():
    code, doc, err = polytile_json("run", EX / "softmax.tile", "--repeat", "1", "--json")
    assert code == 0 and doc["dims_source"] == "file" and "no --dims given" in err


# ---------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------


def test_show_json_tile_model_parses_back_with_isl():
    code, doc, _ = polytile_json("show", EX / "matmul.tile", "--dims", "M=8,N=6,K=4", "--json")
    assert code == 0
    assert_envelope(doc, "polytile.show/1")
    assert doc["language"] == "tile" and doc["dims"] == {"M": 8, "K": 4, "N": 6}
    prog = doc["program"]
    assert [i["name"] for i in prog["inputs"]] == ["A", "B"] and prog["inputs"][0]["dims"] == ["M", "K"]
    assert prog["inputs"][0]["shape"] == [8, 4] and prog["outputs"] == [{"name": "C", "shape": [8, 6], "dtype": "float32"}]
    assert prog["statements"] == [{"target": "C", "kind": "contraction", "text": "C[i, j : M, N] = +(A[i, k] * B[k, j])"}]
    spec = pipeline.specialize(pipeline.load_program(EX / "matmul.tile"), [(8, 4), (4, 6)], ["float32", "float32"],
                               pipeline.Options.make("openmp"), build=False)
    stmts = {s["name"]: s for s in doc["scop"]["statements"]}
    assert list(stmts) == [s.name for s in spec.scop.statements]
    for s in spec.scop.statements:
        assert isl.Set(stmts[s.name]["domain"]).is_equal(s.domain)
        assert isl.Map(stmts[s.name]["write"]).is_equal(s.write_map())
        reads = isl.UnionMap("{ }")
        for r in stmts[s.name]["reads"]:
            reads = reads.union(isl.UnionMap(r))
        assert reads.is_equal(s.reads())
    sched = doc["schedule"]
    assert isl.Schedule(sched["tree"]).get_map().is_equal(spec.schedule.tree().get_map())
    assert sched["steps"] == [st.to_json() for st in spec.schedule.steps]
    assert sched["description"] == spec.schedule.describe()
    assert doc["gpu_mapping"] is None


def test_show_json_without_sizes_has_the_program_only(tmp_path):
    prog = tmp_path / "mm.tile"
    prog.write_text((EX / "matmul.tile").read_text().replace("// dims:", "// (no sizes):"))
    code, doc, err = polytile_json("show", prog, "--json")
    assert code == 0 and "pass --dims" in err
    assert doc["dims"] is None and doc["scop"] is None and doc["dependences"] is None and doc["schedule"] is None
    assert doc["program"]["inputs"][0] == {"name": "A", "dims": ["M", "K"], "shape": None, "dtype": "float32"}
    assert doc["program"]["outputs"] == [{"name": "C", "shape": None, "dtype": None}]


def test_show_json_gpu_mapping():
    code, doc, _ = polytile_json("show", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--target", "cuda-emulate",
                                 "--json")
    assert code == 0 and doc["gpu_mapping"]["hardware"] == "nvidia-h100"
    assert "grid" in doc["gpu_mapping"]["description"]


def test_show_json_c_regions():
    code, doc, _ = polytile_json("show", KERNELS / "features.c", "--json")
    assert code == 0 and doc["language"] == "c"
    regions = extract(str(KERNELS / "features.c"), skip_nonaffine=True)
    assert [r["lines"] for r in doc["regions"]] == [list(cs.lines) for cs in regions]
    for r, cs in zip(doc["regions"], regions):
        assert [s["name"] for s in r["statements"]] == [st.name for st in cs.scop.statements]
        assert [s["text"] for s in r["statements"]] == [st.c_text for st in cs.scop.statements]
        for s, st in zip(r["statements"], cs.scop.statements):
            assert isl.Set(s["domain"]).is_equal(st.domain)


# ---------------------------------------------------------------------------
# deps
# ---------------------------------------------------------------------------


def _text_relations(text: str) -> Dict[str, List[str]]:
    """The relations `polytile deps` prints: title line, then one indented map per line."""
    out: Dict[str, List[str]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^(flow \(RAW, memory-based\)|flow \(RAW, value-based\)|anti \(WAR\)|output \(WAW\)|reduction):",
                     line)
        if m:
            current = out.setdefault(m.group(1), [])
        elif current is not None and line.startswith("  ") and line.strip() != "(none)":
            current.append(line.strip())
    return out


@pytest.mark.parametrize("argv", [(EX / "matmul.tile", "--dims", "M=8,N=8,K=8"),
                                  (EX / "matmul_bias_relu.tile",),
                                  (KERNELS / "jacobi-2d.c",)])
def test_deps_json_equals_the_text(argv):
    code, doc, _ = polytile_json("deps", *argv, "--json")
    assert code == 0
    assert_envelope(doc, "polytile.deps/1")
    code, text = polytile_text("deps", *argv)
    assert code == 0
    deps = doc["dependences"] if doc["language"] == "tile" else doc["regions"][0]["dependences"]
    titles = {"flow": "flow (RAW, memory-based)", "flow_value": "flow (RAW, value-based)", "anti": "anti (WAR)",
              "output": "output (WAW)", "reduction": "reduction"}
    lines = _text_relations(text)
    assert set(deps) == set(titles)
    for kind, title in titles.items():
        rel = deps[kind]
        assert [m["map"] for m in rel["maps"]] == lines[title]
        whole = isl.UnionMap(rel["relation"])
        parts = whole.subtract(whole)  # empty, in the relation's parameter space
        for m in lines[title]:
            parts = parts.union(isl.UnionMap(m))
        assert whole.is_equal(parts), kind
        for m in rel["maps"]:
            single = isl.Map(m["map"])
            assert (single.get_tuple_name(isl.dim_type.in_), single.get_tuple_name(isl.dim_type.out)) == \
                (m["source"], m["sink"])
    if doc["language"] == "tile":
        assert doc["dependences"]["flow"]["maps"] and doc["statements"][0]["name"]


def test_deps_json_c_skipped_region(tmp_path):
    p = tmp_path / "ind.c"
    p.write_text("void f(int n, double *restrict a, const int *restrict idx) {\n  int i;\n#pragma scop\n"
                 "  for (i = 0; i < n; i++)\n    a[idx[i]] = 1.0;\n#pragma endscop\n}\n")
    code, doc, _ = polytile_json("deps", p, "--json")
    assert code == 0
    [r] = doc["regions"]
    assert r["skipped"] is True and "non-affine subscript of a" in r["reason"]
    assert r["statements"] == [] and r["dependences"] is None


# ---------------------------------------------------------------------------
# hw
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x86-avx2", "x86-avx512", "nvidia-h100"])
def test_hw_show_json_is_the_descriptor(name):
    code, doc, _ = polytile_json("hw", "show", name, "--json")
    assert code == 0
    assert_envelope(doc, "polytile.hw.show/1")
    hw = hardware.load(name)
    assert doc["source"] == "preset" and doc["kind"] == hw.kind
    assert hardware.from_dict(doc["descriptor"]) == hw
    if hw.kind == "cpu":
        assert doc["descriptor"]["cores"] == hw.cores
    assert doc["derived"] == hardware.derived_fields(hw)
    assert doc["vector_lanes"]["float32"] == hw.vector_lanes("float32")
    assert [m["name"] for m in doc["memory"]] == [lv.name for lv in hw.memory]
    assert [m["total_bytes"] for m in doc["memory"]] == [hw.total_bytes(lv) for lv in hw.memory]


def test_hw_show_json_host_and_file(tmp_path):
    code, doc, _ = polytile_json("hw", "show", "--json")
    assert code == 0 and doc["name"] == "host" and doc["source"] == "host"
    assert doc["notes"] == list(hardware.load("host").notes) and doc["notes"]  # the defaults it took
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc["descriptor"]))
    code, again, _ = polytile_json("hw", "show", path, "--json")
    assert code == 0 and again["source"] == "file" and again["descriptor"] == doc["descriptor"]


def test_hw_list_json():
    code, doc, _ = polytile_json("hw", "list", "--json")
    assert code == 0
    assert_envelope(doc, "polytile.hw.list/1")
    names = [p["name"] for p in doc["presets"]]
    assert names[0] == "host" and sorted(names) == hardware.presets()
    for p in doc["presets"][1:]:
        assert Path(p["file"]).is_file() and hardware.load(p["file"]) == hardware.load(p["name"])


# ---------------------------------------------------------------------------
# opt
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", sorted(p.name for p in KERNELS.glob("*.c")))
def test_opt_json_lists_every_region(kernel):
    code, doc, err = polytile_json("opt", KERNELS / kernel, "--skip-nonaffine", "--json")
    assert code == 0, err
    assert_envelope(doc, "polytile.opt/1")
    regions = extract(str(KERNELS / kernel), skip_nonaffine=True)
    assert [r["lines"] for r in doc["regions"]] == [list(cs.lines) for cs in regions]
    assert [r["function"] for r in doc["regions"]] == [cs.function for cs in regions]
    for r, cs in zip(doc["regions"], regions):
        assert r["status"] in ("optimised", "unchanged", "skipped")
        assert (r["status"] == "skipped") == bool(cs.skipped)
        assert (r["steps"] is not None) == (r["status"] == "optimised")
        assert (r["reason"] is None) == (r["status"] == "optimised")
    # Without -o the optimised file is the document's text: what `polytile opt` prints.
    code, text = polytile_text("opt", KERNELS / kernel, "--skip-nonaffine")
    assert code == 0 and doc["text"] == text and doc["output"] is None


def test_opt_json_output_file_cache_and_verify(tmp_path):
    out = tmp_path / "gemm.opt.c"
    code, first, err = polytile_json("opt", KERNELS / "gemm.c", "-o", out, "--json", "--hardware", "x86-avx2")
    assert code == 0, err
    assert first["output"] == str(out) and first["text"] is None and out.is_file()
    assert first["options"]["hardware"] == "x86-avx2" and first["verify"] is None
    code, second, _ = polytile_json("opt", KERNELS / "gemm.c", "-o", out, "--json", "--hardware", "x86-avx2",
                                    "--verify", "--verify-dims", "ni=20,nj=18,nk=16")
    assert code == 0
    assert second["cache"] == "hit" and all(r["from_cache"] for r in second["regions"])
    # A cache hit reports the same steps and notes as the run that optimised the file.
    assert [r["steps"] for r in second["regions"]] == [r["steps"] for r in first["regions"]]
    assert [r["notes"] for r in second["regions"]] == [r["notes"] for r in first["regions"]]
    assert second["verify"] == {"ok": True, "agreement": "bitwise", "flags": list(c_runner.DEFAULT_FLAGS)}


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------


def test_error_document_located(tmp_path):
    bad = tmp_path / "bad.tile"
    bad.write_text("function (A[M]) -> (B) {\n  B[i : M] = +(Q[i]);\n}\n")
    code, doc, err = polytile_json("show", bad, "--json")
    assert code == 1 and "unknown name 'Q'" in err  # stderr keeps its message
    assert_envelope(doc, "polytile.error/1")
    assert doc["command"] == "show" and doc["exit_code"] == 1
    assert doc["error"] == {"kind": "user", "type": "TileSemanticError", "message": "unknown name 'Q'",
                            "location": {"file": str(bad), "line": 2, "column": 16,
                                         "source_line": "  B[i : M] = +(Q[i]);"}}


@pytest.mark.parametrize("argv,kind,code,type_name", [
    (("run", "no_such_file.tile", "--json"), "user", 1, "MissingFileError"),
    (("deps", EX / "matmul.tile", "--dims", "M=x", "--json"), "usage", 2, "ArgumentError"),
    (("run", EX / "matmul.tile", "--json", "--no-such-option"), "usage", 2, "ArgumentError"),
    (("run", EX / "matmul.tile", "--shape", "Q=3", "--json"), "usage", 2, "UsageError"),
    (("opt", KERNELS / "2mm.c", "--json"), "user", 1, "CFrontendError"),
    (("hw", "show", "no-such-preset", "--json"), "user", 1, "HardwareError"),
])
def test_error_documents(argv, kind, code, type_name):
    got, doc, err = polytile_json(*argv)
    assert got == code and err.strip()
    assert doc["schema"] == "polytile.error/1" and doc["exit_code"] == code and doc["command"] == argv[0]
    assert doc["error"]["kind"] == kind and doc["error"]["type"] == type_name and doc["error"]["message"]


def test_internal_error_document(monkeypatch):
    def boom(*_a, **_k):
        raise ZeroDivisionError("deep inside")

    monkeypatch.setattr(hardware, "load", boom)
    code, doc, err = polytile_json("hw", "show", "--json")
    assert code == 70 and "this is a bug in polytile" in err
    assert doc["error"]["kind"] == "internal" and doc["error"]["type"] == "ZeroDivisionError"
    assert "deep inside" in doc["error"]["message"]


def test_without_json_no_document_on_failure():
    code, out = polytile_text("hw", "show", "no-such-preset")
    assert code == 1 and out == ""
    # tune's --json names a file: an argparse error there is not a JSON command line.
    code, out = polytile_text("tune", EX / "matmul.tile", "--json", "r.json", "--no-such-option")
    assert code == 2 and out == ""


def test_entry_point_stdout_is_the_document_alone():
    """Through ``python -m polytile``: an environment error (exit 3) and a success, stdout pure JSON."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "POLYTILE_DEBUG"}
    p = subprocess.run([sys.executable, "-m", "polytile", "show", str(EX / "matmul.tile"), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300, env={**env, "POLYTILE_DEBUG": "x"})
    assert p.returncode == 3 and "POLYTILE_DEBUG" in p.stderr
    doc = json.loads(p.stdout)
    assert doc["error"]["kind"] == "environment" and doc["error"]["type"] == "ConfigError"
    p = subprocess.run([sys.executable, "-m", "polytile", "-v", "show", str(EX / "softmax.tile"), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    assert p.returncode == 0 and "[polytile:" in p.stderr  # -v's stages: stderr only
    assert json.loads(p.stdout)["scop"]["name"] == "softmax"


# ---------------------------------------------------------------------------
# --help and the documentation
# ---------------------------------------------------------------------------


def _subparsers() -> Dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_json_flag_on_exactly_the_json_commands_with_help_naming_the_doc():
    with_flag = {}
    for name, sub in _subparsers().items():
        for a in sub._actions:
            if "--json" in a.option_strings and isinstance(a, argparse._StoreTrueAction):
                with_flag[name] = a.help
    assert sorted(with_flag) == sorted(json_output.JSON_COMMANDS)
    for name, text in with_flag.items():
        assert json_output.DOC in text and "JSON" in text, name


_ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+?) \|")


def documented_tables() -> Dict[str, Dict[str, str]]:
    """The key tables of docs/json-output.md: schema (or shared object name) -> {key path: type}."""
    tables: Dict[str, Dict[str, str]] = {}
    current = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#{2,3}\s+(.*?)\s*$", line)
        if heading:
            shared = re.fullmatch(r"(\w+) object", heading.group(1))
            current = shared.group(1).lower() if shared else None
            continue
        schema = re.match(r"^Schema: `(polytile\.[\w.]+/\d+)`", line)
        if schema:
            current = schema.group(1)
            continue
        row = _ROW.match(line)
        if row and current is not None:
            tables.setdefault(current, {})[row.group(1)] = row.group(2).strip()
    return tables


TABLES = documented_tables()
_ITEM_TYPES = {"strings": "string", "integers": "integer", "numbers": "number", "any": "any"}


class KeyChecker:
    """Walks a document against the tables: every key documented, every value of its documented type;
    remembers which rows it saw."""

    def __init__(self) -> None:
        self.problems: List[str] = []
        self.seen: set = set()

    def document(self, doc: Dict[str, Any]) -> None:
        self.walk(doc, [(doc["schema"], "")], "")

    def walk(self, obj: Dict[str, Any], contexts, where: str) -> None:
        for key, value in obj.items():
            for table, prefix in contexts:
                typ = TABLES[table].get(prefix + key)
                if typ is not None:
                    self.seen.add((table, prefix + key))
                    self.value(value, typ, table, prefix + key, f"{where}{key}")
                    break
            else:
                self.problems.append(f"{contexts[0][0]}: {where}{key} is not documented")

    def value(self, value, typ: str, table: str, path: str, where: str) -> None:
        for alt in (a.strip() for a in typ.split(" or ")):
            if self.matches(value, alt):
                self.children(value, alt, table, path, where)
                return
        self.problems.append(f"{table}: {where} = {value!r:.80} is not {typ}")

    @staticmethod
    def matches(value, alt: str) -> bool:
        if alt == "any":
            return True
        if alt == "null":
            return value is None
        if alt == "string":
            return isinstance(value, str)
        if alt == "boolean":
            return isinstance(value, bool)
        if alt == "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        if alt == "number":
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if alt == "list" or alt.startswith("list of "):
            return isinstance(value, list)
        if alt == "object" or alt.startswith("map of ") or alt.endswith(" object"):
            return isinstance(value, dict)
        raise AssertionError(f"{DOC.name}: unknown type {alt!r}")

    def children(self, value, alt: str, table: str, path: str, where: str) -> None:
        shared_list = re.fullmatch(r"list of (\w+) objects", alt)
        shared = re.fullmatch(r"(\w+) object", alt)
        if alt == "object":
            self.walk(value, [(table, path + ".")], where + ".")
        elif alt == "list of objects":
            for k, item in enumerate(value):
                if not isinstance(item, dict):
                    self.problems.append(f"{table}: {where}[{k}] is not an object")
                    continue
                self.walk(item, [(table, path + "[].")], f"{where}[{k}].")
        elif shared_list or shared:
            name = (shared_list or shared).group(1)
            assert name in TABLES, f"{DOC.name}: no table for '{name} object'"
            items = value if shared_list else [value]
            for k, item in enumerate(items):
                # The shared table, and rows the enclosing table adds (schedule.file of run).
                self.walk(item, [(name, ""), (table, path + ".")], f"{where}[{k}]." if shared_list else where + ".")
        elif alt.startswith(("map of ", "list of ")):
            item_type = _ITEM_TYPES.get(alt.split(" of ", 1)[1])
            values = value.values() if isinstance(value, dict) else value
            if item_type is not None and not all(self.matches(v, item_type) for v in values):
                self.problems.append(f"{table}: {where}: not every item is {item_type}")


@pytest.fixture(scope="module")
def sample_documents(cache_dir, tmp_path_factory) -> List[Dict[str, Any]]:
    """One document of every kind, through every branch the tables describe."""
    tmp = tmp_path_factory.mktemp("json-docs")
    bad = tmp / "bad.tile"
    bad.write_text("function (A[M]) -> (B) {\n  B[i : M] = +(Q[i]);\n}\n")
    nosizes = tmp / "mm.tile"
    nosizes.write_text((EX / "matmul.tile").read_text().replace("// dims:", "// (no sizes):"))
    skipped = tmp / "ind.c"
    skipped.write_text("void f(int n, double *restrict a, const int *restrict idx) {\n  int i;\n#pragma scop\n"
                       "  for (i = 0; i < n; i++)\n    a[idx[i]] = 1.0;\n#pragma endscop\n}\n")
    lines = [
        ("run", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--check", "--repeat", "2", "--json"),
        ("run", EX / "softmax.tile", "--repeat", "1", "--json"),
        ("show", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--json"),
        ("show", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--target", "cuda-emulate", "--json"),
        ("show", nosizes, "--json"),
        ("show", KERNELS / "features.c", "--json"),
        ("show", skipped, "--json"),
        ("deps", EX / "matmul.tile", "--dims", "M=8,N=8,K=8", "--json"),
        ("deps", KERNELS / "gemm.c", "--json"),
        ("deps", skipped, "--json"),
        ("hw", "show", "x86-avx2", "--json"),
        ("hw", "show", "nvidia-h100", "--json"),
        ("hw", "show", "--json"),
        ("hw", "list", "--json"),
        ("opt", KERNELS / "syrk.c", "--json", "--hardware", "x86-avx2", "--verify"),
        ("opt", KERNELS / "2mm.c", "--skip-nonaffine", "-o", tmp / "2mm.opt.c", "--json"),
        ("show", bad, "--json"),
    ]
    return [polytile_json(*argv)[1] for argv in lines]


def test_docs_tables_cover_every_schema():
    schemas = set(json_output.SCHEMAS.values())
    assert schemas <= set(TABLES), f"no key table for {sorted(schemas - set(TABLES))} in {DOC}"
    for schema in schemas:
        assert {"schema", "polytile_version"} <= set(TABLES[schema]), schema


def test_docs_document_every_key_the_commands_print(sample_documents):
    checker = KeyChecker()
    for doc in sample_documents:
        checker.document(doc)
    assert not checker.problems, "documents and docs/json-output.md disagree:\n" + "\n".join(checker.problems)
    # ... and every documented key is printed by some command line above.
    unseen = [f"{table}: {key}" for table, rows in TABLES.items() for key in rows if (table, key) not in checker.seen]
    assert not unseen, "documented but never printed:\n" + "\n".join(unseen)
    assert {d["schema"] for d in sample_documents} == set(json_output.SCHEMAS.values())


def test_key_checker_finds_drift():
    checker = KeyChecker()
    checker.document({"schema": "polytile.hw.list/1", "polytile_version": "x", "presets": [{"name": 3}],
                      "surprise": 1})
    assert any("presets[0].name = 3 is not string" in p for p in checker.problems)
    assert any("surprise is not documented" in p for p in checker.problems)
