"""``polytile examples`` and ``polytile.examples``: the shipped example programs."""
import doctest
from pathlib import Path

import pytest

import polytile.examples as shipped
from polytile.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent


def test_every_example_file_ships():
    assert shipped.names() == sorted(p.stem for p in (ROOT / "examples").glob("*.tile"))
    for name, what in shipped.catalogue():
        assert what and not what.startswith("//"), name
    assert shipped.path("matmul.tile") == shipped.path("matmul")
    with pytest.raises(KeyError):
        shipped.path("no_such_example")


def test_module_doctest():
    assert doctest.testmod(shipped).failed == 0


def test_list_and_print(capsys):
    assert cli_main(["examples"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{n} " in "\n" + out for n in shipped.names())
    assert cli_main(["examples", "softmax"]) == 0
    assert capsys.readouterr().out == (ROOT / "examples" / "softmax.tile").read_text()
    assert cli_main(["examples", "nope"]) == 1
    err = capsys.readouterr().err
    assert "no example named 'nope'" in err and "Traceback" not in err


def test_copy_never_overwrites(tmp_path, capsys):
    dest = tmp_path / "ex"
    assert cli_main(["examples", "matmul", "--copy", str(dest)]) == 0
    assert [p.name for p in dest.iterdir()] == ["matmul.tile"]
    mine = dest / "dot.tile"
    mine.write_text("// my own edit\n")
    capsys.readouterr()
    assert cli_main(["examples", "--copy", str(dest)]) == 0
    out = capsys.readouterr().out
    assert mine.read_text() == "// my own edit\n"
    assert f"kept your {mine}" in out and "1 already there" in out
    assert len(list(dest.glob("*.tile"))) == len(shipped.names())
    # A copied example runs as it is.
    assert cli_main(["run", str(dest / "matmul.tile"), "--dims", "M=8,N=8,K=8", "--check"]) == 0
    # --copy onto a file is a clear error.
    assert cli_main(["examples", "--copy", str(mine)]) == 1
    assert "not a directory" in capsys.readouterr().err
