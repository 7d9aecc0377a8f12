"""The settings of an AdOBEst-LDP survey, validated once and frozen (:class:`SurveyConfig`).

The config is what a checkpoint stores (:meth:`SurveyConfig.to_dict`, JSON) and what a resumed
survey is rebuilt from (:meth:`SurveyConfig.from_dict`); the derived constants (``eps1``, the
rule code, the candidate channels' parameters, the stream keys) are computed from it.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesldp._validation import (
    check_choice,
    check_epsilon,
    check_int,
    check_k,
    check_positive,
    check_probability,
)
from bayesldp.adaptive.selection import RULES
from bayesldp.adaptive.utilities import UTILITIES
from bayesldp.bayes.prior import AdaptiveDirichlet, Dirichlet, as_dirichlet, as_prior
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError

ENGINES = ("posterior", "sgld", "fit")
#: settings added after the first checkpoints were written, with the value that reproduces them
#: (a checkpoint without them was made by the "sgld" or "fit" engine, which do not read them)
LATER_SETTINGS = {"refresh": 0.25, "pool_draws": 100, "pool_tune": 200,
                  "lookahead_test": "per_size", "lookahead_score": "mle",
                  "lookahead_truth": "draws"}  # fmt: skip
#: how the lookahead rule admits a subset over GRR (bayesldp.adaptive.lookahead)
LOOKAHEAD_TESTS = ("per_size", "split")
#: which estimate's simulated error the lookahead rule scores (bayesldp.adaptive.lookahead)
LOOKAHEAD_SCORES = ("mle", "posterior")
#: what the lookahead rule simulates as the population (bayesldp.adaptive.lookahead)
LOOKAHEAD_TRUTHS = ("draws", "mean")


@dataclass(frozen=True)
class SurveyConfig:
    """Validated settings of an :class:`~bayesldp.adaptive.AdaptiveSurvey` (see its parameters).

    ``prior`` holds the Dirichlet concentrations ``rho`` or, for the adaptive prior, its
    :meth:`~bayesldp.bayes.AdaptiveDirichlet.to_dict`; ``entropy`` and ``spawn_key`` the seed of
    every random stream of the survey.

    Examples
    --------
    A survey's settings, validated, as it keeps them:

    >>> from bayesldp.adaptive import AdaptiveSurvey
    >>> config = AdaptiveSurvey(3, 1.0, random_seed=0).config
    >>> config.k, config.epsilon, config.utility, config.engine
    (3, 1.0, 'lookahead', 'posterior')
    """

    k: int
    epsilon: float
    utility: str
    alpha: float | None
    eps1_fraction: float
    prior: tuple[float, ...] | dict[str, Any]
    engine: str
    batch_size: int
    sgld_steps_per_user: int
    minibatch: int
    step_size: float | None
    n_expected: int | None
    final_steps: int
    burn_in: int
    fit_method: str
    refresh: float
    pool_draws: int
    pool_tune: int
    lookahead_test: str
    lookahead_score: str
    lookahead_truth: str
    entropy: int
    spawn_key: tuple[int, ...]

    @classmethod
    def create(cls, **settings: Any) -> SurveyConfig:
        """Validate the settings (``random_seed`` or ``entropy``/``spawn_key``) into a config."""
        settings = {**LATER_SETTINGS, **settings}
        if "random_seed" in settings:
            settings["entropy"], settings["spawn_key"] = seed_entropy(settings.pop("random_seed"))
        k = check_k(settings["k"])
        engine = _check_engine(settings["engine"], settings["fit_method"])
        utility = settings["utility"]
        if utility is None:  # the engine's default rule
            utility = "lookahead" if engine == "posterior" else "fisher"
        rule = canonical_rule(utility)
        if rule == "lookahead" and engine != "posterior":
            raise InvalidInputError(
                f"utility: 'lookahead' chooses |S| from the posterior pool of "
                f"engine='posterior', got engine={engine!r}"
            )
        return cls(
            k=k,
            epsilon=check_epsilon(settings["epsilon"]),
            utility=rule,
            alpha=_check_alpha(settings["alpha"], rule),
            eps1_fraction=check_probability(settings["eps1_fraction"], "eps1_fraction"),
            prior=_check_prior(settings["prior"], k, engine),
            engine=engine,
            batch_size=check_int(settings["batch_size"], "batch_size", 1),
            sgld_steps_per_user=check_int(settings["sgld_steps_per_user"], "sgld_steps_per_user"),
            minibatch=check_int(settings["minibatch"], "minibatch", 1),
            step_size=_optional(settings["step_size"], check_positive, "step_size"),
            n_expected=_optional(settings["n_expected"], check_int, "n_expected"),
            final_steps=check_int(settings["final_steps"], "final_steps", 2),
            burn_in=_check_burn_in(settings["burn_in"], settings["final_steps"]),
            fit_method=settings["fit_method"],
            refresh=check_positive(settings["refresh"], "refresh"),
            pool_draws=check_int(settings["pool_draws"], "pool_draws", 1),
            pool_tune=check_int(settings["pool_tune"], "pool_tune", 0),
            lookahead_test=check_choice(
                settings["lookahead_test"], "lookahead_test", LOOKAHEAD_TESTS
            ),
            lookahead_score=check_choice(
                settings["lookahead_score"], "lookahead_score", LOOKAHEAD_SCORES
            ),
            lookahead_truth=check_choice(
                settings["lookahead_truth"], "lookahead_truth", LOOKAHEAD_TRUTHS
            ),
            entropy=_check_entropy(settings["entropy"]),
            spawn_key=tuple(int(v) for v in settings["spawn_key"]),
        )

    # ------------------------------------------------------------------ derived constants
    @property
    def eps1(self) -> float:
        """RRRR's first-stage budget: ``epsilon`` (semi-adaptive rule), else the fraction."""
        return (
            self.epsilon if self.utility == "semi_adaptive" else self.eps1_fraction * self.epsilon
        )

    @property
    def dirichlet(self) -> Dirichlet | AdaptiveDirichlet:
        """The prior: a :class:`~bayesldp.bayes.Dirichlet` or the adaptive prior."""
        if isinstance(self.prior, dict):
            return AdaptiveDirichlet.from_dict(self.prior)
        return as_dirichlet(np.asarray(self.prior), self.k)

    @property
    def rho(self) -> np.ndarray:
        """Fixed Dirichlet concentrations for the SGLD (the adaptive prior's have none: ones)."""
        return np.ones(self.k) if isinstance(self.prior, dict) else np.asarray(self.prior)

    @property
    def gamma(self) -> float | None:
        """The SGLD step: ``step_size``, else ``0.5 / n_expected`` (None while neither is set)."""
        if self.step_size is not None:
            return self.step_size
        return None if self.n_expected is None else 0.5 / self.n_expected

    def stream_keys(self) -> tuple[np.uint64, np.uint64]:
        """The two words that seed every batch's random streams (stream 2 of the seed)."""
        seq = np.random.SeedSequence(self.entropy, spawn_key=(*self.spawn_key, 2))
        key = seq.generate_state(2, np.uint64)
        return np.uint64(key[0]), np.uint64(key[1])

    def with_n_expected(self, n: int) -> SurveyConfig:
        """This config with the planned number of users fixed (the first simulate does it)."""
        return dataclasses.replace(self, n_expected=check_int(n, "n_expected"))

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly settings (what a checkpoint stores)."""
        out = dataclasses.asdict(self)
        out["prior"] = dict(self.prior) if isinstance(self.prior, dict) else list(self.prior)
        out["entropy"] = str(self.entropy)
        out["spawn_key"] = list(self.spawn_key)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SurveyConfig:
        """Rebuild (and re-validate) a config from :meth:`to_dict` output."""
        missing = sorted(
            {f.name for f in dataclasses.fields(cls)} - set(data) - set(LATER_SETTINGS)
        )
        if missing:
            raise InvalidInputError(f"config: lacks {', '.join(missing)}")
        return cls.create(
            **{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        )

    def differences(self, other: SurveyConfig) -> list[str]:
        """The names of the settings in which ``other`` differs from this config."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [name for name in mine if mine[name] != theirs[name]]


# ---------------------------------------------------------------------------------- checks
def canonical_rule(utility: Any) -> str:
    """The rule's canonical name (``"U1"`` to ``"U6"`` map to the six utilities)."""
    if not isinstance(utility, str):
        raise InvalidTypeError(f"utility: expected one of {', '.join(RULES)}, got {utility!r}")
    names = list(UTILITIES)
    if utility.upper() in {f"U{i}" for i in range(1, 7)}:
        return names[int(utility[1]) - 1]
    if utility not in RULES:
        raise InvalidInputError(
            f"utility: unknown {utility!r}; valid: {', '.join(RULES)} (or U1..U6)"
        )
    return utility


def seed_entropy(random_seed: Any) -> tuple[int, tuple[int, ...]]:
    """The entropy and spawn key of a seed (int, SeedSequence, Generator or None: fresh)."""
    if random_seed is None:
        ss = np.random.SeedSequence()
    elif isinstance(random_seed, np.random.SeedSequence):
        ss = random_seed
    elif isinstance(random_seed, np.random.Generator):
        ss = np.random.SeedSequence(int(random_seed.integers(0, 2**63 - 1)))
    elif isinstance(random_seed, numbers.Integral) and not isinstance(random_seed, bool):
        if random_seed < 0:
            raise InvalidInputError(
                f"random_seed: must be a non-negative integer, got {random_seed}"
            )
        ss = np.random.SeedSequence(int(random_seed))
    else:
        raise InvalidTypeError(
            "random_seed: expected a non-negative int, a SeedSequence, a numpy Generator or None, "
            f"got {type(random_seed).__name__}"
        )
    entropy = ss.entropy
    if not isinstance(entropy, numbers.Integral):  # a sequence of ints
        entropy = int.from_bytes(np.asarray(entropy, dtype=np.uint64).tobytes(), "little")
    return int(entropy), tuple(int(v) for v in ss.spawn_key)


def _check_alpha(alpha: Any, rule: str) -> float | None:
    if rule == "semi_adaptive":
        if alpha is None:
            raise InvalidInputError(
                "alpha: utility='semi_adaptive' needs the mass threshold alpha in (0, 1]"
            )
        return check_probability(alpha, "alpha")
    if alpha is not None:
        raise InvalidInputError(
            f"alpha: only used with utility='semi_adaptive', got alpha={alpha!r} with "
            f"utility={rule!r}"
        )
    return None


def _check_engine(engine: Any, fit_method: Any) -> str:
    if engine not in ENGINES:
        raise InvalidInputError(f"engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    if not isinstance(fit_method, str):
        raise InvalidTypeError(f"fit_method: expected a string, got {fit_method!r}")
    if engine == "fit":
        try:
            from bayesldp.bayes.fit import BACKENDS, _resolve_method
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise NotSupportedError(
                f"engine='fit' needs bayesldp.fit, which is not available: {exc}"
            ) from None
        if _resolve_method(fit_method) not in BACKENDS:  # pragma: no cover - raises first
            raise InvalidInputError(f"fit_method: unknown {fit_method!r}")
    return engine


def _check_prior(prior: Any, k: int, engine: str) -> tuple[float, ...] | dict[str, Any]:
    """The prior as stored: Dirichlet concentrations, or the adaptive prior's settings.

    ``None`` is the engine's default: the paper's ``Dirichlet(1)`` for the SGLD, the adaptive
    prior (:func:`bayesldp.fit`'s default) for the posterior engines.
    """
    if prior is None:
        prior = 1.0 if engine == "sgld" else "adaptive"
    if isinstance(prior, dict):  # a stored adaptive prior
        prior = AdaptiveDirichlet.from_dict(prior)
    if isinstance(prior, str) and prior != "adaptive":
        raise InvalidInputError(
            f"prior: the survey takes 'adaptive', a number, K numbers or a Dirichlet, got {prior!r}"
        )
    if isinstance(prior, str | AdaptiveDirichlet):
        if engine == "sgld":
            raise InvalidInputError(
                "prior: the SGLD engine needs a fixed Dirichlet prior (a number or K numbers); "
                "the adaptive prior is for engine='posterior' or 'fit'"
            )
        return as_prior(prior, k).to_dict()
    return tuple(float(v) for v in as_dirichlet(prior, k).alpha)


def _optional(value: Any, check: Any, name: str) -> Any:
    return None if value is None else check(value, name)


def _check_burn_in(burn_in: Any, final_steps: Any) -> int:
    burn_in = check_int(burn_in, "burn_in", 0)
    if burn_in >= final_steps:
        raise InvalidInputError(
            f"burn_in: must be smaller than final_steps = {final_steps}, got {burn_in}"
        )
    return burn_in


def _check_entropy(entropy: Any) -> int:
    try:
        return int(entropy)
    except (TypeError, ValueError):
        raise InvalidInputError("random_seed: the recorded entropy is not an integer") from None
