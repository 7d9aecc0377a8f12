import pytest

from bayesldp.workflows.spec import SpecError, load_spec, validate_spec

GOOD = {
    "study": {"name": "t", "n": 100},
    "population": {"kind": "uniform", "k": 3},
    "mechanisms": [{"name": "GRR", "epsilon": 1.0}],
}


def test_quickstart_spec_is_valid():
    spec = load_spec("models/quickstart.toml")
    assert spec["study"]["name"] == "quickstart"


def test_defaults_filled():
    spec = validate_spec(GOOD)
    assert spec["study"]["repeats"] == 1 and spec["estimators"]["methods"] == ["oracle"]
    assert spec["bayes_requested"] is False


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"study": {"name": "t", "n": 100, "colour": 1}}, r"\[study\]\.colour: unknown key"),
        ({"study": {"name": "t", "n": "ten"}}, r"\[study\]\.n: expected an integer, got 'ten'"),
        ({"study": {"name": "t"}}, r"\[study\]\.n: missing"),
        ({"population": {"kind": "weird", "k": 3}}, r"\[population\]\.kind: 'weird' is not one"),
        ({"mechanisms": [{"name": "GRR"}]}, r"\[\[mechanisms\]\]\[0\]\.epsilon: missing"),
        ({"mechanisms": [{"name": "GRR", "epsilon": -1}]}, r"epsilon: values must be > 0"),
        ({"mechanisms": []}, r"at least one"),
        ({"extra": {}}, r"\[extra\]: unknown table"),
    ],
)
def test_bad_specs_name_the_key(patch, message):
    with pytest.raises(SpecError, match=message):
        validate_spec(GOOD | patch)


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[study\nname=1")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)


def test_dataset_population_resolves_k():
    spec = validate_spec(GOOD | {"population": {"kind": "dataset", "dataset": "anes96_party_id"}})
    assert spec["population"]["k"] == 7
    with pytest.raises(SpecError, match=r"\[population\]\.dataset: 'nope' is not one of"):
        validate_spec(GOOD | {"population": {"kind": "dataset", "dataset": "nope"}})
    with pytest.raises(SpecError, match=r"\[population\]\.k: data set 'anes96_party_id' has k = 7"):
        validate_spec(
            GOOD | {"population": {"kind": "dataset", "dataset": "anes96_party_id", "k": 3}}
        )


def test_every_shipped_spec_is_valid():
    from pathlib import Path

    for path in sorted(Path("models").glob("*.toml")):
        if path.name.startswith("adobest"):
            continue  # the survey grid has its own schema (bayesldp.workflows.grid)
        if path.name == "survey.toml":
            from bayesldp.workflows.survey import load_survey_spec

            load_survey_spec(path)
            continue
        if path.name == "accuracy.toml":
            continue  # read by benchmarks/accuracy.py with its own schema
        load_spec(path)
