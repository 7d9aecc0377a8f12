"""The mechanism registry: one list that the CLI, specs and report readers read."""

import textwrap

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms import all_parameters, make_mechanism, mechanism_class, names, registry
from bayesldp.workflows.cli import main, recommend_candidates
from bayesldp.workflows.report_files import read_reports

REQUIRED = {"RRRR": {"subset": [0, 2]}}


@pytest.mark.parametrize("name", names())
def test_every_registered_mechanism_builds_and_is_exported(name):
    mech = make_mechanism(name, 5, 1.0, **REQUIRED.get(name, {}))
    assert type(mech) is mechanism_class(name) is getattr(bayesldp, name)
    assert mech.realised_epsilon() == pytest.approx(1.0, rel=1e-9)
    assert isinstance(mech.report_size(), str)


@pytest.mark.parametrize("name", names())
def test_every_registered_mechanism_rebuilds_from_its_params(name):
    """What a fit's attrs and a tally store keep (``params()``) gives the mechanism back, for
    the ones sized by keys (PCKV: ``d``) or value bins (PCKV-PM: ``bins``) too."""
    mech = make_mechanism(name, 5, 1.0, **REQUIRED.get(name, {}))
    assert mech.SIZE in mech.params()
    assert registry.rebuild_mechanism(name, mech.params()) == mech


def test_key_value_mechanisms_are_registered():
    assert mechanism_class("pckv-grr") is bayesldp.PCKV
    assert mechanism_class("PCKV-PM") is bayesldp.PCKVPM
    assert make_mechanism("PCKV", 4, 1.0, ell=2).k == 2 * (4 + 2)  # joint (key, sign) categories
    assert make_mechanism("PCKVPM", 8, 1.0, lo=0.0, hi=2.0).k == 9  # value bins and "absent"


def test_node_sampling_says_which_mechanism_reads_its_reports():
    with pytest.raises(InvalidInputError, match="not a report format: node sampling is ignor"):
        mechanism_class("NodeSampling")


def test_lookup_is_case_insensitive_with_aliases():
    assert mechanism_class("olh") is bayesldp.OLH
    assert mechanism_class("HR") is mechanism_class("hadamardresponse") is bayesldp.HadamardResponse
    with pytest.raises(InvalidInputError, match="unknown name 'XYZ'; valid: GRR, SUE"):
        mechanism_class("XYZ")


def test_parameters_are_declared_by_the_classes():
    assert {p.name for p in bayesldp.OLH.PARAMETERS} == {"g"}
    assert set(all_parameters()) == {
        *("g", "threshold", "subset", "eps1", "d"),
        *("m", "k_hash", "hash_seed"),  # the count-mean sketches
        *("lo", "hi", "output_bins", "delta", "half_width"),  # the numerical mechanisms
        *("candidates", "num_bits", "num_hashes", "cohorts", "f", "other"),
        *("ell", "epsilon_value"),  # PCKV
        "eps_perm",  # the longitudinal mechanisms
        "values",  # dBitFlipPM (its d is SubsetSelection's name)
    }
    assert make_mechanism("OLH", 10, 1.0, g=3).g == 3
    assert make_mechanism("OLH", 10, 1.0, g=None).g == bayesldp.OLH(10, 1.0).g  # None: default
    with pytest.raises(InvalidInputError, match="GRR: does not take g; it takes no parameter"):
        make_mechanism("GRR", 10, 1.0, g=3)
    with pytest.raises(InvalidInputError, match="RRRR: needs subset; it takes subset, eps1"):
        make_mechanism("RRRR", 10, 1.0)
    assert "RRRR" not in recommend_candidates() and "GRR" in recommend_candidates()


@pytest.mark.parametrize("name", names())
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_reports_round_trip_through_a_file(name, suffix, tmp_path):
    mech = make_mechanism(name, 6, 2.0, **REQUIRED.get(name, {}))
    reports = mech.perturb(mech.category_values(np.arange(300) % 6), rng=1)
    frame = mech.reports_to_frame(reports)
    path = tmp_path / f"reports{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    params = REQUIRED.get(name, {})
    if name == "THE":
        params = {"threshold": mech.threshold}
    again, tally = read_reports(path, name, k=6, epsilon=2.0, **params)
    assert again == mech
    assert tally == mech.tally(reports)


def test_aggregated_counts_stay_integers(tmp_path):
    path = tmp_path / "counts.csv"
    big = 2**53 + 1  # not representable as a float64
    path.write_text(f"report,count\n0,{big}\n1,2\n")
    _, tally = read_reports(path, "GRR", k=3, epsilon=1.0)
    assert tally.n == big + 2


FOO = textwrap.dedent(
    '''
    """A hypothetical new mechanism: binary-coded GRR, one file."""

    from bayesldp.mechanisms.grr import GRR


    class Foo(GRR):
        name = "Foo"
    '''
)


def test_a_new_mechanism_is_one_file_and_one_registry_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "foo_mechanism.py").write_text(FOO)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.MODULES, "Foo", "foo_mechanism")  # the registry line
    assert make_mechanism("foo", 4, 1.0).name == "Foo"
    assert main(["audit", "Foo", "--k", "4", "--epsilon", "1", "--trials", "2000"]) == 0
    assert main(["recommend", "--k", "4", "--epsilon", "1", "--n", "1000"]) == 0
    assert "| Foo |" in capsys.readouterr().out
    path = tmp_path / "r.csv"
    path.write_text("report\n0\n1\n1\n3\n")
    assert main(["estimate", str(path), "--mechanism", "Foo", "--k", "4", "--epsilon", "1"]) == 0
    assert "Foo(k=4, epsilon=1): 4 reports" in capsys.readouterr().out
