import csv

from bayesldp.cli import main


def test_run_quickstart_writes_report(tmp_path, capsys):
    out = tmp_path / "qs"
    assert main(["run", "models/quickstart.toml", "--out", str(out), "--quick", "--quiet"]) == 0
    report = (out / "report.md").read_text()
    assert "| GRR | 1 | oracle |" in report
    assert (out / "error_by_method.png").stat().st_size > 1000
    with (out / "estimates.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 10 and all(r["estimate"] for r in rows)


def test_same_seed_same_report(tmp_path):
    for name in ("a", "b"):
        main(
            [
                "run",
                "models/quickstart.toml",
                "--out",
                str(tmp_path / name),
                "--quick",
                "--quiet",
                "--no-figures",
            ]
        )
    assert (tmp_path / "a" / "estimates.csv").read_text() == (
        tmp_path / "b" / "estimates.csv"
    ).read_text()


def test_bad_spec_is_one_line_error(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text(
        '[study]\nname = "x"\nn = "many"\n[population]\nkind="uniform"\nk=3\n'
        '[[mechanisms]]\nname="GRR"\nepsilon=1\n'
    )
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[study].n: expected an integer" in err[0]


def test_audit_command(capsys):
    assert main(["audit", "GRR", "--k", "5", "--epsilon", "1", "--trials", "20000"]) == 0
    out = capsys.readouterr().out
    assert "realised epsilon" in out and "no violation" in out
