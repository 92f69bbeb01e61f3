"""What every command on a C file shares: its options (-I/-D/-U/--std/--pure, --function, ...), reading its
#pragma scop regions, naming them, and refusing the options of the other kind of input.

``show``, ``deps``, ``schedule`` and ``compare`` take a Tile program or a C file and pick their half by the
file's suffix (:func:`_is_c`); ``opt`` takes only C.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Dict, List, Sequence, Tuple

from .inputs import PROG, UsageError


def _is_c(args) -> bool:
    return str(args.file).endswith(".c")


def _c_command(handler: Callable[..., int]) -> Callable[..., int]:
    """A C command: the frontend's messages name command-line flags (--assume-no-alias, --pure NAME,
    --param N=... for opt, --dims N=... for the others), not the Python keywords of the same options."""
    flags = {} if handler.__name__ == "cmd_opt" else {"params": "--dims {name}=<int>"}

    def run(*a, **k) -> int:
        from ..frontends.c.source import cli_spelling

        with cli_spelling(**flags):
            return handler(*a, **k)

    run.__name__, run.__doc__ = handler.__name__, handler.__doc__
    return run


#: Options of the C preprocessor and of the purity list, as argparse stores them (see _cpp_options).
_C_PREPROCESSOR = ("include_dirs", "defines", "undefines", "std", "pure")


def _cpp_args(args) -> List[str]:
    """-I/-D/-U/--std of a C command, in gcc's spelling, for the frontend and for every build."""
    out: List[str] = []
    for d in getattr(args, "include_dirs", None) or ():
        out += ["-I", d]
    for d in getattr(args, "defines", None) or ():
        out += ["-D", d]
    for u in getattr(args, "undefines", None) or ():
        out += ["-U", u]
    if getattr(args, "std", None):
        out.append(f"-std={args.std}")
    return out


def _pure(args) -> Tuple[str, ...]:
    return tuple(getattr(args, "pure", None) or ())


def _c_params(args) -> Dict[str, int]:
    """``--dims`` of a C file: values fixing its parameters (function arguments and macros)."""
    params: Dict[str, int] = {}
    for d in getattr(args, "dims", None) or ():
        params.update(d)
    return params


def _c_regions(args):
    """The regions of a C file (``--function NAME``: that function's body), non-affine ones marked skipped."""
    from ..frontends.c import extract

    params = _c_params(args)
    return extract(args.file, function=getattr(args, "function", None), params=params or None,
                   skip_nonaffine=True, assume_no_alias=getattr(args, "assume_no_alias", False),
                   reassociate=getattr(args, "reassociate", False), pure=_pure(args), cpp_args=_cpp_args(args))


def _c_where(path, cs) -> str:
    """``file:first-last (function)``: how every C command names a region."""
    return f"{path}:{cs.lines[0]}-{cs.lines[1]} ({cs.function})"


def _c_region_header(args, cs) -> str:
    params = ", ".join(cs.params)
    fixed = ", ".join(f"{k}={v}" for k, v in sorted(cs.fixed.items()))
    return (f"// {_c_where(args.file, cs)}" + (f"; parameters {params}" if params else "")
            + (f"; fixed {fixed}" if fixed else ""))


def _per_region(path, items: Sequence, show: Callable[[Any], None]) -> bool:
    """``show`` each region's item, a blank line between them; False (and a note) when there is none."""
    if not items:
        print(f"// {path}: no #pragma scop region")
        return False
    for k, item in enumerate(items):
        if k:
            print()
        show(item)
    return True


def _reject_c_options(args, command: str, names: Sequence[str]) -> None:
    """Options a Tile program does not take (it has no functions, macros, pointers or opt variants)."""
    for name in names:
        if getattr(args, name, None) not in (None, False, []):
            flag = _C_FLAG_SPELLING.get(name, f"--{name.replace('_', '-')}")
            raise UsageError(f"{flag} applies to C files only ({PROG} {command} FILE.c)")


#: Flags whose argparse name is not their spelling.
_C_FLAG_SPELLING = {"include_dirs": "-I", "defines": "-D", "undefines": "-U"}

#: Why a Tile option has no meaning for a C file.
_TILE_ONLY = {"shape": "a C file's extents come from its declarations",
              "dtype": "a C file's types come from its declarations",
              "dtypes": "a C file's types come from its declarations",
              "tile": "compare the opt variants --no-tile, or a saved schedule with --schedules",
              "inputs": "a C file's inputs are uniform floats in [0.5, 1.5) and integers in [1, 50)"}


def _reject_tile_options(args, command: str, names: Sequence[str]) -> None:
    for name in names:
        if getattr(args, name, None) not in (None, False, []):
            raise UsageError(f"--{name} applies to Tile programs only ({_TILE_ONLY[name]})")


def _cpp_options(g) -> None:
    """-I, -D, -U, --std (passed to the preprocessor like gcc's) and --pure of the C commands."""
    g.add_argument("-I", dest="include_dirs", action="append", metavar="DIR",
                   help="C: add DIR to the preprocessor's include path, as gcc -I (repeatable)")
    g.add_argument("-D", dest="defines", action="append", metavar="NAME[=VALUE]",
                   help="C: define a macro for the preprocessor, as gcc -D (repeatable)")
    g.add_argument("-U", dest="undefines", action="append", metavar="NAME",
                   help="C: undefine a macro, as gcc -U (repeatable)")
    g.add_argument("--std", metavar="STANDARD", help="C: the language standard of the preprocessor, as gcc "
                                                     "-std= (default: c11)")
    g.add_argument("--pure", action="append", metavar="NAME",
                   help="C: statements may call function NAME: its result depends on its arguments only and it "
                        "changes nothing (repeatable; math.h functions and functions declared "
                        "__attribute__((const)) or ((pure)) need no flag; any other call refuses the region)")


def _c_options(p: argparse.ArgumentParser, group=None) -> None:
    g = group or p.add_argument_group("C files")
    _cpp_options(g)
    g.add_argument("--function", metavar="NAME",
                   help="C: the whole body of function NAME is the region (instead of #pragma scop regions)")
    g.add_argument("--assume-no-alias", action="store_true",
                   help="C: assume pointer parameters do not overlap (as with restrict)")
    g.add_argument("--reassociate", action="store_true",
                   help="C: let reductions (s += e, s -= e, s *= e) be reordered, e.g. vectorised with partial "
                        "sums; results then differ by rounding (compare: adds a 'reassociate' variant, checked "
                        "within a tolerance)")
