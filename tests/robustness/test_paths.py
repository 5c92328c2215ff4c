"""Every output path is checked before any work (issue 14, item 4): a file where a folder is
needed (or the reverse), a parent that is a file, a read-only folder, a result database or cache
folder that cannot be written — each one line naming the path and the fix, exit 2, JSON with
`--json`, nothing written, and earlier results intact. A missing parent is made."""

from __future__ import annotations

import pytest

from prism.errors import OutputPathError, ResultDBError

MIRAGE = "lora.json"
SMALL = ("--shape", "X=8x64", "--shape", "W=64x64", "--max-block-ops", "3", "--grid-dims", "1")


def assert_refused(run, kind, *words):
    """Exit 2, one JSON error document of `kind` whose message holds `words`."""
    assert run.code == 2, run
    assert run.error["type"] == kind, run.error
    for w in words:
        assert w in run.error["message"], (w, run.error["message"])
    assert "\n" not in run.error["message"]


# -- a file where a folder is needed, and the reverse -------------------------------------------

@pytest.mark.parametrize("argv", [
    ("optimize", "rmsnorm_matmul", *SMALL, "--out", "{file}"),
    ("check", "--out", "{file}"),
    ("import-mirage", "{corpus}/" + MIRAGE, "--out", "{file}"),
    ("render", "{corpus}/" + MIRAGE, "-o", "{file}"),            # many graphs: a folder
], ids=["optimize--out", "check--out", "import-mirage--out", "render-o-many"])
def test_a_file_where_a_folder_is_needed(cli, tmp_path, corpus_dir, argv):
    file = tmp_path / "a_file"
    file.write_text("mine\n")
    args = [a.format(file=file, corpus=corpus_dir) for a in argv]
    run = cli(*args, "--db", tmp_path / "db.jsonl", "--json") if args[0] == "optimize" else \
        cli(*args, "--json")
    assert_refused(run, "OutputPathError", str(file), "a file is there, not a folder")
    assert file.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]     # nothing written


@pytest.mark.parametrize("argv,option", [
    (("render", "rmsnorm_matmul", "-o", "{dir}"), "-o"),
    (("search", "rmsnorm_matmul", *SMALL, "--trace", "{dir}"), "--trace"),
    (("search", "rmsnorm_matmul", *SMALL, "--checkpoint", "{dir}"), "--checkpoint"),
], ids=["render-o", "search--trace", "search--checkpoint"])
def test_a_folder_where_a_file_is_needed(cli, tmp_path, argv, option):
    folder = tmp_path / "a_folder"
    folder.mkdir()
    (folder / "kept.txt").write_text("mine\n")
    run = cli(*[a.format(dir=folder) for a in argv], "--json")
    assert_refused(run, "OutputPathError", f"{option} {folder}", "a folder is there, not a file")
    assert [p.name for p in folder.iterdir()] == ["kept.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_folder"]


@pytest.mark.parametrize("argv,option", [
    (("optimize", "rmsnorm_matmul", *SMALL, "--out", "{file}/out"), "--out"),
    (("import-mirage", "{corpus}/" + MIRAGE, "--out", "{file}/out"), "--out"),
    (("render", "rmsnorm_matmul", "-o", "{file}/x.svg"), "-o"),
    (("search", "rmsnorm_matmul", *SMALL, "--trace", "{file}/t.jsonl"), "--trace"),
    (("search", "rmsnorm_matmul", *SMALL, "--checkpoint", "{file}/c.json"), "--checkpoint"),
], ids=["optimize--out", "import-mirage--out", "render-o", "search--trace",
        "search--checkpoint"])
def test_a_parent_that_is_a_file(cli, tmp_path, corpus_dir, argv, option):
    file = tmp_path / "a_file"
    file.write_text("mine\n")
    args = [a.format(file=file, corpus=corpus_dir) for a in argv]
    extra = ("--db", tmp_path / "db.jsonl") if args[0] == "optimize" else ()
    run = cli(*args, *extra, "--json")
    assert_refused(run, "OutputPathError", option, f"{file} is a file, so no folder can be made")
    assert file.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


# -- a missing parent is made, and the command does its work --------------------------------------

def test_a_missing_parent_is_made_for_every_kind_of_output(cli, tmp_path, corpus_dir):
    deep = tmp_path / "a" / "b"
    run = cli("import-mirage", corpus_dir / MIRAGE, "--out", deep / "graphs", "--json")
    assert run.code == 0 and len(list((deep / "graphs").glob("*.json"))) == len(run.doc["graphs"])
    run = cli("render", "rmsnorm_matmul", "-o", deep / "svg" / "x.svg", "--json")
    assert run.code == 0 and run.doc["files"] == [str(deep / "svg" / "x.svg")]
    assert (deep / "svg" / "x.svg").read_text().lstrip().startswith("<")
    assert not [p for p in deep.rglob("*") if ".partial-" in p.name or p.name.endswith(".lock")]


# -- read-only folders (for root too: the uid is dropped for the command) -------------------------

@pytest.mark.parametrize("argv,option", [
    (("optimize", "rmsnorm_matmul", *SMALL, "--out", "{ro}/out"), "--out"),
    (("optimize", "rmsnorm_matmul", *SMALL, "--out", "{ro}"), "--out"),
    (("check", "--out", "{ro}/out"), "--out"),
    (("import-mirage", "{corpus}/" + MIRAGE, "--out", "{ro}/out"), "--out"),
    (("render", "rmsnorm_matmul", "-o", "{ro}/x.svg"), "-o"),
    (("search", "rmsnorm_matmul", *SMALL, "--trace", "{ro}/t.jsonl"), "--trace"),
    (("search", "rmsnorm_matmul", *SMALL, "--checkpoint", "{ro}/c.json"), "--checkpoint"),
    (("optimize", "rmsnorm_matmul", *SMALL, "--checkpoint", "{ro}/c.json", "--out",
      "{ro}/../out"), "--checkpoint"),
], ids=["optimize--out-inside", "optimize--out-itself", "check--out", "import-mirage--out",
        "render-o", "search--trace", "search--checkpoint", "optimize--checkpoint"])
def test_a_read_only_folder_is_found_before_any_work(cli, locked_folder, corpus_dir, argv,
                                                     option):
    with locked_folder() as ro:
        args = [a.format(ro=ro, corpus=corpus_dir) for a in argv]
        extra = ("--db", ro.parent / "db.jsonl") if args[0] == "optimize" else ()
        run = cli(*args, *extra, "--json")
        assert_refused(run, "OutputPathError", option, "is not writable",
                       "Permission denied", "choose a folder you can write to")
        assert list(ro.iterdir()) == []
        assert not (ro.parent / "out").exists()


def test_a_result_database_in_a_read_only_folder_is_found_before_the_search(cli, locked_folder,
                                                                            tmp_path):
    with locked_folder() as ro:
        run = cli("optimize", "rmsnorm_matmul", *SMALL, "--out", ro.parent / "out",
                  "--db", ro / "db.jsonl", "--json")
        assert_refused(run, "ResultDBError", f"the result database {ro / 'db.jsonl'} cannot be "
                       "written", "Permission denied", "--db")
        assert not (ro.parent / "out").exists()    # refused before the output folder is made


def test_an_unwritable_cache_folder_is_found_before_the_search(cli, locked_folder, monkeypatch):
    with locked_folder() as ro:
        monkeypatch.setenv("PRISM_CACHE_DIR", str(ro / "cache"))
        run = cli("optimize", "rmsnorm_matmul", *SMALL, "--out", ro.parent / "out", "--json")
        assert_refused(run, "ResultDBError", str(ro / "cache" / "results.jsonl"),
                       "PRISM_CACHE_DIR")
        assert not (ro.parent / "out").exists()


def test_a_result_database_that_is_a_folder(cli, tmp_path, earlier, snapshot, siblings):
    out, before = earlier
    (tmp_path / "db").mkdir()
    run = cli("optimize", "rmsnorm_matmul", *SMALL, "--out", out, "--db", tmp_path / "db",
              "--json")
    assert_refused(run, "ResultDBError", f"the result database {tmp_path / 'db'} cannot be "
                   "read", "Is a directory", "--db")
    assert snapshot(out) == before and siblings(out) == []


def test_the_python_api_checks_its_output_paths_too(tmp_path, earlier, snapshot, siblings):
    from prism.pipeline import superoptimize
    from prism.tune import ResultDB
    out, before = earlier
    file = tmp_path / "a_file"
    file.write_text("mine\n")
    with pytest.raises(OutputPathError, match="a file is there, not a folder"):
        superoptimize("rmsnorm_matmul", out=file, db=None)
    db = ResultDB(tmp_path / "db.jsonl")
    (tmp_path / "db.jsonl").mkdir()         # a folder took the database's place since
    with pytest.raises(ResultDBError, match="cannot be written"):
        superoptimize("rmsnorm_matmul", out=out, db=db)
    assert file.read_text() == "mine\n"
    assert snapshot(out) == before and siblings(out) == []
