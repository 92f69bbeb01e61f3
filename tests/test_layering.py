"""The stage order of polytile, enforced on every module's imports (read with ``ast``).

``STAGES`` lists the stages in order; each names the modules it holds and the
stages it may import from, which must all come *earlier* in the list (so the
graph has no cycles and every stage builds only on what precedes it).  A
module may always import from its own stage.  Every import counts, also one
inside a function: a lazy import is still a dependency.

The drivers are stages too (the C optimiser, the pipeline, compare, tune, the
commands last); only the package face (``polytile/__init__.py``, whose API
names import the pipeline on first use) and ``__main__`` are exempt.  Importing the root
package itself (``import polytile``, e.g. for ``__version__``) counts as
importing ``errors``, because ``polytile/__init__.py`` eagerly imports only
``errors`` (and ``version``, which imports nothing) -- which :func:`test_package_init_is_light` checks.
"""
from __future__ import annotations

import ast
import configparser
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: (stage, module prefixes, stages it may import from) -- in order.
STAGES: List[Tuple[str, Tuple[str, ...], Tuple[str, ...]]] = [
    ("names", ("polytile.names",), ()),
    ("version", ("polytile.version",), ()),
    # The example programs shipped with the package (data; stdlib only).
    ("examples", ("polytile.examples",), ()),
    ("errors", ("polytile.errors",), ("names",)),
    # The element-type table and PlaidML's promotion rule (numpy only).
    ("dtypes", ("polytile.dtypes",), ()),
    ("config", ("polytile.config",), ("errors", "names")),
    # Available memory, checked before allocating (stdlib only).
    ("memory", ("polytile.memory",), ()),
    # Atomic file writes (stdlib only): the kernel cache's, saved schedules', the commands' outputs.
    ("atomicfile", ("polytile.atomicfile",), ()),
    # A wall-clock limit for isl work that cannot be interrupted (a forked child; stdlib only).
    ("deadline", ("polytile.deadline",), ()),
    # The parts of isl union objects as lists (no Python callback inside isl; islpy only).
    ("isl_parts", ("polytile.isl_parts",), ()),
    ("hardware", ("polytile.hardware",), ("errors", "names")),
    # Where measurements run: this process, or Dask workers (dask imported only when asked for).
    ("executor", ("polytile.executor",), ("errors", "hardware")),
    ("ir", ("polytile.ir",), ("errors", "config", "names")),
    ("frontends", ("polytile.frontends",), ("ir", "errors", "names")),
    # Normal form of a program: dimension statements, size inputs, hoisted builtins.
    ("desugar", ("polytile.desugar",), ("ir", "errors")),
    # Semantic checks and binding; elemwise is their typed evaluator.
    ("sema", ("polytile.sema", "polytile.elemwise"), ("ir", "errors", "desugar", "dtypes")),
    # Reading a program and its sizes (text or path -> checked Program; --dims -> shapes).
    ("program", ("polytile.program",), ("ir", "errors", "sema", "desugar", "frontends")),
    ("interpreter", ("polytile.interpreter",), ("ir", "errors", "sema", "desugar", "dtypes", "memory")),
    ("poly", ("polytile.poly",), ("ir", "errors", "sema", "names", "desugar", "dtypes", "deadline", "isl_parts")),
    ("deps", ("polytile.deps",), ("poly", "errors", "isl_parts")),
    # The C frontend reads C straight into Scops (its statements keep their C text).
    ("cfrontend", ("polytile.frontends.c",), ("poly", "errors", "names", "ir", "isl_parts")),
    ("schedule", ("polytile.scheduling",), ("poly", "deps", "errors", "deadline", "isl_parts", "atomicfile")),
    # The cost model and the blocked-schedule space use each other (autotile ranks with
    # the model, the model reads tile configurations): one stage, with the steps the autotiler
    # adds around a blocked nest (epilogues).
    ("cost", ("polytile.cost", "polytile.autotile", "polytile.epilogues"),
     ("poly", "deps", "schedule", "hardware", "errors", "names", "isl_parts")),
    # Figures (matplotlib, imported on first use): plain results in, a Figure out; iteration spaces
    # with isl, kernels on the roofline with the cost model.
    ("plots", ("polytile.plots",), ("errors", "deadline", "isl_parts", "hardware", "cost")),
    ("codegen", ("polytile.codegen",), ("poly", "schedule", "errors", "names", "dtypes", "deadline", "isl_parts")),
    ("runtime", ("polytile.runtime",), ("config", "errors", "version", "atomicfile")),
    # Measured machine ceilings (an FMA loop, a triad): small C probes built by the runtime.
    ("probe", ("polytile.probe",), ("config", "errors", "runtime")),
    # One specialisation's record and calling it on numpy arrays.
    ("specialization", ("polytile.specialization",), ("errors", "memory")),
    # Back ends as plugins: schedule, generate and build a lowered program (OpenMP C, CUDA).
    ("targets", ("polytile.targets",), ("errors", "config", "hardware", "ir", "sema", "program", "poly", "deps",
                                        "schedule", "cost", "codegen", "runtime", "specialization")),
    # Compilation options, checked (the scheduling package only to read given steps or a fusion choice).
    ("options", ("polytile.options",), ("errors", "hardware", "schedule", "targets")),
    # The drivers, in the order they build on each other.
    # Source-to-source C optimisation: the C frontend, dependences, schedules and C generation
    # (results kept in the runtime's JSON cache, keyed with the version).
    ("c_optimiser", ("polytile.c_optimiser",), ("cfrontend", "codegen", "config", "cost", "deadline", "deps", "errors",
                                               "hardware", "isl_parts", "poly", "runtime", "schedule", "version")),
    # The Tile pipeline: front half, then the target's back half (the Kernel object).
    ("pipeline", ("polytile.pipeline",), ("codegen", "config", "deps", "desugar", "errors", "hardware",
                                          "interpreter", "ir", "poly", "program", "runtime", "schedule", "sema",
                                          "specialization", "targets", "options")),
    # The Kernel object: a signature's launcher from memory, the specialization cache, or the pipeline
    # (imported only on a miss, so a cached kernel runs without islpy).
    ("kernel", ("polytile.kernel",), ("config", "desugar", "errors", "interpreter", "ir", "options", "pipeline",
                                      "program", "runtime", "specialization", "targets", "version")),
    # Measuring schedules side by side (Tile through the pipeline; C through c_runner, below).
    ("compare", ("polytile.compare", "polytile.compare_task", "polytile.measure"), ("config", "errors", "executor", "hardware", "interpreter", "kernel",
                                        "pipeline", "runtime", "schedule", "version")),
    # Building C files and calling them on opt variants.
    ("c_runner", ("polytile.c_runner",), ("cfrontend", "errors", "compare", "c_optimiser", "runtime")),
    # What a command runs on: sizes, types and schedule files from the command line (read by
    # scheduling.saved's reader); argparse types.
    ("command_inputs", ("polytile.cli.inputs", "polytile.cli.argtypes"),
     ("errors", "memory", "schedule", "compare", "kernel", "pipeline", "plots", "dtypes")),
    ("tune", ("polytile.tune",), ("config", "cost", "errors", "executor", "hardware", "interpreter", "command_inputs",
                                  "compare", "kernel", "pipeline", "plots", "runtime", "schedule", "version")),
    # The commands (ir: `show --json` lists a program's statements as Tile text).
    ("cli", ("polytile.cli",), ("examples", "cfrontend", "config", "cost", "deps", "errors", "hardware",
                                "interpreter", "ir", "isl_parts", "memory", "plots",
                                "command_inputs", "compare", "c_runner", "executor", "pipeline", "tune", "runtime",
                                "schedule", "targets", "version", "atomicfile")),
]

#: The package face (lazy API names) and ``python -m polytile``: they may import anything.
EXEMPT = frozenset({"polytile", "polytile.__main__"})

#: What importing the bare root package amounts to (see the module docstring).
ROOT_PACKAGE_STAGE = "errors"


def package_dirs() -> Dict[str, Path]:
    """Package name -> directory, from setup.cfg (``packages`` and ``package_dir``)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    remap: Dict[str, str] = {}
    for line in cfg.get("options", "package_dir", fallback="").splitlines():
        if "=" in line:
            pkg, d = (s.strip() for s in line.split("=", 1))
            remap[pkg] = d
    out = {}
    for pkg in cfg.get("options", "packages").split():
        if pkg in remap:
            out[pkg] = ROOT / remap[pkg]
        else:
            parent = max((p for p in remap if pkg.startswith(p + ".")), key=len, default=None)
            if parent is not None:
                out[pkg] = ROOT / remap[parent] / Path(*pkg[len(parent) + 1:].split("."))
            else:
                out[pkg] = ROOT / Path(*pkg.split("."))
    return out


def all_modules() -> Dict[str, Path]:
    """Every module of the installed packages: dotted name -> file (``__init__`` is the package)."""
    mods: Dict[str, Path] = {}
    for pkg, d in package_dirs().items():
        for f in sorted(d.glob("*.py")):
            name = pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"
            mods[name] = f
        # A subdirectory with modules that setup.cfg forgot would not be installed.
        for sub in d.iterdir():
            if sub.is_dir() and any(sub.glob("*.py")) and not sub.name.startswith(("_", ".")):
                assert f"{pkg}.{sub.name}" in package_dirs(), f"package {pkg}.{sub.name} ({sub}) is not in setup.cfg"
    return mods


MODULES = all_modules()


def stage_of(module: str) -> Optional[str]:
    if module == "polytile":
        return ROOT_PACKAGE_STAGE
    best = None
    for stage, prefixes, _ in STAGES:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (stage, p)
    return best[0] if best else None


def imports_of(module: str, path: Path, *, top_level_only: bool = False) -> List[Tuple[str, int]]:
    """Polytile modules imported by ``module``: (dotted target, line)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: List[Tuple[str, int]] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                keep = len(parts) - (node.level - 1)
                assert keep > 0, f"{path}:{node.lineno}: relative import beyond the top package"
                base = ".".join(parts[:keep])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub if sub in MODULES else base, node.lineno))
    return [(t, ln) for t, ln in found if t == "polytile" or t.startswith("polytile.")]


def test_stage_table_is_ordered():
    names = [s for s, _, _ in STAGES]
    assert len(set(names)) == len(names)
    for k, (stage, _, deps) in enumerate(STAGES):
        for d in deps:
            assert d in names, f"{stage} depends on unknown stage {d}"
            assert names.index(d) < k, f"{stage} may import {d}, which comes after it in STAGES"
    assert ROOT_PACKAGE_STAGE in names


def test_modules_found():
    for m in ("polytile.ir", "polytile.errors", "polytile.sema", "polytile.pipeline",
              "polytile.frontends.tile.parser", "polytile.codegen.c", "polytile.runtime.cache"):
        assert m in MODULES, sorted(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_has_a_stage(module):
    assert module in EXEMPT or stage_of(module) is not None, \
        f"{module} ({MODULES[module].relative_to(ROOT)}) belongs to no stage: add it to STAGES in {__file__}"


def violations(module: str, path: Path) -> List[str]:
    """Imports of ``module`` (in file ``path``) that break the stage order."""
    stage = stage_of(module)
    if stage is None:
        return [f"{module} belongs to no stage"]
    allowed = {stage} | set(next(deps for s, _, deps in STAGES if s == stage))
    bad = []
    for target, line in imports_of(module, path):
        t_stage = stage_of(target)
        if t_stage is None:
            owner = "a wiring module" if target in EXEMPT else "no stage"
            bad.append(f"{path}:{line}: imports {target} ({owner})")
        elif t_stage not in allowed:
            bad.append(f"{path}:{line}: imports {target} (stage {t_stage}); "
                       f"stage {stage} may only import {', '.join(sorted(allowed))}")
    return bad


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m not in EXEMPT))
def test_imports_only_from_earlier_stages(module):
    bad = violations(module, MODULES[module])
    assert not bad, "\n".join(bad)


def test_violations_are_reported(tmp_path):
    f = tmp_path / "sema.py"
    f.write_text("from . import ir\ndef late():\n    from .codegen.c import generate\n    from . import pipeline\n")
    bad = violations("polytile.sema", f)
    assert len(bad) == 2 and "polytile.codegen.c (stage codegen)" in bad[0] and ":3:" in bad[0]
    assert "polytile.pipeline (stage pipeline)" in bad[1]
    f.write_text("import polytile\nfrom polytile.errors import PolytileError\n")
    assert violations("polytile.runtime.cache", f) == []
    assert violations("polytile.deps", tmp_path / "sema.py") == []
    f.write_text("from .interpreter import run\n")  # would be polytile.poly.interpreter: same stage
    assert violations("polytile.poly.tile", f) == []
    f.write_text("from ..interpreter import run\n")  # the oracle: not for the compiler
    assert len(violations("polytile.poly.tile", f)) == 1


def test_package_init_is_light():
    """``import polytile`` loads only ``errors`` eagerly; the rest is imported on first use."""
    eager = {t for t, _ in imports_of("polytile", MODULES["polytile"], top_level_only=True)}
    assert eager <= {"polytile.errors", "polytile.version"}, eager


def test_import_resolution(tmp_path):
    """The resolver itself: relative and absolute forms, packages and names inside modules."""
    src = tmp_path / "x.py"
    src.write_text(
        "from .. import ir, sema\nfrom ..errors import ShapeError\nfrom . import body as B\n"
        "import polytile.config\nfrom polytile.poly.scop import Scop\nimport numpy\n"
        "def f():\n    from ..codegen import c\n"
    )
    got = [t for t, _ in imports_of("polytile.poly.tile", src)]
    assert got == ["polytile.ir", "polytile.sema", "polytile.errors", "polytile.poly.body",
                   "polytile.config", "polytile.poly.scop", "polytile.codegen.c"]
    assert stage_of("polytile.codegen.c") == "codegen" and stage_of("polytile.poly") == "poly"
    assert stage_of("polytile.pipeline") == "pipeline" and stage_of("polytile") == "errors"
