"""``polytile examples``: list the example programs shipped with the package, print one, or copy them out.

A copy never overwrites a file that is already there: a file with the same
content is left as it is, a different one is kept and reported.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import PolytileError
from .. import examples as shipped

EPILOG = """examples:
  polytile examples                        list the examples with what each computes
  polytile examples matmul                 print examples/matmul.tile (redirect it to a file to edit)
  polytile examples --copy my-examples     copy every example into my-examples/ (created if needed)
  polytile examples conv2d --copy .        copy one
  polytile run my-examples/matmul.tile --check
"""


def add_parser(subs, formatter, common) -> None:
    """Register the command on the ``polytile`` subcommand parser."""
    p = subs.add_parser("examples", formatter_class=formatter, epilog=EPILOG,
                        help="list, print or copy the example Tile programs shipped with polytile",
                        description="The example Tile programs that ship with polytile: without arguments a "
                                    "list of them, with a NAME its text, with --copy DIR files to edit and run.  "
                                    "Each starts with comments that say what it computes and how to run it.")
    p.add_argument("name", nargs="?", metavar="NAME", help="one example (e.g. matmul)")
    p.add_argument("--copy", metavar="DIR", help="copy the example (all of them without NAME) into DIR; "
                                                 "files already there are never overwritten")
    common(p, sub=True)
    p.set_defaults(handler=cmd_examples)


def _lookup(name: str) -> Path:
    try:
        return shipped.path(name)
    except KeyError:
        raise PolytileError(f"no example named {name!r}; `polytile examples` lists them "
                            f"({', '.join(shipped.names()[:6])}, ...)") from None


def cmd_examples(args) -> int:
    if args.copy is None:
        if args.name:
            print(_lookup(args.name).read_text(encoding="utf-8"), end="")
            return 0
        rows = shipped.catalogue()
        width = max(len(n) for n, _ in rows)
        for name, what in rows:
            print(f"{name:<{width}}  {what}")
        print(f"\n{len(rows)} examples; `polytile examples NAME` prints one, "
              f"`polytile examples --copy DIR` copies them to edit and run")
        return 0
    files = [_lookup(args.name)] if args.name else [shipped.path(n) for n in shipped.names()]
    dest = Path(args.copy)
    if dest.exists() and not dest.is_dir():
        raise PolytileError(f"--copy {dest}: not a directory")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PolytileError(f"--copy {dest}: cannot create it: {exc.strerror or exc}") from None
    copied = same = 0
    kept = []
    for src in files:
        text = src.read_text(encoding="utf-8")
        out = dest / src.name
        if out.exists():
            if out.is_file() and out.read_text(encoding="utf-8", errors="replace") == text:
                same += 1
            else:
                kept.append(out)
            continue
        try:
            # "x": fail rather than overwrite a file created since the check above.
            with open(out, "x", encoding="utf-8") as f:
                f.write(text)
        except FileExistsError:
            kept.append(out)
            continue
        except OSError as exc:
            raise PolytileError(f"cannot write {out}: {exc.strerror or exc}") from None
        copied += 1
    print(f"copied {copied} example(s) to {dest}" + (f"; {same} already there" if same else ""))
    for out in kept:
        print(f"kept your {out} (it differs from the shipped example; not overwritten)")
    return 0
