"""Front-end fuzzer: mutated Tile programs into parse + sema.check (+ sometimes the oracle).

    python tests/fuzz/fuzz_frontend.py --n 100000 --seed 1 --json out.json [--corpus tests/fuzz/corpus]

Seeds are ``examples/*.tile``, programs from ``gen_programs.generate`` and the
corpus.  Each input is a seed mutated 1-4 times: byte flips (on the UTF-8
bytes), token deletion/duplication/swap/replacement, random unicode
(including control characters, NUL, surrogate-free astral characters, RTL
marks), huge or odd numbers (``99999999999999999999999``, ``1e400``, ``0x10``,
``-0``), deep nesting (hundreds to tens of thousands of parentheses, unary
minus chains, ``[[...]]``), long inputs (a statement repeated thousands of
times, long names), and splices of two programs.

Property, for every input: ``polytile.frontends.tile.parse`` then
``polytile.sema.check`` (and, one time in eight when they pass,
``polytile.reference`` on small arrays) either succeed or raise a
``polytile.errors.PolytileError`` (a ``TileSyntaxError`` carrying a location);
never any other exception, never more than 10 s (each input runs in a worker
process that is killed and replaced on timeout).  Mutants longer than
1,000,000 characters are skipped (counted as ``skipped_too_long``), and the
oracle stage is skipped when the inputs would hold more than 10^6 elements
(the harness would time its own ``np.ones``).

Inputs reaching a new outcome signature (exception class + the message with
names and numbers blanked, first 60 characters) are kept in the corpus
directory when they are small (<= 2,000 characters; at most 400 files).
Failures are written to the JSON with the input text.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import random
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from workpool import WorkerPool  # noqa: E402

CORPUS = HERE / "corpus"
MAX_CHARS = 1_000_000  # longer mutants are skipped (they only measure pickling speed)

TOKEN_RE = re.compile(r"\s+|//[^\n]*|/\*.*?\*/|[A-Za-z_#$][A-Za-z0-9_]*|\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?"
                      r"|<<|>>|<=|>=|==|!=|->|\[\[|\]\]|.", re.S)
PIECES = ["function", "default", "no_defract", "(", ")", "[", "]", "{", "}", ",", ";", ":", "->", "=", "+", "-",
          "*", "/", "<", ">", "==", "!=", "<=", ">=", "?", "&", "|", "^", "~", "<<", ">>", "[[", "]]", "#X", "$x",
          "i", "j", "N", "M", "A", "O", "0", "1", "2", "-1", "1.5", "1e3", "exp", "max", "reshape", "gather",
          "index", "as_int", "as_float", "shape", "prng_step", "assert_group_count", "builtin_softmax", "//", "/*",
          "*/", "\n", " ", "\t", "@", "%", "!", '"', "'", "\\", "`"]
HUGE = ["99999999999999999999999999", "18446744073709551616", "9223372036854775808", "2147483648", "4294967296",
        "1e400", "1e-400", "0.0000000000000000000000001", "-0", "0x10", "1_000", "00000007", "1.", ".5", "1e",
        "340282366920938463463374607431768211457", "9" * 400, "3.14159e+308", "nan", "inf"]
UNICODE = ["\x00", "\x7f", "\u200b", "\u200f", "\ufeff", "é", "Ä", "ß", "\u0130", "\u212a", "Ω", "𝐀", "😀", "\ud7ff",
           "\u2028", "\x0c", "\x0b", "\r", "\u00a0", "ǅ", "ᾈ", "１", "٣", "⁰", "ⅷ"]


def seeds() -> List[str]:
    out = [p.read_text() for p in sorted((ROOT / "examples").glob("*.tile"))]
    from gen_programs import generate
    out += [generate(s).text for s in range(200)]
    if CORPUS.is_dir():
        out += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(CORPUS.glob("*.tile"))]
    return out


def tokens(text: str) -> List[str]:
    return TOKEN_RE.findall(text)


def mutate(text: str, r: random.Random, pool: List[str]) -> str:
    kind = r.random()
    toks = tokens(text)
    if kind < 0.12:  # byte flips
        b = bytearray(text.encode("utf-8", "surrogatepass"))
        for _ in range(r.randint(1, 4)):
            if b:
                b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        return b.decode("utf-8", errors=r.choice(["replace", "ignore", "surrogateescape"]))
    if kind < 0.22 and toks:  # delete tokens
        for _ in range(r.randint(1, 3)):
            if toks:
                del toks[r.randrange(len(toks))]
        return "".join(toks)
    if kind < 0.32 and toks:  # duplicate a run
        i = r.randrange(len(toks))
        j = min(len(toks), i + r.randint(1, 6))
        toks[i:i] = toks[i:j] * r.randint(1, 3)
        return "".join(toks)
    if kind < 0.42 and len(toks) > 1:  # swap
        i, j = r.randrange(len(toks)), r.randrange(len(toks))
        toks[i], toks[j] = toks[j], toks[i]
        return "".join(toks)
    if kind < 0.55 and toks:  # replace / insert a piece
        i = r.randrange(len(toks))
        piece = r.choice(PIECES)
        if r.random() < 0.5:
            toks[i] = piece
        else:
            toks.insert(i, piece)
        return "".join(toks)
    if kind < 0.62:  # unicode
        i = r.randrange(len(text) + 1)
        ch = r.choice(UNICODE) if r.random() < 0.7 else chr(r.choice([r.randrange(32, 0xD800), r.randrange(0xE000, 0x110000)]))
        return text[:i] + ch + text[i:]
    if kind < 0.79:  # numbers
        nums = [m for m in re.finditer(r"\d+(\.\d+)?", text)]
        if nums:
            m = r.choice(nums)
            return text[:m.start()] + r.choice(HUGE) + text[m.end():]
        return text + r.choice(HUGE)
    if kind < 0.83:  # deep nesting
        depth = r.choice([50, 200, 1000, 5000, 30000]) if r.random() < 0.3 else r.choice([20, 100, 600])
        spots = [m.start() for m in re.finditer(r"[A-Z][A-Za-z0-9]*\[|\d+|\b[a-z]\b", text)]
        i = r.choice(spots) if spots else len(text) // 2
        style = r.random()
        if style < 0.4:
            return text[:i] + "(" * depth + text[i:].replace(";", ")" * depth + ";", 1)
        if style < 0.6:
            return text[:i] + "-" * depth + text[i:]
        if style < 0.75:
            return text[:i] + "~" * depth + text[i:]
        if style < 0.9:
            inner = "X"
            for _ in range(min(depth, 3000)):
                inner = f"exp({inner})" if r.random() < 0.5 else f"({inner} + 1)"
            return text.replace("}", f"  Q = {inner};\n}}", 1)
        return text[:i] + "(" * depth + text[i:]  # unbalanced
    if kind < 0.86:  # long inputs
        big = r.random() < 0.3
        lines = text.split(";")
        if len(lines) > 1 and r.random() < 0.6:
            k = r.randrange(len(lines) - 1)
            return ";".join(lines[:k + 1] + [lines[k]] * (r.choice([100, 1000, 5000]) if big else r.choice([3, 10, 30])) + lines[k + 1:])
        name = "A" + "a" * (r.choice([10000, 200000]) if big else r.choice([10, 100]))
        return text.replace("A", name)
    if kind < 0.93:  # splice
        other = r.choice(pool)
        i, j = r.randrange(len(text) + 1), r.randrange(len(other) + 1)
        return text[:i] + other[j:]
    # truncate
    return text[:r.randrange(len(text) + 1)]


_NORM = [(re.compile(r"'[^']*'"), "'_'"), (re.compile(r"\d+"), "0"), (re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b(?=\s*[\[(])"), "N")]


def signature(outcome: str, cls: str, msg: str) -> str:
    m = msg.split("\n")[0]
    m = re.sub(r"^.*?:\d+:\d+: error: ", "", m)
    for rx, rep in _NORM:
        m = rx.sub(rep, m)
    return f"{outcome}:{cls}:{m[:60]}"


def run_one(text: str, deep: bool) -> Tuple[str, str, str, str]:
    """(outcome, class, message, traceback) for one input; outcome ok/error/bad."""
    import numpy as np

    import polytile
    from polytile import sema
    from polytile.errors import PolytileError, TileSyntaxError
    from polytile.frontends.tile import parse
    stage = "parse"
    try:
        prog = parse(text)
        stage = "check"
        sema.check(prog)
        if deep:
            stage = "reference"
            dims = {}
            for inp in prog.inputs:
                for d in inp.dims or ():
                    if isinstance(d, str):
                        dims[d] = 2
            shapes = polytile.shapes_from_dims(prog, dims)
            if sum(int(np.prod(s, dtype=np.float64)) for s in shapes) > 1_000_000:
                return "ok", "", "check (inputs too big for the oracle stage)", ""
            arrays = [np.ones(s, np.float32) for s in shapes]
            polytile.reference(prog, *arrays)
        return "ok", "", stage, ""
    except PolytileError as e:
        if isinstance(e, TileSyntaxError) and e.loc is None:
            return "bad", type(e).__name__, f"[{stage}] syntax error without a location: {e.message}", ""
        return "error", type(e).__name__, f"[{stage}] {e.message}", ""
    except Exception as e:  # noqa: BLE001
        return "bad", type(e).__name__, f"[{stage}] {e}"[:500], traceback.format_exc(limit=-8)


def worker(conn) -> None:
    import warnings
    warnings.simplefilter("ignore")
    while True:
        item = conn.recv()
        if item is None:
            break
        text, deep = item
        conn.send(run_one(text, deep))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--corpus", default=str(CORPUS), help="where to keep interesting inputs ('' to not keep)")
    ap.add_argument("--max-corpus", type=int, default=400)
    args = ap.parse_args(argv)

    r = random.Random(args.seed)
    pool = seeds()
    corpus = Path(args.corpus) if args.corpus else None
    known = set()
    if corpus:
        corpus.mkdir(parents=True, exist_ok=True)
        sigfile = corpus / "SIGNATURES.json"
        if sigfile.exists():
            known = set(json.loads(sigfile.read_text()))
    started = time.time()
    counts = collections.Counter()
    sigs = collections.Counter()
    failures: List[Dict] = []
    slow: List[Tuple[float, str]] = []
    saved = [0]

    def jobs():
        for n in range(args.n):
            text = r.choice(pool)
            for _ in range(r.choice([1, 1, 1, 2, 3, 4])):
                text = mutate(text, r, pool)
                if len(text) > MAX_CHARS:
                    break
            deep = r.random() < 0.125
            if len(text) > MAX_CHARS:  # a mutation blow-up (e.g. a long name times a long text): not an input
                counts["skipped_too_long"] += 1
                continue
            yield (n, text, deep)

    def on_result(job, res, secs) -> None:
        n, text, deep = job
        outcome, cls, msg, tb = res
        counts[outcome] += 1
        counts["inputs"] += 1
        sig = signature(outcome, cls, msg)
        sigs[sig] += 1
        if secs > 2:
            slow.append((round(secs, 2), text[:200]))
        if outcome == "bad":
            if len(failures) < 200:
                failures.append({"n": n, "class": cls, "message": msg, "traceback": tb, "seconds": round(secs, 2),
                                 "input": text if len(text) < 5000 else text[:5000] + f"... ({len(text)} chars)"})
            print(f"[{n}] BAD {cls}: {msg[:200]}", flush=True)
        if corpus and outcome != "bad" and sig not in known and len(text) <= 2000 and len(known) < args.max_corpus:
            known.add(sig)
            h = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
            (corpus / f"{outcome}-{h}.tile").write_text(text, encoding="utf-8", errors="surrogatepass")
            saved[0] += 1
        if counts["inputs"] % 10000 == 0:
            print(f"{counts['inputs']} inputs, {dict(counts)}, {len(sigs)} signatures, "
                  f"{counts['inputs'] / (time.time() - started):.0f}/s", flush=True)

    def on_reply(job, res, failure, secs) -> None:
        if failure is not None:
            res = ("bad", "Timeout" if failure.startswith("no answer") else "WorkerDied", failure, "")
            secs = min(secs, args.timeout)
        on_result(job, res, secs)

    runner = WorkerPool(worker, (), args.workers, args.timeout)
    try:
        runner.run(jobs(), send=lambda job: (job[1], job[2]), on_result=on_reply)
    finally:
        runner.close()
    if corpus:
        (corpus / "SIGNATURES.json").write_text(json.dumps(sorted(known), indent=0))
    out = {"provenance": {"command": " ".join([sys.executable] + sys.argv), "seed": args.seed, "n": args.n,
                          "elapsed_s": round(time.time() - started, 1), "timeout_s": args.timeout,
                          "seeds": len(pool)},
           "counts": dict(counts), "signatures": len(sigs), "corpus_saved": saved[0],
           "top_signatures": dict(sigs.most_common(80)), "slowest": sorted(slow, reverse=True)[:20],
           "failures": failures}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({k: out[k] for k in ("counts", "signatures", "corpus_saved")}, indent=1))
    return 1 if counts["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
