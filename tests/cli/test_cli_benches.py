"""ADR 0019: `kernbench list`, `kernbench run N`, a bench's own options and `kernbench run NAME --help`."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tests.cli import REPO_ROOT, run_kernbench_in_process

SHIPPED = REPO_ROOT / "kernbench" / "benches"


def shipped_benches() -> list[Path]:
    """The shipped bench files in the order `kernbench list` numbers them: by name."""
    return sorted((path for path in SHIPPED.glob("*.py") if not path.name.startswith("_")), key=lambda p: p.stem)


def first_docstring_line(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())).strip().splitlines()[0]


def squeezed(text: str) -> str:
    """The text with its line wrapping undone, so a wrapped description compares whole."""
    return " ".join(text.split())


# A bench whose import fails: `list` must say why on its row.
BROKEN_BENCH = '"""Fails to import."""\nimport no_such_module_here\n\ndef run(torch):\n    pass\n'


def write_bench(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture(scope="module")
def listing(tmp_path_factory) -> tuple[object, Path]:
    folder = tmp_path_factory.mktemp("benches")
    write_bench(folder, "with_options.py", '''\
        """Copies a tensor to every SIP and back."""

        def add_arguments(parser):
            parser.add_argument("--size", metavar="N", type=int, default=1024, help="elements per copy")

        def run(torch, argv=()):
            pass
        ''')
    write_bench(folder, "plain.py", '"""Does nothing, quickly."""\n\ndef run(torch):\n    pass\n')
    write_bench(folder, "helper.py", 'raise SystemExit("a helper module with no run: never imported")\n')
    write_bench(folder, "broken.py", BROKEN_BENCH)
    return run_kernbench_in_process("list", str(folder), cwd=folder), folder


def test_adr0019_t1_list_numbers_the_shipped_benches_with_their_descriptions_and_options(listing):
    result, _ = listing
    assert result.returncode == 0, result.stderr
    text = squeezed(result.stdout)
    for number, path in enumerate(shipped_benches(), 1):
        assert f" {number} {path.stem} {first_docstring_line(path)}" in text
    assert "options: [--algorithms A,B] [--collectives C,D] [--min-bytes N] [--max-bytes N]" in text


@pytest.mark.quick
def test_adr0019_t2_list_path_shows_the_folders_benches_without_importing_other_files(listing):
    result, folder = listing
    assert result.returncode == 0, result.stderr
    text = squeezed(result.stdout)
    assert f"{folder / 'with_options.py'} Copies a tensor to every SIP and back. options: [--size N]" in text
    assert f"{folder / 'plain.py'} Does nothing, quickly." in text
    assert f"{folder / 'broken.py'} Fails to import. cannot be loaded:" in text
    assert "no_such_module_here" in text
    assert "helper.py" not in text and "never imported" not in result.stderr


def test_adr0019_t3_run_takes_the_number_list_gives(tmp_path):
    from kernbench.cli.bench_loader import resolve_bench_path

    benches = shipped_benches()
    assert [resolve_bench_path(str(n)).resolve() for n in range(1, len(benches) + 1)] == benches
    result = run_kernbench_in_process("run", str(len(benches) + 1), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f"kernbench: error: no bench numbered {len(benches) + 1}; `kernbench list` numbers the "
                             f"shipped benches 1 to {len(benches)} (a bench in a folder runs by its path)\n")


def test_adr0019_t4_run_bench_help_shows_the_benches_own_options(tmp_path):
    sweep = run_kernbench_in_process("run", "ccl_sweep", "--help", cwd=tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    assert sweep.stdout.startswith("usage: kernbench run ccl_sweep [kernbench run options] [--algorithms A,B]")
    assert "options of ccl_sweep:" in sweep.stdout
    for option in ("--algorithms", "--collectives", "--min-bytes", "--max-bytes", "--factor", "--dtype", "--plot"):
        assert f"\n  {option} " in sweep.stdout
    from kernbench.cli.bench_loader import load_bench_entry
    from kernbench.cli.run_cmd import format_bench_help

    plain = format_bench_help(load_bench_entry("gemm"))
    assert "gemm takes no options of its own" in plain
    own = run_kernbench_in_process("run", "--help", cwd=tmp_path)
    assert own.returncode == 0 and "--timing-only" in own.stdout and "kernbench run BENCH --help" in squeezed(own.stdout)


@pytest.mark.quick
def test_adr0019_t5_a_benches_options_are_checked_before_it_runs_and_must_reach_run(tmp_path, capsys):
    from kernbench.cli import main

    bench = write_bench(tmp_path, "sized.py", '''\
        def add_arguments(parser):
            parser.add_argument("--size", type=int, default=8)

        def run(torch, argv):
            print("the bench ran")
        ''')
    assert main(["run", str(bench), "--size", "many"]) == 2
    bad = capsys.readouterr()
    assert "the bench ran" not in bad.out
    assert bad.err == ("kernbench: error: sized: argument --size: invalid int value: 'many' "
                       "(usage: sized [--size SIZE])\n")
    deaf = write_bench(tmp_path, "deaf.py", '''\
        def add_arguments(parser):
            parser.add_argument("--size", type=int, default=8)

        def run(torch):
            print("the bench ran")
        ''')
    assert main(["run", str(deaf)]) == 2
    refused = capsys.readouterr()
    assert "the bench ran" not in refused.out
    assert f"{deaf}:4: the bench declares options (add_arguments) but run takes none" in refused.err


def test_adr0019_t18_a_double_dash_separates_the_benches_options_as_in_any_command_line(tmp_path, capsys):
    from kernbench.cli import main

    bench = write_bench(tmp_path, "sized.py", '''\
        def add_arguments(parser):
            parser.add_argument("--size", type=int, default=8)

        def run(torch, argv):
            print("argv", list(argv))
        ''')
    assert main(["run", str(bench), "--timing-only", "--", "--size", "16"]) == 0
    assert "argv ['--size', '16']" in capsys.readouterr().out


def test_adr0019_t32_list_of_a_folder_with_long_paths_keeps_every_word_whole(tmp_path, monkeypatch, capsys):
    """On a terminal too narrow for a description beside a long path, the description goes under it; neither
    a word nor a path is cut, so the module a bench lacks and the path that failed read whole."""
    from kernbench.cli import main

    folder = tmp_path / ("a_folder_with_a_long_name_" * 3)
    folder.mkdir()
    write_bench(folder, "broken.py", BROKEN_BENCH)
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["list", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index(f"    {folder / 'broken.py'}")  # the name alone on its line
    assert lines[at + 1] == "      Fails to import."
    words = " ".join(lines[at + 2:]).split()
    assert f"{folder / 'broken.py'}:2:" in words and "'no_such_module_here'" in words
