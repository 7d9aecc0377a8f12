from pathlib import Path

import pytest

from bayesldp.workflows.spec import SpecError, load_spec, validate_study

MODELS = Path(__file__).resolve().parents[2] / "models"
GOOD = {
    "study": {"name": "t", "n": 100},
    "population": {"kind": "uniform", "k": 3},
    "mechanisms": [{"name": "GRR", "epsilon": 1.0}],
}


def test_quickstart_spec_is_valid():
    spec = load_spec(MODELS / "quickstart.toml")
    assert spec["study"]["name"] == "quickstart"


def test_defaults_filled():
    spec = validate_study(GOOD)
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
        ({"estimators": {"methods": []}}, r"\[estimators\]\.methods: needs at least one method"),
        ({"bayes": {"hdi_prob": 1.5}}, r"\[bayes\]\.hdi_prob: must lie in \(0, 1\)"),
        ({"bayes": {"hdi_prob": 1}}, r"\[bayes\]\.hdi_prob: must lie in \(0, 1\)"),
        ({"bayes": {"draws": 0}}, r"\[bayes\]\.draws"),
        ({"bayes": {"prior": "jeffreys"}}, r"\[bayes\]\.prior: the named priors are"),
        ({"bayes": {"prior": 0}}, r"\[bayes\]\.prior: "),
        ({"bayes": {"prior": [1.0, 2.0]}}, r"\[bayes\]\.prior: "),
        ({"bayes": {"method": "mcmc"}}, r"\[bayes\]\.method: 'mcmc' is not one of"),
    ],
)
def test_bad_specs_name_the_key(patch, message):
    with pytest.raises(SpecError, match=message):
        validate_study(GOOD | patch)


def test_bayes_prior_left_out_is_fits_default():
    assert validate_study(GOOD)["bayes"]["prior"] is None


def test_bayes_prior_may_be_adaptive():
    spec = validate_study(GOOD | {"bayes": {"prior": "adaptive"}})
    assert spec["bayes"]["prior"] == "adaptive" and spec["bayes_requested"]


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[study\nname=1")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)


def test_dataset_population_resolves_k():
    spec = validate_study(GOOD | {"population": {"kind": "dataset", "dataset": "anes96_party_id"}})
    assert spec["population"]["k"] == 7
    with pytest.raises(SpecError, match=r"\[population\]\.dataset: 'nope' is not one of"):
        validate_study(GOOD | {"population": {"kind": "dataset", "dataset": "nope"}})
    with pytest.raises(SpecError, match=r"\[population\]\.k: data set 'anes96_party_id' has k = 7"):
        validate_study(
            GOOD | {"population": {"kind": "dataset", "dataset": "anes96_party_id", "k": 3}}
        )


SHIPPED = {
    "quickstart.toml": "study",
    "real_data.toml": "study",
    "survey.toml": "survey",
    "live_survey.toml": "survey",
    "adobest_grid.toml": "grid",
    "accuracy.toml": "accuracy",
    "longitudinal.toml": "rounds",
    "attributes.toml": "attributes",
    "key_value.toml": "study",
    "heavy_hitters.toml": "heavy_hitters",
}


def test_every_shipped_spec_is_valid():
    """Every file in models/ (found by an absolute path) loads through the one loader."""
    found = {path.name for path in MODELS.glob("*.toml")}
    assert found == set(SHIPPED)
    for name, kind in SHIPPED.items():
        spec = load_spec(MODELS / name)
        assert spec["kind"] == kind
        text = (MODELS / name).read_text()
        assert f'kind = "{kind}"' in text  # declared, not only recognised


def test_kind_is_declared_or_recognised(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('kind = "sruvey"\n[survey]\nn = 10\nk = 3\n')
    with pytest.raises(SpecError, match="kind: 'sruvey' is not one of study, survey, grid"):
        load_spec(path)
    path.write_text(
        "[survey]\nname = 's'\nn = 10\nk = 3\nepsilon = 1.0\n[population]\nkind = 'uniform'\n"
    )
    assert load_spec(path)["kind"] == "survey"
    with pytest.raises(SpecError, match="is a 'survey' spec, expected a 'grid' spec"):
        load_spec(path, kind="grid")
    path.write_text("[something]\nx = 1\n")
    with pytest.raises(SpecError, match="cannot tell the kind"):
        load_spec(path)


def test_mechanism_parameters_come_from_the_registry():
    bad = GOOD | {"mechanisms": [{"name": "GRR", "epsilon": 1.0, "g": 3}]}
    with pytest.raises(SpecError, match=r"\[\[mechanisms\]\]\[0\]: GRR: does not take g"):
        validate_study(bad)
    bad = GOOD | {"mechanisms": [{"name": "RRRR", "epsilon": 1.0}]}
    with pytest.raises(SpecError, match="RRRR: needs subset"):
        validate_study(bad)
    good = GOOD | {"mechanisms": [{"name": "RRRR", "epsilon": 1.0, "subset": [0]}]}
    assert validate_study(good)["mechanisms"][0]["subset"] == [0]


@pytest.mark.parametrize(
    "given, canonical", [("grr", "GRR"), ("KRR", "GRR"), ("hr", "HadamardResponse"), ("oue", "OUE")]
)
def test_mechanism_names_are_case_insensitive_and_aliases(given, canonical):
    """Spec names go through registry.canonical_name, as the command line's do."""
    spec = validate_study(GOOD | {"mechanisms": [{"name": given, "epsilon": 1.0}]})
    assert spec["mechanisms"][0]["name"] == canonical
    with pytest.raises(SpecError, match=r"\[\[mechanisms\]\]\[0\]\.name: mechanism: unknown name"):
        validate_study(GOOD | {"mechanisms": [{"name": "nope", "epsilon": 1.0}]})


def test_accuracy_mechanism_lists_are_canonicalised():
    from bayesldp.workflows.spec import validate_accuracy

    raw = {
        "study": {"name": "a"},
        "mle": {"epsilon": [1.0], "ue_mechanisms": ["oue", "sue"], "ue_n": [100]},
        "em_mr": {"k": 4, "n": [100], "epsilon": [1.0], "mechanisms": ["krr"],
                  "full": {"mechanisms": ["olh"]}},
    }  # fmt: skip
    spec = validate_accuracy(raw)
    assert spec["mle"]["ue_mechanisms"] == ["OUE", "SUE"]
    assert spec["em_mr"]["mechanisms"] == ["GRR"]
    assert spec["em_mr"]["full"]["mechanisms"] == ["OLH"]
    raw["em_mr"]["mechanisms"] = ["hr"]  # a registered mechanism, not one this section runs
    with pytest.raises(SpecError, match=r"\[em_mr\]\.mechanisms\[0\]: 'HadamardResponse' is not"):
        validate_accuracy(raw)


def test_population_labels():
    """[population].labels, K distinct strings; a data set's labels by default."""
    spec = validate_study(
        GOOD | {"population": {"kind": "uniform", "k": 3, "labels": ["a", "b", "c"]}}
    )
    assert spec["population"]["labels"] == ["a", "b", "c"]
    assert validate_study(GOOD)["population"]["labels"] is None
    dataset = {"kind": "dataset", "dataset": "seattle_weather"}
    spec = validate_study(GOOD | {"population": dataset})
    assert spec["population"]["labels"] == ["drizzle", "fog", "rain", "snow", "sun"]
    short = ["d", "f", "r", "sn", "su"]
    spec = validate_study(GOOD | {"population": dataset | {"labels": short}})
    assert spec["population"]["labels"] == short  # the spec's labels win
    for labels, message in [
        (["a", "b"], r"\[population\]\.labels: expected 3 labels \(one per category\), got 2"),
        (["a", "b", "a"], r"\[population\]\.labels: must be distinct; 'a' labels categories 0"),
        (["a", "b", ""], r"\[population\]\.labels\[2\]: is empty"),
        (["a", "b", 3], r"\[population\]\.labels\[2\]: expected a string, got 3"),
        ("abc", r"\[population\]\.labels: expected a list, got 'abc'"),
    ]:
        with pytest.raises(SpecError, match=message):
            validate_study(GOOD | {"population": {"kind": "uniform", "k": 3, "labels": labels}})
    with pytest.raises(SpecError, match=r"labels: expected 5 labels"):
        validate_study(GOOD | {"population": dataset | {"labels": ["x"]}})


def _kind(name: str) -> dict:
    """A shipped spec of ``name``'s kind, parsed (without ``kind``)."""
    import tomllib

    raw = tomllib.loads((MODELS / name).read_text())
    raw.pop("kind", None)
    return raw


def _validate(kind: str, raw: dict) -> dict:
    from bayesldp.workflows import spec as specs

    return getattr(specs, f"validate_{kind}")(raw)


@pytest.mark.parametrize(
    "name, kind, path, value, message",
    [
        (
            "quickstart.toml",
            "study",
            ("mechanisms", 0, "epsilon"),
            [1.0, 1.0],
            r"\[\[mechanisms\]\]\[0\]\.epsilon: 1\.0 is listed twice \(items 0 and 1\); "
            r"each value is one run: list it once$",
        ),
        (
            "quickstart.toml",
            "study",
            ("estimators", "methods"),
            ["mle", "mle"],
            r"\[estimators\]\.methods: 'mle' is listed twice \(items 0 and 1\)",
        ),
        (
            "quickstart.toml",
            "study",
            ("mechanisms", 0, "epsilon"),
            [1, 2.0, 1.0],
            r"\.epsilon: 1\.0 is listed twice \(items 0 and 2\)",
        ),
        (
            "longitudinal.toml",
            "rounds",
            ("mechanisms", 0, "epsilon"),
            [2.0, 2.0],
            r"\[\[mechanisms\]\]\[0\]\.epsilon: 2\.0 is listed twice",
        ),
        (
            "longitudinal.toml",
            "rounds",
            ("estimators", "methods"),
            ["mle", "mle"],
            r"\[estimators\]\.methods: 'mle' is listed twice",
        ),
        (
            "attributes.toml",
            "attributes",
            ("protocols", 0, "epsilon"),
            [1.0, 1.0],
            r"\[\[protocols\]\]\[0\]\.epsilon: 1\.0 is listed twice",
        ),
        (
            "attributes.toml",
            "attributes",
            ("estimators", "methods"),
            ["mle", "mle"],
            r"\[estimators\]\.methods: 'mle' is listed twice",
        ),
        (
            "heavy_hitters.toml",
            "heavy_hitters",
            ("methods", 0, "epsilon"),
            [1.0, 1.0],
            r"\[\[methods\]\]\[0\]\.epsilon: 1\.0 is listed twice",
        ),
        ("adobest_grid.toml", "grid", ("grid", "k"), [10, 10], r"\[grid\]\.k: 10 is listed twice"),
        (
            "adobest_grid.toml",
            "grid",
            ("grid", "epsilon"),
            [0.5, 0.5],
            r"\[grid\]\.epsilon: 0\.5 is listed twice",
        ),
        (
            "adobest_grid.toml",
            "grid",
            ("grid", "rho"),
            [1.0, 1.0],
            r"\[grid\]\.rho: 1\.0 is listed twice",
        ),
        (
            "accuracy.toml",
            "accuracy",
            ("mle", "epsilon"),
            [1.0, 1.0],
            r"\[mle\]\.epsilon: 1\.0 is listed twice",
        ),
        (
            "accuracy.toml",
            "accuracy",
            ("mle", "estimators"),
            ["mle", "mle"],
            r"\[mle\]\.estimators: 'mle' is listed twice",
        ),
        (
            "accuracy.toml",
            "accuracy",
            ("em_mr", "mechanisms"),
            ["GRR", "krr"],
            r"\[em_mr\]\.mechanisms: 'krr' is listed twice",
        ),
        (
            "accuracy.toml",
            "accuracy",
            ("sampling", "pi"),
            [0.5, 0.5],
            r"\[sampling\]\.pi: 0\.5 is listed twice",
        ),
    ],
)
def test_a_value_listed_twice_is_refused(name, kind, path, value, message):
    """A grid's list that repeats a value would report the same run twice: one line naming
    the field and the value."""
    raw = _kind(name)
    table = raw
    for key in path[:-1]:
        table = table[key]
    table[path[-1]] = value
    with pytest.raises(SpecError, match=message) as caught:
        _validate(kind, raw)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "name, kind, array, message",
    [
        (
            "quickstart.toml",
            "study",
            "mechanisms",
            r"\[\[mechanisms\]\]\[\d+\]: repeats \[\[mechanisms\]\]\[0\] \(\w+ at epsilon "
            r"[\d.]+\); each entry and epsilon is one run: list it once$",
        ),
        ("longitudinal.toml", "rounds", "mechanisms", r"repeats \[\[mechanisms\]\]\[0\]"),
        (
            "attributes.toml",
            "attributes",
            "protocols",
            r"repeats \[\[protocols\]\]\[0\] \(SPL at epsilon 1\)",
        ),
        ("heavy_hitters.toml", "heavy_hitters", "methods", r"repeats \[\[methods\]\]\[0\]"),
    ],
)
def test_an_entry_listed_twice_is_refused(name, kind, array, message):
    raw = _kind(name)
    raw[array] = [*raw[array], dict(raw[array][0])]
    with pytest.raises(SpecError, match=message):
        _validate(kind, raw)
    # the same name at other epsilons, or with other parameters, is another run
    other = dict(raw[array][0])
    other["epsilon"] = 0.123
    raw[array][-1] = other
    _validate(kind, raw)
